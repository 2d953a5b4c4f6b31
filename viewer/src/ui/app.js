// The viewer's pages: the index of recent runs (/ui/) and one run's live surfaces
// (/ui/runs/{runId}, the runId in its projected wire form). Light DOM, styled by viewer.css.

import { LitElement, html, nothing } from 'lit';

import { actionsBlockedBy, renderable } from '../core/surfaces.js';
import { migrateV1 } from '../core/migrate.js';
import { projectRunId, unprojectRunId } from '../core/wire.js';
import { buildSurface, UnsafeTreeError } from './a2ui.js';
import { RunController } from './run-controller.js';
import { authHeaders, probeUnauthorized, setToken, token, tokenChanged, NO_TOKENS_MESSAGE } from './auth.js';
import { renderMarkdown } from '../core/markdown.js';
import { Context } from '@a2ui/web_core/v0_9/basic_catalog';

const formatBytes = n => `${n.toLocaleString('en')} B`;

class LightElement extends LitElement {
  createRenderRoot() {
    return this;
  }
}

function tokenForm(message) {
  const submit = event => {
    event.preventDefault();
    setToken(new FormData(event.target).get('token')?.toString().trim() ?? '');
  };
  return html`
    <form class="token" @submit=${submit}>
      <p>${message}</p>
      <label>Bearer token <input name="token" type="password" autocomplete="off" .value=${token()} /></label>
      <button type="submit">Use</button>
      <small>Kept in this tab only (sessionStorage), sent as an Authorization header.</small>
    </form>
  `;
}

// -- /ui/ ----------------------------------------------------------------------------------------

class RunIndexView extends LightElement {
  static properties = {
    runs: { state: true },
    problem: { state: true },
    needsToken: { state: true },
    noTokens: { state: true },
  };

  constructor() {
    super();
    this.runs = null;
    this.problem = null;
    this.needsToken = false;
    this.noTokens = false; // the worker has no token configured: say so, do not ask for one
  }

  connectedCallback() {
    super.connectedCallback();
    this.refresh();
    this.timer = setInterval(() => this.refresh(), 3000);
  }

  disconnectedCallback() {
    super.disconnectedCallback();
    clearInterval(this.timer);
  }

  async refresh() {
    try {
      const response = await fetch('/ui/api/runs', { headers: authHeaders(), cache: 'no-store' });
      if (response.status === 401) {
        this.problem = null;
        this.noTokens = (await probeUnauthorized()) === 'no-tokens';
        if (!this.noTokens && !this.needsToken) tokenChanged().then(() => this.refresh());
        this.needsToken = !this.noTokens; // no-tokens: the timer checks again
        return;
      }
      const body = await response.json();
      if (!response.ok) throw new Error(body?.message ?? `HTTP ${response.status}`);
      this.needsToken = false;
      this.noTokens = false;
      this.problem = null;
      this.runs = body.runs;
    } catch (error) {
      this.problem = error.message;
    }
  }

  open(event) {
    event.preventDefault();
    const runId = new FormData(event.target).get('runId')?.toString().trim();
    if (runId) location.assign(`/ui/runs/${projectRunId(runId)}`);
  }

  render() {
    return html`
      <header class="bar"><h1>a2ui-stream viewer</h1><span class="muted">recent runs on this worker</span></header>
      ${this.noTokens ? html`<p class="auth-state" data-testid="no-tokens">${NO_TOKENS_MESSAGE}</p>` : nothing}
      ${this.needsToken
        ? tokenForm(token() ? 'The worker refused this token: enter one of its A2UI_STREAM_HTTP_TOKENS.' : 'This worker requires a bearer token to list runs.')
        : nothing}
      ${this.problem ? html`<p class="notice">${this.problem}</p>` : nothing}
      <form class="open" @submit=${this.open}>
        <label>Run id <input name="runId" placeholder="tenant/run-id" /></label>
        <button type="submit">Open</button>
      </form>
      ${this.runs === null
        ? this.needsToken || this.noTokens
          ? nothing
          : html`<p class="muted">Loading…</p>`
        : this.runs.length === 0
          ? html`<p class="muted">No run has a recorded event yet. Publish to the admission topic (key = runId) or POST /runs/{runId}/envelopes.</p>`
          : html`
              <table class="runs">
                <thead><tr><th>run</th><th>status</th><th>last sequence</th><th>events</th><th>last event</th></tr></thead>
                <tbody>
                  ${this.runs.map(run => html`
                    <tr data-run=${run.runId}>
                      <td><a href="/ui/runs/${projectRunId(run.runId)}">${run.runId}</a></td>
                      <td><span class="badge status-${run.status}">${run.status}</span></td>
                      <td>${run.lastSequence}</td>
                      <td>${run.events}</td>
                      <td>${run.updatedMs ? new Date(run.updatedMs).toLocaleString() : ''}</td>
                    </tr>`)}
                </tbody>
              </table>`}
    `;
  }
}
customElements.define('viewer-run-index', RunIndexView);

// -- /ui/runs/{runId} ------------------------------------------------------------------------------

class RunView extends LightElement {
  static properties = { runId: { type: String } };

  constructor() {
    super();
    this.rendered = new Map(); // surface key -> {held, reason, surface, dispose, error, migration}
  }

  connectedCallback() {
    super.connectedCallback();
    // The A2UI Text of the basic catalog asks its Lit context for a markdown renderer (the
    // context protocol: a composed 'context-request' event up the tree); this page answers
    // with its own safe one (core/markdown.js: escaped, no HTML, no links, no images).
    this.addEventListener('context-request', event => {
      if (event.context !== Context.markdown) return;
      event.stopPropagation();
      event.callback(renderMarkdown);
    });
    this.controller = new RunController(this.runId, () => this.requestUpdate());
    this.controller.run();
  }

  disconnectedCallback() {
    super.disconnectedCallback();
    this.controller.stop();
    for (const entry of this.rendered.values()) entry.dispose?.();
  }

  /** The A2UI surface model for `held`, rebuilt only when the surface or its gate changed. */
  model(held, blocked) {
    const cached = this.rendered.get(held.key);
    if (cached && cached.held === held && cached.blocked === blocked) return cached;
    cached?.dispose?.();
    const entry = { held, blocked, surface: null, dispose: null, error: null, unsafe: null, sourceIds: null };
    this.rendered.set(held.key, entry);
    if (!renderable(held)) return entry;
    const gate = { enabled: blocked === null, reason: blocked };
    try {
      let messages = held.content.messages;
      if (held.version === 1) {
        const migrated = migrateV1(held.content, held.key);
        messages = migrated.messages;
        entry.sourceIds = migrated.sourceIds;
      }
      const onAction = action => this.controller.sendAction(held.key, action, entry.sourceIds);
      const built = buildSurface(held.key, messages, gate, onAction);
      entry.surface = built.surface;
      entry.dispose = built.dispose;
    } catch (error) {
      if (error instanceof UnsafeTreeError) entry.unsafe = error.problem.message; // fail closed
      else entry.error = `the renderer refused this surface: ${error.message}`; // fail closed
    }
    return entry;
  }

  renderSurface(held) {
    const state = this.controller.state;
    const blocked = actionsBlockedBy(held, state);
    const entry = this.model(held, blocked);
    const title = held.version === 1 ? 'v1 surface' : held.key;
    let body;
    const unsafe = held.tree?.message ?? entry.unsafe;
    if (held.stale) body = html`<p class="notice" data-testid="fail-closed">Not rendered: ${held.reason}</p>`;
    else if (held.status === 'deleted') body = html`<p class="muted">Deleted (deleteSurface).</p>`;
    else if (unsafe) body = html`<p class="notice" data-testid="tree-unsafe">Not rendered, the component tree is unsafe to draw: ${unsafe}.</p>`;
    else if (!renderable(held)) body = html`<p class="muted">Waiting for the root component (A2UI: render needs root).</p>`;
    else if (entry.error) body = html`<p class="notice" data-testid="fail-closed">${entry.error}</p>`;
    else body = html`<a2ui-surface .surface=${entry.surface}></a2ui-surface>`;
    return html`
      <article
        class="surface ${held.trust}"
        data-surface=${held.key}
        data-version=${held.version}
        data-trust=${held.trust}
        data-state=${held.partial ? 'partial' : 'final'}
        data-status=${held.status}
        data-actions=${blocked === null ? 'enabled' : 'disabled'}
      >
        <header>
          <h2>${title}</h2>
          <span class="badge version">${held.version === 1 ? 'v1 → A2UI v0.9 (RFC 0209 map)' : 'A2UI v0.9'}</span>
          ${held.trust === 'untrusted'
            ? html`<span class="badge untrusted" data-testid="untrusted-badge">untrusted</span>`
            : html`<span class="badge trusted">trusted</span>`}
          <span class="badge ${held.partial ? 'partial' : 'final'}" data-testid="partial-state">${held.partial ? 'partial' : 'final'}</span>
          ${held.status === 'deleted' ? html`<span class="badge deleted">deleted</span>` : nothing}
          ${held.stale ? html`<span class="badge stale">stale</span>` : nothing}
          <span class="meta">seq ${held.sequence ?? '–'}</span>
        </header>
        <p class="gate">${blocked === null ? 'Actions enabled: buttons send to POST /runs/{runId}/actions.' : `Actions disabled: ${blocked}.`}</p>
        <div class="canvas">${body}</div>
      </article>
    `;
  }

  renderBytes() {
    const b = this.controller.state.bytes;
    const saved = b.fullEquivalent > 0 ? Math.round((1 - b.received / b.fullEquivalent) * 100) : 0;
    return html`
      <section class="bytes" data-testid="bytes">
        <div><strong>${formatBytes(b.received)}</strong> received in ${b.fullFrames + b.deltaFrames + b.otherFrames} frames</div>
        <div>${b.deltaFrames} RFC 0114 delta${b.deltaFrames === 1 ? '' : 's'}: <strong>${formatBytes(b.deltaReceived)}</strong></div>
        <div>as full frames: <strong data-testid="full-equivalent">${formatBytes(b.fullEquivalent)}</strong> (${saved}% saved)</div>
        <div class="muted">A delta is priced as the full event it replaced: the last full v1 event with the rebuilt payload.</div>
      </section>
    `;
  }

  renderTimeline() {
    const rows = [...this.controller.timeline].reverse();
    return html`
      <aside class="timeline">
        <h2>Timeline</h2>
        <table>
          <thead><tr><th>seq</th><th>event</th><th>bytes</th><th>what</th></tr></thead>
          <tbody>
            ${rows.map(row => html`
              <tr class="kind-${row.kind}" data-sequence=${row.sequence ?? ''}>
                <td>${row.sequence ?? ''}</td>
                <td>${row.event}${row.kind === 'delta' ? html` <span class="badge delta">delta</span>` : nothing}</td>
                <td title=${row.fullBytes ? `full frame: ${row.fullBytes} B` : ''}>${row.bytes}${row.fullBytes ? html` <span class="muted">/ ${row.fullBytes}</span>` : nothing}</td>
                <td>${row.summary}${row.note ? html`<div class="note">${row.note}</div>` : nothing}</td>
              </tr>`)}
          </tbody>
        </table>
      </aside>
    `;
  }

  renderActions() {
    const actions = this.controller.actions;
    if (!actions.length) return nothing;
    return html`
      <section class="actions-log">
        <h2>Actions sent</h2>
        <ul>
          ${actions.map(a => html`<li>${a.at} ${a.body.name} from ${a.body.sourceComponentId} on ${a.body.surfaceId}:
            ${a.status ?? ''} ${a.reply?.error ?? (a.status && a.status < 300 ? 'accepted' : '')} ${a.reply?.message ?? ''}</li>`)}
        </ul>
      </section>
    `;
  }

  render() {
    const c = this.controller;
    const state = c.state;
    return html`
      <header class="bar">
        <a href="/ui/">← runs</a>
        <h1 data-testid="run-id">${this.runId}</h1>
        <span class="badge status-${state.status}" data-testid="run-status">${state.status}</span>
        <span class="connection" data-testid="connection">${c.connection}</span>
        ${c.resyncs ? html`<span class="muted">${c.resyncs} resync${c.resyncs === 1 ? '' : 's'}</span>` : nothing}
      </header>
      ${c.connection === 'needs a token'
        ? tokenForm(c.problem)
        : c.connection === 'no tokens configured'
          ? html`<p class="auth-state" data-testid="no-tokens">${c.problem}</p>`
          : c.problem
            ? html`<p class="notice">${c.problem}</p>`
            : nothing}
      ${c.waiting
        ? html`<p class="waiting" data-testid="waiting">Waiting for the first event of this run: it appears here as soon as
            one is recorded (POST /runs/{runId}/envelopes, or a record with key = runId on the admission topic).</p>`
        : nothing}
      ${this.renderBytes()}
      <div class="layout">
        <section class="surfaces">
          ${state.order.length === 0
            ? c.waiting
              ? nothing
              : html`<p class="muted">No surface yet.</p>`
            : state.order.map(key => this.renderSurface(state.surfaces[key]))}
        </section>
        ${this.renderTimeline()}
      </div>
      ${this.renderActions()}
    `;
  }
}
customElements.define('viewer-run', RunView);

// -- routing ---------------------------------------------------------------------------------------

class ViewerApp extends LightElement {
  render() {
    const path = location.pathname;
    const match = /^\/ui\/runs\/([^/]+)\/?$/.exec(path);
    if (match) {
      const runId = unprojectRunId(match[1]);
      if (runId === null) return html`<p class="notice">Not a usable run id in this address.</p>`;
      document.title = `${runId} · a2ui-stream viewer`;
      return html`<viewer-run .runId=${runId}></viewer-run>`;
    }
    return html`<viewer-run-index></viewer-run-index>`;
  }
}
customElements.define('a2ui-viewer', ViewerApp);
