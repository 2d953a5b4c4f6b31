// Unit tests of the viewer's pure core (node --test; no browser, no node_modules needed).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { applyPatch, PatchError } from '../src/core/patch.js';
import { V1, V2, BASIC_CATALOG } from '../src/core/schema.js';
import { migrateV1 } from '../src/core/migrate.js';
import { projectRunId, unprojectRunId } from '../src/core/wire.js';
import { initialState, receive, renderable, actionsBlockedBy } from '../src/core/surfaces.js';
import { treeProblem, childIds, MAX_TREE_DEPTH, MAX_RENDERED_NODES } from '../src/core/tree.js';

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

test('run ids project and unproject like app/core/http/wire_ids.py', () => {
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

// -- cycle safety (issue 14 item 3): what @a2ui/lit would walk forever is never rendered ---------

const column = (id, ...children) => ({ id, component: 'Column', children });
const row = (id, ...children) => ({ id, component: 'Row', children });
const card = (id, child) => ({ id, component: 'Card', child });
const button = (id, child) => ({ id, component: 'Button', child, action: { event: { name: 'go' } } });
const text = (id, value = id) => ({ id, component: 'Text', text: value });
const chainOf = depth => {
  const out = [column('root', 'c1')];
  for (let i = 1; i < depth - 1; i++) out.push(column(`c${i}`, `c${i + 1}`));
  out.push(text(`c${depth - 1}`, 'bottom'));
  return out; // `depth` components nested one in the other, root first
};

test('tree: every cycle the renderer would follow, named where it closes', () => {
  const cases = [
    ['a self-cycle', [column('root', 'root')], 'root', 'root', /'root' lists itself as its own child/],
    ['a two-cycle', [column('root', 'a'), row('a', 'root')], 'a', 'root', /root → a → root/],
    ['a longer cycle below root', [column('root', 't', 'a'), text('t'), column('a', 'b'), column('b', 'a')], 'b', 'a', /root → a → b → a/],
    ['Button.child back up', [column('root', 'go'), button('go', 'root')], 'go', 'root', /'go' refers back to 'root'/],
    ['Card.child back up', [card('root', 'inner'), card('inner', 'root')], 'inner', 'root', /cycle/],
    ['a Card holding its own Button', [card('root', 'go'), button('go', 'root')], 'go', 'root', /cycle/],
    ['a template ChildList', [{ id: 'root', component: 'Column', children: { componentId: 'root', path: '/items' } }], 'root', 'root', /cycle/],
  ];
  for (const [name, components, closes, target, message] of cases) {
    const problem = treeProblem(components);
    assert.equal(problem?.kind, 'cycle', name);
    assert.equal(problem.componentId, closes, name);
    assert.equal(problem.target, target, name);
    assert.match(problem.message, message, name);
  }
  // the same components keyed by id (the fold's shape) and as a Map (the renderer's)
  const keyed = { root: column('root', 'a'), a: row('a', 'root') };
  assert.equal(treeProblem(keyed).componentId, 'a');
  assert.equal(treeProblem(new Map(Object.entries(keyed))).componentId, 'a');
});

test('tree: acyclic trees render, a shared child included; absurd ones do not', () => {
  assert.equal(treeProblem([column('root', 't', 'b'), text('t'), button('b', 'b_label'), text('b_label')]), null);
  // a DAG: @a2ui/lit draws a child at every position it is referenced (renderNode creates a new
  // element each time), which is finite, so it renders
  const shared = [column('root', 'left', 'right'), card('left', 'x'), card('right', 'x'), text('x')];
  assert.equal(treeProblem(shared), null);
  assert.equal(treeProblem([column('root', 'x', 'x'), text('x')]), null);
  // references the surface does not hold render nothing (renderNode), and do not count
  assert.equal(treeProblem([column('root', 'missing', 't'), text('t')]), null);
  assert.equal(treeProblem([column('a', 'a')]), null); // no root: nothing is rendered (§6)
  assert.equal(treeProblem({}), null);
  // a deep chain renders up to the bound, not one component deeper
  assert.equal(treeProblem(chainOf(MAX_TREE_DEPTH)), null);
  const deeper = treeProblem(chainOf(MAX_TREE_DEPTH + 1));
  assert.equal(deeper?.kind, 'depth');
  assert.equal(deeper.componentId, `c${MAX_TREE_DEPTH}`);
  // a subtree seen first near the top and referenced again further down is measured there too
  const reused = [column('root', 'top', 'low1'), ...chainOf(MAX_TREE_DEPTH - 1).slice(1).map(c => ({ ...c }))];
  reused.push(column('top', 'c1'));
  for (let i = 1; i < 10; i++) reused.push(column(`low${i}`, i === 9 ? 'c1' : `low${i + 1}`));
  assert.equal(treeProblem(reused)?.kind, 'depth');
  // a ladder that lists the next rung twice: 40 components, 2^40 elements once expanded
  const ladder = [];
  for (let i = 0; i < 40; i++) ladder.push(column(i ? `r${i}` : 'root', `r${i + 1}`, `r${i + 1}`));
  ladder.push(text('r40'));
  assert.equal(treeProblem(ladder)?.kind, 'size');
  const wide = [column('root', ...Array.from({ length: 100 }, (_, i) => `m${i}`))];
  for (let i = 0; i < 100; i++) wide.push(column(`m${i}`, ...Array.from({ length: 100 }, () => 'leaf')));
  wide.push(text('leaf'));
  assert.equal(treeProblem(wide)?.kind, 'size'); // 10,101 elements
  assert.equal(treeProblem(wide, { maxNodes: 10_101 }), null);
  assert.ok(MAX_RENDERED_NODES >= 10_000);
});

test('tree: the walk is iterative and bounded whatever it is fed', () => {
  const long = [column('root', 'c1')];
  for (let i = 1; i < 200_000; i++) long.push(column(`c${i}`, `c${i + 1}`));
  assert.equal(treeProblem(long).kind, 'depth'); // no stack overflow at 200,000 levels
  assert.equal(treeProblem(long, { maxDepth: Infinity, maxNodes: Infinity }), null);
  long.push(column('c200000', 'root'));
  assert.equal(treeProblem(long, { maxDepth: Infinity, maxNodes: Infinity }).componentId, 'c200000');
  for (const junk of [null, 42, 'x', [null, 1, 'root'], { root: null }, { root: { children: 7 } }]) {
    assert.equal(treeProblem(junk), null, JSON.stringify(junk));
  }
  assert.deepEqual(childIds({ component: 'Tabs', tabs: [{ child: 'a' }, { title: 'x' }] }), ['a']);
  assert.deepEqual(childIds({ component: 'Modal', trigger: 't', content: 'c' }), ['t', 'c']);
  assert.deepEqual(childIds({ component: 'Text', text: 'root' }), []);
});

test('surfaces: a cycle closed by a later update is held but never rendered, others still are', () => {
  const sid = 'late';
  const updateOf = surfaceId => (...items) => ({ version: 'v0.9', updateComponents: { surfaceId, components: items } });
  const update = updateOf(sid);
  const { state, outcomes } = feed([
    surfaceFrame(v2Payload('ok', [create('ok'), components('ok', 'fine')])),
    surfaceFrame(v2Payload(sid, [create(sid), update(column('root', 'a'), column('a', 'b'))])),
  ]);
  assert.equal(renderable(state.surfaces[sid]), true); // b is not there yet: finite
  const closing = receive(state, surfaceFrame(v2Payload(sid, [update(column('b', 'root'))])));
  assert.equal(closing.outcome.type, 'ok'); // in the profile: no resync, which could not help
  const held = closing.state.surfaces[sid];
  assert.equal(renderable(held), false); // never handed to the renderer
  assert.equal(held.stale, false);
  assert.equal(held.tree.kind, 'cycle');
  assert.equal(held.tree.componentId, 'b');
  assert.match(actionsBlockedBy(held, closing.state), /not rendered: component 'b' refers back to 'root'/);
  assert.match(closing.entry.note, /cycle/);
  assert.equal(renderable(closing.state.surfaces.ok), true); // the run's other surface renders
  assert.ok(outcomes.every(o => o.type === 'ok'));
  // a later update that breaks the cycle makes it renderable again
  const healed = receive(closing.state, surfaceFrame(v2Payload(sid, [update(text('b'))])));
  assert.equal(healed.state.surfaces[sid].tree, null);
  assert.equal(renderable(healed.state.surfaces[sid]), true);
  // a shared child (a DAG) renders
  const dag = feed([surfaceFrame(v2Payload('dag', [create('dag'), updateOf('dag')(column('root', 'l', 'r'), card('l', 'x'), card('r', 'x'), text('x'))]))]);
  assert.equal(dag.state.surfaces.dag.tree, null);
  assert.equal(renderable(dag.state.surfaces.dag), true);
  // a self-cycle in the very first envelope
  const own = feed([surfaceFrame(v2Payload('own', [create('own'), updateOf('own')(column('root', 'root'))]))]);
  assert.equal(own.state.surfaces.own.tree.componentId, 'root');
  assert.equal(renderable(own.state.surfaces.own), false);
});
