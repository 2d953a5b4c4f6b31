// Is a surface's component tree safe to hand to the renderer? (issue 14 item 3)
//
// How @a2ui/lit 0.11.0 walks a tree (the shipped code, not the docs): <a2ui-surface> renders
// `root` through renderA2uiNode (lit/src/v0_9/surface/render-a2ui-node.js), which creates the
// component's element; each element renders its references with A2uiLitElement.renderNode
// (web_core/src/v0_9/catalog/a2ui-lit-element.js): Column and Row every id in `children`
// (basic_catalog/components/Column.js, Row.js, through lit's `repeat`), Card and Button their
// `child` (Card.js, and Button.js / our <a2ui-viewer-button>). renderNode looks the id up in the
// surface's components and creates a NEW element for it, with the parent's data path, at every
// position it is referenced: there is no visited set and no depth bound on that path. A cycle
// therefore nests elements forever, one Lit update (a microtask) after another, and the tab
// never turns its event loop again. (web_core's NodeResolver has a cycle check, but the Lit
// renderer does not use it; the bundle does not contain it.) An id the surface does not hold
// renders nothing, and an id referenced from two places (a DAG) is rendered at each of them:
// that is finite, but a DAG can still be exponentially large when expanded (a ladder of
// components each listing the next one twice), so the size of the EXPANDED tree is bounded too.
//
// `treeProblem(components)` walks the children/child graph from `root` iteratively (no
// recursion, so no input can overflow the stack) and answers null when the renderer's walk is
// finite and of a sane size, else {kind, componentId, target?, path, message}:
//   cycle  a reference from `componentId` back to its ancestor `target` (`path`: root .. it);
//   depth  a chain deeper than MAX_TREE_DEPTH nested components (`componentId`: the first one
//          below the bound);
//   size   more than MAX_RENDERED_NODES components once every shared child is counted at each
//          of its positions (`componentId`: root).
// Pure: no DOM, no network.

export const MAX_TREE_DEPTH = 256; // nested components on one path; 64 is many times a real layout
export const MAX_RENDERED_NODES = 10_000; // elements the renderer would create for one surface

const ROOT = 'root';
const isObject = value => value !== null && typeof value === 'object' && !Array.isArray(value);

/** The ids a component references, in the order the renderer draws them. A superset of what
 * the profile's components hold (Column/Row `children`, Card/Button `child`): a template
 * ChildList `{componentId, path}` and the basic catalog's Tabs and Modal references count too,
 * so nothing the renderer could follow is missed. */
export function childIds(component) {
  if (!isObject(component)) return [];
  const out = [];
  const add = ref => {
    if (typeof ref === 'string') out.push(ref);
    else if (isObject(ref) && typeof (ref.componentId ?? ref.id) === 'string') out.push(ref.componentId ?? ref.id);
  };
  const { child, children } = component;
  add(child);
  if (Array.isArray(children)) children.forEach(add);
  else add(children);
  if (component.component === 'Modal') {
    add(component.trigger);
    add(component.content);
  }
  if (component.component === 'Tabs' && Array.isArray(component.tabs)) {
    for (const tab of component.tabs) if (isObject(tab)) add(tab.child);
  }
  return out;
}

/** id -> component, from a components object keyed by id, a Map, or an array of components. */
function byId(components) {
  if (components instanceof Map) return components;
  const map = new Map();
  if (Array.isArray(components)) {
    for (const component of components) if (isObject(component) && typeof component.id === 'string') map.set(component.id, component);
  } else if (isObject(components)) {
    for (const [id, component] of Object.entries(components)) map.set(id, component);
  }
  return map;
}

const quote = id => `'${id}'`;

/** Null when rendering `components` from root terminates with a sane size; else the problem. */
export function treeProblem(components, { maxDepth = MAX_TREE_DEPTH, maxNodes = MAX_RENDERED_NODES } = {}) {
  const map = byId(components);
  if (!map.has(ROOT)) return null; // nothing is rendered without root (§6)
  // Iterative depth-first walk over component ids. `open` holds the ids on the current path
  // (grey); `done` the expanded size and height of every finished id (black), reused when it is
  // referenced again, so a DAG costs its number of references, not its expansion. A reference
  // to an open id is a cycle (a back edge); `drawn` counts the elements the renderer would have
  // created so far (every frame's total, shared children at each of their positions).
  const open = new Set([ROOT]);
  const done = new Map();
  const frameOf = id => ({ id, refs: childIds(map.get(id)).filter(ref => map.has(ref)), next: 0, size: 1, height: 1 });
  const stack = [frameOf(ROOT)];
  const ids = () => stack.map(frame => frame.id);
  const tooDeep = id => ({
    kind: 'depth',
    componentId: id,
    path: ids(),
    message: `component ${quote(id)} is nested deeper than ${maxDepth} components`,
  });
  let drawn = 1;
  while (stack.length) {
    const frame = stack[stack.length - 1];
    if (frame.next === frame.refs.length) {
      stack.pop();
      open.delete(frame.id);
      done.set(frame.id, { size: frame.size, height: frame.height });
      const parent = stack[stack.length - 1];
      if (parent) {
        parent.size += frame.size;
        parent.height = Math.max(parent.height, frame.height + 1);
      }
      continue;
    }
    const id = frame.refs[frame.next++];
    if (open.has(id)) {
      const path = ids();
      const closes = id === frame.id ? 'lists itself as its own child' : `refers back to ${quote(id)}, which contains it`;
      return {
        kind: 'cycle',
        componentId: frame.id,
        target: id,
        path,
        message: `component ${quote(frame.id)} ${closes}: a cycle (${[...path, id].join(' → ')})`,
      };
    }
    const finished = done.get(id);
    if (finished) {
      if (stack.length + finished.height > maxDepth) return tooDeep(id);
      frame.size += finished.size;
      frame.height = Math.max(frame.height, finished.height + 1);
      drawn += finished.size;
    } else {
      if (stack.length >= maxDepth) return tooDeep(id);
      open.add(id);
      stack.push(frameOf(id));
      drawn += 1;
    }
    if (drawn > maxNodes) {
      return {
        kind: 'size',
        componentId: ROOT,
        path: ids(),
        message: `the tree would draw more than ${maxNodes.toLocaleString('en')} components (a shared child counts at every position)`,
      };
    }
  }
  return null;
}
