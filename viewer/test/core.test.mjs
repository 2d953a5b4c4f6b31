// Unit tests of the viewer's pure core (node --test; no browser, no node_modules needed).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { applyPatch, PatchError } from '../src/core/patch.js';
import { V1, V2, BASIC_CATALOG } from '../src/core/schema.js';
import { migrateV1 } from '../src/core/migrate.js';
import { projectRunId, unprojectRunId } from '../src/core/wire.js';
import { initialState, receive, renderable, actionsBlockedBy } from '../src/core/surfaces.js';

const V1_PAYLOAD = {
  catalogVersion: '0.9.1',
  surface: {
    title: 'Kickoff',
    components: [
      { component: 'heading', text: 'Kickoff', level: 6 },
      { component: 'text', text: 'Pick a date.' },
      { component: 'field.text', id: 'name', label: 'Name', placeholder: 'Ada', required: true },
      { component: 'field.date', id: 'when', label: 'When' },
      { component: 'field.select', id: 'room', label: 'Room', options: [{ value: 'a', label: 'A' }] },
      { component: 'field.checkbox', id: 'remote', label: 'Remote', default: true },
      { component: 'action.button', id: 'go', label: 'Go', action: { target: 'resume' } },
    ],
  },
};

const v2Payload = (sid, messages) => ({ version: 'v0.9', catalogId: BASIC_CATALOG, surfaceId: sid, messages });
const create = sid => ({ version: 'v0.9', createSurface: { surfaceId: sid, catalogId: BASIC_CATALOG } });
const components = (sid, text) => ({
  version: 'v0.9',
  updateComponents: {
    surfaceId: sid,
    components: [
      { id: 'root', component: 'Column', children: ['t', 'b'] },
      { id: 't', component: 'Text', text },
      { id: 'b_label', component: 'Text', text: 'OK' },
      { id: 'b', component: 'Button', child: 'b_label', action: { event: { name: 'resume' } } },
    ],
  },
});
let seq = 0;
const surfaceFrame = (payload, { version = 2, trust, partial } = {}) => {
  const envelope = { type: 'ui.a2ui-surface', schemaVersion: version, envelopeId: 'e', correlationId: 'c', payload, meta: { source: 'ai-generation', ts: 't' } };
  if (trust) envelope.meta.contentTrust = trust;
  if (partial) envelope.partial = { isPartial: true, index: 0, total: -1 };
  const sequence = seq++;
  const doc = { eventId: `ev-${sequence}`, runId: 'r', sequence, type: 'ui.a2ui-surface', schemaVersion: 1, timestamp: 't', payload: { envelope, version, trust: trust ?? 'trusted' } };
  return { id: String(sequence), event: 'ui.a2ui-surface', data: JSON.stringify(doc) };
};
const feed = frames => frames.reduce(({ state, outcomes }, frame) => {
  const out = receive(state, frame);
  return { state: out.state, outcomes: [...outcomes, out.outcome] };
}, { state: initialState(), outcomes: [] });

test('run ids project and unproject like app/core/wire_ids.py', () => {
  assert.equal(projectRunId('acme/r-9f3c'), 'acme~2Fr-9f3c');
  assert.equal(projectRunId('a~b:c é'), 'a~7Eb~3Ac~20~C3~A9');
  for (const id of ['acme/r1', 'a~2Fb', 'x:y', 'é/ü']) assert.equal(unprojectRunId(projectRunId(id)), id);
  assert.equal(unprojectRunId('acme%2Fr1'), 'acme/r1');
  assert.equal(unprojectRunId('a%zz'), null);
  assert.equal(unprojectRunId(''), null);
});

test('patch: RFC 6902 strict application, the input untouched', () => {
  const doc = { a: [1, 2], b: { c: 1 } };
  const out = applyPatch(doc, [
    { op: 'add', path: '/a/-', value: 3 },
    { op: 'replace', path: '/b/c', value: 2 },
    { op: 'copy', from: '/b', path: '/d' },
    { op: 'move', from: '/d/c', path: '/e' },
    { op: 'remove', path: '/a/0' },
  ]);
  assert.deepEqual(out, { a: [2, 3], b: { c: 2 }, d: {}, e: 2 });
  assert.deepEqual(doc, { a: [1, 2], b: { c: 1 } });
  for (const bad of [
    [{ op: 'test', path: '/a', value: 1 }],
    [{ op: 'remove', path: '/zz' }],
    [{ op: 'replace', path: '/a/01', value: 0 }],
    [{ op: 'add', path: '/a/5', value: 0 }],
    [{ op: 'move', from: '/b', path: '/b/x' }],
    [{ op: 'add', path: 'a', value: 0 }],
    [{ op: 'add', path: '/x' }],
  ]) assert.throws(() => applyPatch(doc, bad), PatchError, JSON.stringify(bad));
  const proto = applyPatch({}, [{ op: 'add', path: '/__proto__', value: { polluted: true } }]);
  assert.equal({}.polluted, undefined);
  assert.deepEqual(Object.keys(proto), ['__proto__']);
});

test('schema: the v1 catalog and the v2 profile, closed', () => {
  assert.equal(V1.check(V1_PAYLOAD), null);
  assert.match(V1.check({ catalogVersion: '0.9.2', surface: { components: [] } }), /catalogVersion/);
  assert.ok(V1.check({ catalogVersion: '0.9.1', surface: { components: [{ component: 'iframe', src: 'x' }] } }));
  assert.ok(V1.check({ catalogVersion: '0.9.1', surface: { components: [{ component: 'heading', text: 'x', level: 7 }] } }));
  const good = v2Payload('s', [create('s'), components('s', 'hello')]);
  assert.equal(V2.check(good), null);
  const image = v2Payload('s', [{ version: 'v0.9', updateComponents: { surfaceId: 's', components: [{ id: 'i', component: 'Image', url: 'https://evil.example/x.png' }] } }]);
  assert.ok(V2.check(image));
  const openUrl = structuredClone(good);
  openUrl.messages[1].updateComponents.components[3].action = { functionCall: { call: 'openUrl', args: { url: 'https://evil.example/' } } };
  assert.ok(V2.check(openUrl));
  const obscured = v2Payload('s', [{ version: 'v0.9', updateComponents: { surfaceId: 's', components: [{ id: 'f', component: 'TextField', label: 'pw', variant: 'obscured' }] } }]);
  assert.ok(V2.check(obscured));
  assert.match(V2.check({ ...good, surfaceId: 'has space' }), /surfaceId/);
});

test('migration: v1 -> A2UI v0.9 messages that the profile admits', () => {
  const { messages, sourceIds } = migrateV1(V1_PAYLOAD, 'v1-surface');
  assert.equal(V2.check(v2Payload('v1-surface', messages)), null);
  const byId = Object.fromEntries(messages[1].updateComponents.components.map(c => [c.id, c]));
  assert.deepEqual(byId.root.children.map(id => byId[id].component), ['Text', 'Text', 'Text', 'TextField', 'DateTimeInput', 'ChoicePicker', 'CheckBox', 'Button']);
  assert.equal(byId[byId.root.children[0]].variant, 'h1'); // the title
  assert.equal(byId[byId.root.children[1]].variant, 'h5'); // level 6 -> h5
  assert.equal(byId[byId.root.children[2]].variant, 'body');
  assert.deepEqual(byId.name.checks[0].condition, { call: 'required', args: { value: { path: '/name' } } });
  assert.equal('placeholder' in byId.name, false); // the one loss (RFC 0209)
  assert.equal(byId.when.enableDate, true);
  assert.equal(byId.room.variant, 'mutuallyExclusive');
  assert.equal(byId.go.child, 'go_label');
  assert.deepEqual(byId.go.action, { event: { name: 'resume', context: { name: { path: '/name' }, when: { path: '/when' }, room: { path: '/room' }, remote: { path: '/remote' } } } });
  assert.deepEqual(messages[2].updateDataModel.value, { name: '', when: '', room: [], remote: true });
  assert.equal(sourceIds.go, 'go');
  const odd = migrateV1({ catalogVersion: '0.9.1', surface: { components: [{ component: 'action.button', id: 'a b', label: 'x', action: { target: 'exchange' } }, { component: 'field.checkbox', id: 'root', label: 'r' }] } });
  assert.equal(V2.check(v2Payload('x', odd.messages.map(m => JSON.parse(JSON.stringify(m).replaceAll('"~v1"', '"x"'))))), null);
  assert.deepEqual(Object.values(odd.sourceIds).sort(), ['a b', 'root']);
});

test('surfaces: v2 fold, sticky taint, partial, and actions', () => {
  const { state, outcomes } = feed([
    surfaceFrame(v2Payload('s', [create('s'), components('s', 'one')])),
    surfaceFrame(v2Payload('s', [components('s', 'two')]), { trust: 'untrusted' }),
    surfaceFrame(v2Payload('s', [components('s', 'three')])),
    surfaceFrame(v2Payload('p', [create('p'), components('p', 'streaming')]), { partial: true }),
    { id: String(seq++), event: 'run.completed', data: '{"type":"run.completed"}' },
  ]);
  assert.ok(outcomes.every(o => o.type === 'ok'));
  const s = state.surfaces.s;
  assert.equal(s.content.components.t.text, 'three');
  assert.equal(s.trust, 'untrusted'); // a later trusted update does not launder it
  assert.equal(renderable(s), true);
  assert.match(actionsBlockedBy(s, state), /untrusted/);
  assert.match(actionsBlockedBy(state.surfaces.p, state), /partial/);
  assert.equal(state.status, 'completed');
});

test('surfaces: the fold guard and an invalid payload fail closed with a resync', () => {
  const { state, outcomes } = feed([
    surfaceFrame(v2Payload('s', [create('s'), components('s', 'one')])),
    surfaceFrame(v2Payload('s', [create('s')])),
  ]);
  assert.deepEqual(outcomes.map(o => o.type), ['ok', 'resync']);
  assert.equal(state.surfaces.s.stale, true);
  assert.equal(renderable(state.surfaces.s), false);
  const orphan = feed([surfaceFrame(v2Payload('o', [components('o', 'x')]))]);
  assert.equal(orphan.outcomes[0].type, 'resync');
});

test('surfaces: v1 deltas apply, re-validate, and price the full frame they replaced', () => {
  const full = surfaceFrame(V1_PAYLOAD, { version: 1 });
  const patch = [{ op: 'replace', path: '/surface/components/1/text', value: 'Pick a later date.' }];
  const delta = { id: String(seq++), event: 'ui.a2ui-surface.delta', data: JSON.stringify({ surfaceRef: 'ev-x', catalogVersion: '0.9.1', patch }) };
  const { state, outcomes } = feed([full, delta]);
  assert.deepEqual(outcomes.map(o => o.type), ['ok', 'ok']);
  assert.equal(state.surfaces['~v1'].content.surface.components[1].text, 'Pick a later date.');
  assert.equal(state.surfaces['~v1'].surfaceRef, 'ev-x');
  assert.equal(state.bytes.deltaFrames, 1);
  assert.ok(state.bytes.fullEquivalent > state.bytes.received, 'a delta is cheaper than the full frame it replaced');
  const bad = { ...delta, data: JSON.stringify({ surfaceRef: 'ev-y', catalogVersion: '0.9.1', patch: [{ op: 'replace', path: '/surface/components/0/component', value: 'iframe' }] }) };
  const after = receive(state, bad);
  assert.equal(after.outcome.type, 'resync');
  assert.equal(after.state.surfaces['~v1'].stale, true);
  assert.equal(receive(after.state, delta).outcome.type, 'resync'); // refused until a full frame
  assert.equal(receive(initialState(), delta).outcome.type, 'resync'); // no base
});
