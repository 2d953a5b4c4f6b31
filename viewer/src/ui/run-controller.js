// One run's live connection: reads the v1 event stream with RFC 0114 deltas
// (GET /v1/runs/{runId}/events?a2uiDelta=1&streamMode=debug), feeds every frame to the pure
// core (core/surfaces.js), keeps the timeline, reconnects after the last applied sequence when
// the stream drops, and resyncs (reconnects from the beginning, so every surface arrives in
// full) when the core fails a surface closed. Actions go to POST /runs/{runId}/actions only.

import { initialState, receive, isTerminal, actionsBlockedBy } from '../core/surfaces.js';
import { projectRunId } from '../core/wire.js';
import { readSse, HttpStatusError } from './sse.js';
import { authHeaders, tokenChanged, unauthorizedReason, NO_TOKENS_MESSAGE } from './auth.js';

const TIMELINE_LIMIT = 1000;
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

export class RunController {
  constructor(runId, onChange) {
    this.runId = runId;
    this.projected = projectRunId(runId);
    this.onChange = onChange;
    this.state = initialState();
    this.timeline = [];
    this.shownUpTo = -1; // timeline rows are not repeated when a resync replays the run
    this.connection = 'connecting';
    this.problem = null;
    this.waiting = false; // the run has no recorded event yet: a normal state, not an error
    this.resyncs = 0;
    this.lastFailure = null;
    this.resetting = false;
    this.actions = [];
    this.stopped = false;
    this.abort = null;
  }

  get streamUrl() {
    return `/v1/runs/${this.projected}/events?a2uiDelta=1&streamMode=debug`;
  }

  changed() {
    this.onChange();
  }

  stop() {
    this.stopped = true;
    this.abort?.abort();
  }

  async run() {
    let delay = 500;
    while (!this.stopped) {
      this.abort = new AbortController();
      const headers = authHeaders();
      // §9: an exclusive cursor; the host seeds its delta chain from what we hold at it
      if (this.state.lastSequence >= 0) headers['Last-Event-ID'] = String(this.state.lastSequence);
      this.connection = 'connecting';
      this.changed();
      try {
        await readSse(this.streamUrl, {
          headers,
          signal: this.abort.signal,
          onOpen: () => {
            this.connection = 'live';
            this.problem = null;
            this.waiting = false;
            delay = 500;
            this.changed();
          },
          onFrame: frame => this.onFrame(frame),
        });
        if (isTerminal(this.state)) {
          this.connection = `closed: the run is ${this.state.status}`;
          this.changed();
          return;
        }
      } catch (error) {
        if (this.stopped) return;
        if (!this.resetting) {
          if (error instanceof HttpStatusError && error.status === 401) {
            this.waiting = false;
            if (unauthorizedReason(error.body) === 'no-tokens') {
              // no token can work until the worker is restarted with some: check again later
              this.connection = 'no tokens configured';
              this.problem = NO_TOKENS_MESSAGE;
              this.changed();
              await Promise.race([tokenChanged(), sleep(5000)]);
              continue;
            }
            this.connection = 'needs a token';
            this.problem = authHeaders().Authorization
              ? 'The worker refused this token: enter one of its A2UI_STREAM_HTTP_TOKENS.'
              : 'This worker requires a bearer token (one of its A2UI_STREAM_HTTP_TOKENS).';
            this.changed();
            await tokenChanged();
            continue;
          }
          if (error instanceof HttpStatusError && error.status === 404) {
            // opened before the run's first event: wait for it, calmly
            this.connection = 'waiting for the first event';
            this.waiting = true;
            this.problem = null;
            delay = 1000;
          } else {
            this.connection = 'reconnecting';
            this.problem = error.message;
          }
        }
      }
      if (this.resetting) {
        this.resetting = false;
        this.state = { ...initialState(), bytes: this.state.bytes };
        continue;
      }
      this.changed();
      await sleep(delay);
      delay = Math.min(delay * 2, this.waiting ? 2000 : 5000);
    }
  }

  onFrame(frame) {
    if (this.resetting) return; // the rest of this connection is discarded
    const { state, outcome, entry } = receive(this.state, frame);
    this.state = state;
    if (entry.sequence === null || entry.sequence > this.shownUpTo) {
      this.timeline.push(entry);
      if (entry.sequence !== null) this.shownUpTo = entry.sequence;
      if (this.timeline.length > TIMELINE_LIMIT) this.timeline.splice(0, this.timeline.length - TIMELINE_LIMIT);
    }
    if (outcome.type === 'resync') this.resync(outcome, entry);
    this.changed();
  }

  resync(outcome, entry) {
    const signature = `${outcome.key}|${entry.sequence}|${outcome.reason}`;
    if (signature === this.lastFailure) {
      // the full surface fails too: keep it unrendered, do not loop
      this.timeline.push({ sequence: null, event: 'fail-closed', kind: 'note', bytes: 0, summary: outcome.key ?? '', note: `still invalid after a resync, not rendered: ${outcome.reason}` });
      return;
    }
    this.lastFailure = signature;
    this.resyncs += 1;
    this.timeline.push({ sequence: null, event: 'resync', kind: 'note', bytes: 0, summary: outcome.key ?? '', note: `reconnecting from the start for full surfaces: ${outcome.reason}` });
    this.resetting = true;
    this.abort?.abort();
  }

  /** Send one A2UI action (only from an enabled surface; re-checked here at send time). */
  async sendAction(key, action, sourceIds) {
    const held = this.state.surfaces[key];
    const blocked = held ? actionsBlockedBy(held, this.state) : 'the surface is gone';
    const body = {
      surfaceId: key,
      sourceComponentId: sourceIds?.[action.sourceComponentId] ?? action.sourceComponentId,
      name: action.name,
      context: action.context ?? {},
    };
    const record = { at: new Date().toLocaleTimeString(), body, status: null, reply: null };
    this.actions.push(record);
    if (blocked) {
      record.reply = { error: 'blocked', message: blocked };
      this.changed();
      return;
    }
    try {
      const response = await fetch(`/runs/${this.projected}/actions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...authHeaders() },
        body: JSON.stringify(body),
      });
      record.status = response.status;
      record.reply = await response.json().catch(() => null);
    } catch (error) {
      record.reply = { error: 'network', message: error.message };
    }
    this.changed();
  }
}
