// The viewer's surfaces, kept up to date from the run's event stream with the subscriber's
// rules (app/core/projection/subscriber.py; RFC 0114; openwop-a2ui.md §6, §7, §10):
// - every v1 full surface and every post-patch v1 surface is RE-VALIDATED against the closed v1
//   catalog before it is held; every v2 envelope's payload against the v0.9 profile, its
//   messages folded (§6: createSurface / updateComponents upsert / updateDataModel /
//   deleteSurface) with the fold guard, and the folded components re-validated;
// - a delta applies only to the v1 surface held, with the same catalogVersion, strictly;
// - on ANY failure the surface is kept but marked stale (never rendered, no actions) and the
//   outcome asks for a resync: the viewer reconnects without a cursor and the host sends full
//   surfaces again (RFC 0114: store-without-render, await re-materialization);
// - trust is monotone per surface (RFC 0143, RFC 0209 §C.12): once untrusted, always untrusted;
// - actions are enabled only on a fresh, renderable, trusted, final, live surface of a run that
//   is not terminal (E1, §7, rule 3);
// - a v2 surface whose children/child graph the renderer would walk forever (a cycle, also one
//   closed across envelopes) or absurdly far (core/tree.js) is held but never rendered: `tree`
//   names the problem and the component where it closes, until a later update removes it.
//   This is no validation failure (the fold is in the profile), so it asks for no resync.
// `receive(state, frame)` is a pure step: it returns a new state and never throws on any input.
// Pure: no DOM, no network.

import { applyPatch, PatchError } from './patch.js';
import { V1, V2, jsonEqual } from './schema.js';
import { V1_SURFACE_ID } from './migrate.js';
import { treeProblem } from './tree.js';
import { utf8Length } from './wire.js';

export const SURFACE_EVENT = 'ui.a2ui-surface';
export const DELTA_EVENT = 'ui.a2ui-surface.delta';
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
// app/core/runlog/run_lifecycle.py STATUS_AFTER
const STATUS_AFTER = {
  'run.created': 'running',
  'run.forked': 'running',
  'node.suspended': 'waiting-approval',
  'interrupt.resolved': 'running',
  'run.completed': 'completed',
  'run.failed': 'failed',
  'run.cancelled': 'cancelled',
};
const MESSAGE_KINDS = ['createSurface', 'updateComponents', 'updateDataModel', 'deleteSurface'];
const MAX_COMPONENTS_PER_MESSAGE = 512;
const MAX_MESSAGES = 64;

const isObject = value => value !== null && typeof value === 'object' && !Array.isArray(value);

export function initialState() {
  return {
    surfaces: {}, // key -> held surface; key = surfaceId (v2) or "~v1"
    order: [], // keys in first-seen order
    status: 'running',
    lastSequence: -1,
    v1Event: null, // the last full v1 event (to price a delta as the full frame it replaced)
    bytes: { received: 0, deltaReceived: 0, fullEquivalent: 0, fullFrames: 0, deltaFrames: 0, otherFrames: 0 },
  };
}

export const isTerminal = state => TERMINAL.has(state.status);

/** §6 render-needs-root; a stale or deleted surface, or one whose tree is unsafe to walk
 * (core/tree.js), is never rendered. */
export function renderable(held) {
  if (held.stale || held.status !== 'live' || held.tree) return false;
  return held.version === 1 || Object.prototype.hasOwnProperty.call(held.content.components, 'root');
}

/** Why actions are disabled on `held` (null: enabled). E1, §7, v1 rule 3. */
export function actionsBlockedBy(held, state) {
  if (held.stale) return 'the surface failed validation (awaiting a full frame)';
  if (held.status !== 'live') return 'the surface was deleted';
  if (held.tree) return `the surface is not rendered: ${held.tree.message}`;
  if (!renderable(held)) return 'the surface has no root component yet';
  if (held.trust !== 'trusted') return 'untrusted content blocks actions';
  if (held.partial) return 'the envelope is partial (not final)';
  if (isTerminal(state)) return `the run is ${state.status}`;
  return null;
}

function trustOf(doc, envelope) {
  const stated = [doc.contentTrust, doc.payload?.trust, envelope?.meta?.contentTrust];
  return stated.includes('untrusted') ? 'untrusted' : 'trusted';
}

function withSurface(state, key, held) {
  const order = state.order.includes(key) ? state.order : [...state.order, key];
  return { ...state, surfaces: { ...state.surfaces, [key]: held }, order };
}

function stale(state, key, reason) {
  const held = state.surfaces[key];
  if (!held || held.stale) return state;
  return withSurface(state, key, { ...held, stale: true, reason });
}

function addBytes(state, changes) {
  const bytes = { ...state.bytes };
  for (const [name, n] of Object.entries(changes)) bytes[name] += n;
  return { ...state, bytes };
}

/**
 * One SSE message {id, event, data} -> {state, outcome, entry}.
 * outcome: {type: "ok"} | {type: "resync", key, reason}; entry: one timeline row.
 */
export function receive(state, frame) {
  const sequence = /^\d+$/.test(frame.id ?? '') ? Number(frame.id) : null;
  const size = utf8Length(frame.data ?? '');
  const entry = { sequence, event: frame.event, bytes: size, kind: 'other', summary: '', note: '' };
  if (sequence !== null) state = { ...state, lastSequence: Math.max(state.lastSequence, sequence) };
  let data;
  try {
    data = JSON.parse(frame.data);
  } catch {
    data = undefined;
  }
  if (frame.event === DELTA_EVENT) return receiveDelta(state, data, sequence, size, entry);
  if (frame.event === SURFACE_EVENT && isObject(data)) return receiveSurface(state, data, sequence, size, entry);
  state = addBytes(state, { received: size, fullEquivalent: size, otherFrames: 1 });
  if (isObject(data) && typeof data.type === 'string' && !TERMINAL.has(state.status)) {
    const next = STATUS_AFTER[data.type];
    if (next) state = { ...state, status: next };
  }
  entry.summary = frame.event;
  return { state, outcome: { type: 'ok' }, entry };
}

function receiveDelta(state, frame, sequence, size, entry) {
  entry.kind = 'delta';
  const key = V1_SURFACE_ID;
  const held = state.surfaces[key];
  const fail = reason => {
    entry.note = reason;
    entry.kind = 'invalid';
    const next = addBytes(stale(state, key, reason), { received: size, deltaReceived: size, fullEquivalent: size, deltaFrames: 1 });
    return { state: next, outcome: { type: 'resync', key, reason }, entry };
  };
  if (!isObject(frame) || !jsonEqual(Object.keys(frame).sort(), ['catalogVersion', 'patch', 'surfaceRef'])) {
    return fail('a delta frame is exactly {surfaceRef, catalogVersion, patch}');
  }
  if (typeof frame.surfaceRef !== 'string' || !frame.surfaceRef) return fail('a delta frame names its surfaceRef');
  if (!Array.isArray(frame.patch) || frame.patch.length === 0) return fail('a delta frame carries a non-empty patch');
  if (!held) return fail('delta without a base: no v1 surface held');
  if (held.stale) return fail('delta on a stale surface: awaiting a full frame');
  if (frame.catalogVersion !== held.content.catalogVersion) return fail('a delta cannot change the catalog (RFC 0114)');
  let content;
  try {
    content = applyPatch(held.content, frame.patch);
  } catch (error) {
    return fail(`patch does not apply: ${error instanceof PatchError ? error.message : 'malformed'}`);
  }
  const invalid = V1.check(content);
  if (invalid) return fail(`v1 surface invalid after the patch: ${invalid}`);
  // What the full frame would have cost: the last full v1 event with the rebuilt payload.
  let fullSize = size;
  if (state.v1Event) {
    const full = structuredClone(state.v1Event);
    full.sequence = sequence;
    full.eventId = frame.surfaceRef;
    full.payload.envelope.payload = content;
    fullSize = utf8Length(JSON.stringify(full));
  }
  entry.summary = `v1 surface: ${frame.patch.length} patch op${frame.patch.length === 1 ? '' : 's'}`;
  entry.fullBytes = fullSize;
  const next = { ...held, content, sequence, surfaceRef: frame.surfaceRef };
  state = addBytes(withSurface(state, key, next), { received: size, deltaReceived: size, fullEquivalent: fullSize, deltaFrames: 1 });
  return { state, outcome: { type: 'ok' }, entry };
}

function receiveSurface(state, doc, sequence, size, entry) {
  entry.kind = 'full';
  state = addBytes(state, { received: size, fullEquivalent: size, fullFrames: 1 });
  const recorded = doc.payload;
  const envelope = recorded?.envelope;
  const version = recorded?.version;
  const trust = trustOf(doc, envelope);
  const partial = envelope?.partial?.isPartial === true; // E1: PartialInfo, not a boolean
  const eventId = typeof doc.eventId === 'string' ? doc.eventId : null;
  if (version === 0 || version === 1) {
    const key = V1_SURFACE_ID;
    const held = state.surfaces[key];
    const payload = envelope?.payload;
    entry.summary = 'v1 surface';
    const invalid = V1.check(payload);
    if (invalid) {
      entry.kind = 'invalid';
      entry.note = `v1 surface invalid: ${invalid}`;
      const base = held ?? { key, version: 1, content: null, trust, partial, status: 'live', sequence, surfaceRef: eventId };
      state = withSurface(state, key, { ...base, stale: true, reason: entry.note });
      return { state, outcome: { type: 'resync', key, reason: entry.note }, entry };
    }
    const next = {
      key,
      version: 1,
      content: payload,
      trust: held?.trust === 'untrusted' ? 'untrusted' : trust,
      partial,
      status: 'live',
      sequence,
      surfaceRef: eventId,
      stale: false,
      reason: null,
      tree: null, // the migration map always builds a tree (a2ui.js checks it once more)
    };
    state = { ...withSurface(state, key, next), v1Event: doc };
    return { state, outcome: { type: 'ok' }, entry };
  }
  if (version === 2) return foldV2(state, envelope, trust, partial, sequence, eventId, entry);
  entry.note = `unknown surface version ${JSON.stringify(version)}: stored, not rendered`;
  return { state, outcome: { type: 'ok' }, entry };
}

function messageKind(message) {
  return MESSAGE_KINDS.find(kind => isObject(message) && kind in message);
}

function foldV2(state, envelope, trust, partial, sequence, eventId, entry) {
  const payload = envelope?.payload;
  const key = isObject(payload) && typeof payload.surfaceId === 'string' ? payload.surfaceId : null;
  const fail = reason => {
    entry.kind = 'invalid';
    entry.note = reason;
    if (key === null) return { state, outcome: { type: 'resync', key: null, reason }, entry };
    const held = state.surfaces[key];
    const base = held ?? { key, version: 2, content: emptyV2(key, payload?.catalogId), trust, partial, status: 'absent', sequence, surfaceRef: eventId };
    return { state: withSurface(state, key, { ...base, stale: true, reason }), outcome: { type: 'resync', key, reason }, entry };
  };
  const invalid = V2.check(payload);
  if (invalid) return fail(`v2 payload invalid: ${invalid}`);
  entry.summary = `${key}: ${payload.messages.map(messageKind).join(', ')}`;
  const held = state.surfaces[key];
  if (held?.stale) {
    entry.note = 'surface is stale: awaiting the resync';
    return { state, outcome: { type: 'ok' }, entry };
  }
  let status = held?.status ?? 'absent';
  let content = held?.content ?? emptyV2(key, payload.catalogId);
  const tainted = held?.trust === 'untrusted'; // taint survives delete and re-create (§7)
  for (const [index, message] of payload.messages.entries()) {
    const kind = messageKind(message);
    const body = message[kind];
    if (body.surfaceId !== key) return fail(`message ${index}: surfaceId differs from the payload's`);
    if (kind === 'createSurface') {
      if (status === 'live') return fail(`message ${index}: createSurface for a live surface`);
      if (body.catalogId !== payload.catalogId) return fail(`message ${index}: catalogId differs from the payload's`);
      content = { ...emptyV2(key, body.catalogId), theme: body.theme ?? {}, messages: [message] };
      status = 'live';
      continue;
    }
    if (status !== 'live') return fail(`message ${index}: ${kind} on a surface that is ${status}`);
    if (kind === 'deleteSurface') {
      content = emptyV2(key, content.catalogId);
      status = 'deleted';
    } else if (kind === 'updateComponents') {
      const components = { ...content.components };
      for (const component of body.components) components[component.id] = component;
      content = { ...content, components, messages: [...content.messages, message] };
    } else {
      content = { ...content, messages: [...content.messages, message] };
    }
  }
  if (status === 'live') {
    for (const synthetic of materializedPayloads(content)) {
      const problem = V2.check(synthetic);
      if (problem) return fail(`v2 surface invalid after the fold: ${problem}`);
    }
  }
  // The whole fold, not this envelope alone: a cycle can be closed by a later update (§6).
  const tree = status === 'live' ? treeProblem(content.components) : null;
  if (tree) entry.note = `not rendered: ${tree.message}`;
  const next = {
    key,
    version: 2,
    content,
    trust: tainted ? 'untrusted' : trust,
    partial,
    status,
    sequence,
    surfaceRef: eventId,
    stale: false,
    reason: null,
    tree,
  };
  return { state: withSurface(state, key, next), outcome: { type: 'ok' }, entry };
}

function emptyV2(surfaceId, catalogId) {
  return { surfaceId, catalogId, theme: {}, components: {}, messages: [] };
}

// The folded surface as profile payloads (createSurface + chunks of updateComponents), so the
// profile's own component definitions re-validate it (subscriber.py _v2_payloads).
function materializedPayloads(content) {
  const { surfaceId, catalogId } = content;
  const create = { surfaceId, catalogId };
  if (Object.keys(content.theme).length) create.theme = content.theme;
  const messages = [{ version: 'v0.9', createSurface: create }];
  const components = Object.values(content.components);
  for (let start = 0; start < components.length; start += MAX_COMPONENTS_PER_MESSAGE) {
    messages.push({ version: 'v0.9', updateComponents: { surfaceId, components: components.slice(start, start + MAX_COMPONENTS_PER_MESSAGE) } });
  }
  const payloads = [];
  for (let start = 0; start < messages.length; start += MAX_MESSAGES) {
    payloads.push({ version: 'v0.9', catalogId, surfaceId, messages: messages.slice(start, start + MAX_MESSAGES) });
  }
  return payloads;
}
