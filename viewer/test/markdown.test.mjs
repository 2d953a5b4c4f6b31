// The viewer's markdown renderer for A2UI Text (src/core/markdown.js): structure rendered, and
// nothing in the text can become markup of its own, a link or an image (issue 19 item 6).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { escapeHtml, renderMarkdown } from '../src/core/markdown.js';

const ALLOWED_TAGS = new Set(['p', 'br', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'ul', 'ol', 'li', 'blockquote', 'pre', 'code', 'strong', 'em', 'del', 'span']);

/** Every tag of `html` is one of ours, and the only attribute is class="md-link". */
function assertOnlyOurMarkup(html) {
  for (const [, close, name, attrs] of html.matchAll(/<(\/?)([a-zA-Z0-9]+)([^>]*)>/g)) {
    assert.ok(ALLOWED_TAGS.has(name.toLowerCase()), `tag <${close}${name}> in ${html}`);
    assert.ok(attrs === '' || attrs === ' class="md-link"', `attributes ${attrs} in ${html}`);
  }
}

test('structure: paragraphs, line breaks, headings, lists, quotes, code', () => {
  assert.equal(renderMarkdown('one\ntwo\n\nthree'), '<p>one<br>two</p><p>three</p>');
  assert.equal(renderMarkdown('# Title\n### Sub'), '<h1>Title</h1><h3>Sub</h3>');
  assert.equal(renderMarkdown('- a\n- b\n\n1. x\n2. y'), '<ul><li>a</li><li>b</li></ul><ol><li>x</li><li>y</li></ol>');
  assert.equal(renderMarkdown('> said\n> twice'), '<blockquote><p>said<br>twice</p></blockquote>');
  assert.equal(renderMarkdown('```\nif a < b:\n  *x*\n```'), '<pre><code>if a &lt; b:\n  *x*</code></pre>');
});

test('inline: bold, italic, strikethrough, code (unformatted inside)', () => {
  assert.equal(renderMarkdown('**bold** and *it* and _it_ and ~~gone~~'), '<p><strong>bold</strong> and <em>it</em> and <em>it</em> and <del>gone</del></p>');
  assert.equal(renderMarkdown('`**not bold**` 2 * 3 * 4'), '<p><code>**not bold**</code> 2 * 3 * 4</p>');
  assert.equal(renderMarkdown('snake_case_name'), '<p>snake_case_name</p>');
});

test('raw HTML is shown as text, never as markup', () => {
  const hostile = [
    '<script>alert(1)</script>',
    '<img src=x onerror=alert(1)>',
    '<a href="https://evil.example">x</a>',
    '<iframe src="https://evil.example"></iframe>',
    '**<b onclick="x()">bold</b>**',
    '<style>body{display:none}</style>',
    '"><svg onload=alert(1)>',
  ];
  for (const text of hostile) {
    const html = renderMarkdown(text);
    assertOnlyOurMarkup(html);
    assert.ok(!/<(script|img|a|iframe|svg|style|b)\b/i.test(html), html);
    assert.ok(html.includes('&lt;'), html);
  }
});

test('links and images never navigate or fetch: text only', () => {
  const html = renderMarkdown('see [the docs](https://evil.example/x?y=1) and ![logo](https://evil.example/l.png) <https://evil.example>');
  assertOnlyOurMarkup(html);
  assert.ok(!html.includes('href') && !html.includes('src='), html);
  assert.ok(html.includes('<span class="md-link">the docs</span>') && html.includes('[logo]'), html);
  assert.ok(!html.includes('<https'), html); // the autolink stays escaped text
  assertOnlyOurMarkup(renderMarkdown('[x](javascript:alert(1))'));
  assert.ok(!renderMarkdown('[x](javascript:alert(1))').includes('javascript:alert(1)">'));
});

test('anything typed in renders only our markup (a small fuzz over hostile pieces)', () => {
  const pieces = ['<', '>', '"', "'", '&', '*', '_', '`', '~~', '#', '- ', '1. ', '> ', '```', '\n', '\n\n', '[', ']', '(', ')', '!', 'a', 'on', '=', 'href', 'javascript:', '<script>', '</p>'];
  let seed = 19;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648);
  for (let n = 0; n < 2000; n += 1) {
    let text = '';
    for (let k = next() % 24; k > 0; k -= 1) text += pieces[next() % pieces.length];
    assertOnlyOurMarkup(renderMarkdown(text));
  }
});

test('escapeHtml escapes the five', () => {
  assert.equal(escapeHtml(`<a href="x" title='y'>&</a>`), '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
});
