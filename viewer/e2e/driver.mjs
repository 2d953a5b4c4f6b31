// A line-protocol driver of headless Debian Chromium for the Python browser test
// (tests/integration/test_viewer.py): one JSON command per stdin line, one JSON answer per
// stdout line. playwright-core drives the system browser (executablePath); no browser download.
//
// Commands: goto {url} · wait {selector, text?, state?, waitMs?} · query {selector}
//           click {selector, text?} · evaluate {expression} · screenshot {path} · requests ·
//           problems · close
// `evaluate` runs a JavaScript expression on the page's main thread and answers its JSON value:
// it only answers when the page's event loop turns, so it tells a responsive tab from a hung one.
// Every request the browser context makes is recorded (`requests`), so the test can check that
// nothing leaves 127.0.0.1; console errors and page errors are recorded (`problems`).
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

const executablePath = process.env.A2UI_STREAM_CHROMIUM || '/usr/bin/chromium';
const browser = await chromium.launch({
  executablePath,
  headless: true,
  // polyglot.md: without these Chromium reaches for Google's hosts at every start
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--disable-features=Translate,OptimizationHints,MediaRouter',
  ],
});
const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
const requests = [];
const problems = [];
context.on('request', request => requests.push({ url: request.url(), method: request.method() }));
const page = await context.newPage();
page.on('console', message => {
  if (message.type() === 'error') problems.push(`console: ${message.text()}`);
});
page.on('pageerror', error => problems.push(`pageerror: ${error.message}`));
page.on('response', response => {
  if (response.status() >= 400) problems.push(`HTTP ${response.status()}: ${response.url()}`);
});

function locate({ selector, text }) {
  const found = page.locator(selector);
  return text ? found.filter({ hasText: text }) : found;
}

const handlers = {
  async goto({ url }) {
    await page.goto(url, { waitUntil: 'load' });
    return {};
  },
  async wait({ selector, text, state = 'visible', waitMs = 30000 }) {
    await locate({ selector, text }).first().waitFor({ state, timeout: waitMs });
    return {};
  },
  async query({ selector }) {
    const elements = await page.locator(selector).evaluateAll(nodes =>
      nodes.map(node => ({
        tag: node.tagName.toLowerCase(),
        text: (node.textContent || '').trim(),
        value: 'value' in node ? node.value : null,
        disabled: node.disabled === true || node.hasAttribute('disabled'),
        attrs: Object.fromEntries([...node.attributes].map(a => [a.name, a.value])),
      })),
    );
    return { elements };
  },
  async click({ selector, text }) {
    await locate({ selector, text }).first().click({ timeout: 10000 });
    return {};
  },
  async evaluate({ expression }) {
    const value = await page.evaluate(expression);
    return { value };
  },
  async screenshot({ path }) {
    await page.screenshot({ path, fullPage: true });
    return {};
  },
  async requests() {
    return { requests };
  },
  async problems() {
    return { problems };
  },
  async close() {
    await browser.close();
    return {};
  },
};

const write = answer => process.stdout.write(JSON.stringify(answer) + '\n');
write({ ok: true, ready: true, version: browser.version() });
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  let command;
  try {
    command = JSON.parse(line);
    const handler = handlers[command.cmd];
    if (!handler) throw new Error(`unknown command ${command.cmd}`);
    write({ ok: true, ...(await handler(command)) });
  } catch (error) {
    write({ ok: false, error: String(error?.stack || error) });
  }
  if (command?.cmd === 'close') break;
}
await browser.close().catch(() => {});
