// RFC 6902 JSON Patch, applied STRICTLY (the same rules as app/core/projection/patch_apply.py apply_patch):
// add/remove/replace/move/copy only (RFC 0114 frames never carry `test`), RFC 6901 pointers,
// array indexes without leading zeros, "-" only to append, a missing target is an error, a
// move into its own child is an error. The input document is never mutated; on the first
// failing operation nothing applies (RFC 6902 §5) and PatchError says which.
// Pure: no DOM, no network.

export class PatchError extends Error {}

const OPS = new Set(['add', 'remove', 'replace', 'move', 'copy']);
const INDEX = /^(0|[1-9][0-9]*)$/;

/** RFC 6901: "" is the root; otherwise "/"-separated tokens with ~1 -> "/" and ~0 -> "~". */
export function parsePointer(pointer) {
  if (typeof pointer !== 'string') throw new PatchError('a pointer is a string');
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw new PatchError(`pointer ${JSON.stringify(pointer)} does not start with /`);
  return pointer
    .slice(1)
    .split('/')
    .map(token => {
      if (/~(?![01])/.test(token)) throw new PatchError(`bad escape in pointer ${JSON.stringify(pointer)}`);
      return token.replace(/~1/g, '/').replace(/~0/g, '~');
    });
}

/** A JSON Pointer token for a key (the inverse of the unescaping above). */
export function escapeToken(key) {
  return String(key).replace(/~/g, '~0').replace(/\//g, '~1');
}

const isObject = value => value !== null && typeof value === 'object' && !Array.isArray(value);
const own = (object, key) => Object.prototype.hasOwnProperty.call(object, key);

// Writes go through defineProperty: a key named "__proto__" is data, never the prototype.
function put(object, key, value) {
  Object.defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true });
}

function clone(value) {
  return value === undefined ? undefined : JSON.parse(JSON.stringify(value));
}

function arrayIndex(array, token, { append = false, insert = false } = {}) {
  if (append && token === '-') return array.length;
  if (!INDEX.test(token)) throw new PatchError(`${JSON.stringify(token)} is not an array index`);
  const index = Number(token);
  const limit = insert ? array.length : array.length - 1;
  if (index > limit) throw new PatchError(`index ${index} is past the end (length ${array.length})`);
  return index;
}

function parentOf(root, tokens) {
  let node = root;
  for (const token of tokens.slice(0, -1)) {
    if (Array.isArray(node)) node = node[arrayIndex(node, token)];
    else if (isObject(node) && own(node, token)) node = node[token];
    else throw new PatchError(`path segment ${JSON.stringify(token)} does not exist`);
  }
  if (!Array.isArray(node) && !isObject(node)) throw new PatchError('the parent is not a container');
  return node;
}

function getAt(root, tokens) {
  let node = root;
  for (const token of tokens) {
    if (Array.isArray(node)) node = node[arrayIndex(node, token)];
    else if (isObject(node) && own(node, token)) node = node[token];
    else throw new PatchError(`path segment ${JSON.stringify(token)} does not exist`);
  }
  return node;
}

class Applier {
  constructor(doc) {
    this.root = clone(doc);
  }
  add(tokens, value) {
    if (tokens.length === 0) {
      this.root = value;
      return;
    }
    const parent = parentOf(this.root, tokens);
    const last = tokens[tokens.length - 1];
    if (Array.isArray(parent)) parent.splice(arrayIndex(parent, last, { append: true, insert: true }), 0, value);
    else put(parent, last, value);
  }
  remove(tokens) {
    if (tokens.length === 0) throw new PatchError('cannot remove the whole document');
    const parent = parentOf(this.root, tokens);
    const last = tokens[tokens.length - 1];
    if (Array.isArray(parent)) return parent.splice(arrayIndex(parent, last), 1)[0];
    if (!own(parent, last)) throw new PatchError(`${JSON.stringify(last)} does not exist`);
    const removed = parent[last];
    delete parent[last];
    return removed;
  }
  replace(tokens, value) {
    if (tokens.length === 0) {
      this.root = value;
      return;
    }
    const parent = parentOf(this.root, tokens);
    const last = tokens[tokens.length - 1];
    if (Array.isArray(parent)) parent[arrayIndex(parent, last)] = value;
    else if (own(parent, last)) put(parent, last, value);
    else throw new PatchError(`${JSON.stringify(last)} does not exist`);
  }
}

/** Apply `patch` to `doc` and return the new document, or throw PatchError. */
export function applyPatch(doc, patch) {
  if (!Array.isArray(patch)) throw new PatchError('a patch is an array of operations');
  const state = new Applier(doc);
  patch.forEach((op, index) => {
    try {
      if (!isObject(op)) throw new PatchError('an operation is an object');
      if (!OPS.has(op.op)) throw new PatchError(`op ${JSON.stringify(op.op)} is not add/remove/replace/move/copy`);
      if (!own(op, 'path')) throw new PatchError('an operation needs a path');
      const tokens = parsePointer(op.path);
      if (op.op === 'add' || op.op === 'replace') {
        if (!own(op, 'value')) throw new PatchError(`${op.op} needs a value`);
        state[op.op](tokens, clone(op.value));
      } else if (op.op === 'remove') {
        state.remove(tokens);
      } else {
        if (!own(op, 'from')) throw new PatchError(`${op.op} needs a from`);
        const from = parsePointer(op.from);
        if (op.op === 'move') {
          const same = from.length === tokens.length && from.every((t, i) => t === tokens[i]);
          if (same) {
            getAt(state.root, from); // RFC 6902 §4.4: the from location must exist
            return;
          }
          if (from.length < tokens.length && from.every((t, i) => t === tokens[i])) {
            throw new PatchError(`move from ${op.from} into its own child ${op.path}`);
          }
          state.add(tokens, state.remove(from));
        } else {
          state.add(tokens, clone(getAt(state.root, from)));
        }
      }
    } catch (error) {
      if (error instanceof PatchError) throw new PatchError(`operation ${index}: ${error.message}`);
      throw error;
    }
  });
  return state.root;
}
