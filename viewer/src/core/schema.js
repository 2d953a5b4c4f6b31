// The wire contract, checked in the browser from the SAME documents the worker uses
// (schemas/a2ui-surface-v1.schema.json and schemas/a2ui-surface-v2-profile.schema.json, bundled
// at build time): a small JSON Schema 2020-12 evaluator for exactly the keywords those two
// documents use. An unknown keyword is an error, not a pass: if a schema grows a keyword this
// file does not know, validation fails closed (and the unit test says so).
// Pure: no DOM, no network.

import v1Schema from '../../../schemas/a2ui-surface-v1.schema.json' with { type: 'json' };
import v2Schema from '../../../schemas/a2ui-surface-v2-profile.schema.json' with { type: 'json' };

const ANNOTATIONS = new Set(['$schema', '$id', 'title', 'description']);
const KNOWN = new Set([
  ...ANNOTATIONS,
  '$defs', '$ref', 'type', 'const', 'enum', 'anyOf', 'required', 'properties',
  'additionalProperties', 'items', 'minItems', 'maxItems', 'minLength', 'maxLength', 'pattern',
  'minimum', 'maximum', 'maxProperties',
]);

const isObject = value => value !== null && typeof value === 'object' && !Array.isArray(value);
const own = (object, key) => Object.prototype.hasOwnProperty.call(object, key);

function typeOf(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value; // string, boolean, object
}

function hasType(value, type) {
  const actual = typeOf(value);
  return actual === type || (type === 'number' && actual === 'integer');
}

export function jsonEqual(a, b) {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every(k => own(b, k) && jsonEqual(a[k], b[k]));
  }
  return false;
}

const pointerOf = path => (path.length ? '/' + path.map(p => String(p).replace(/~/g, '~0').replace(/\//g, '~1')).join('/') : '');

/** A validator over one schema document: check(value, ref?) -> null or "pointer: message". */
export class SchemaValidator {
  constructor(document) {
    this.document = document;
    this.patterns = new Map();
  }

  check(value, ref = '#') {
    return this.#check(this.#resolve(ref), value, []);
  }

  #resolve(ref) {
    if (ref === '#') return this.document;
    if (!ref.startsWith('#/$defs/')) throw new Error(`unsupported $ref ${ref}`);
    const found = this.document.$defs?.[ref.slice('#/$defs/'.length)];
    if (found === undefined) throw new Error(`unknown $ref ${ref}`);
    return found;
  }

  #regex(source) {
    let compiled = this.patterns.get(source);
    if (!compiled) {
      compiled = new RegExp(source, 'u'); // ECMA-262 regex, as JSON Schema specifies
      this.patterns.set(source, compiled);
    }
    return compiled;
  }

  #check(schema, value, path) {
    const at = pointerOf(path);
    for (const keyword of Object.keys(schema)) {
      if (!KNOWN.has(keyword)) return `${at}: the schema uses ${keyword}, which this viewer does not evaluate`;
    }
    if (schema.$ref !== undefined) {
      const problem = this.#check(this.#resolve(schema.$ref), value, path);
      if (problem) return problem;
    }
    if (schema.type !== undefined) {
      const types = Array.isArray(schema.type) ? schema.type : [schema.type];
      if (!types.some(t => hasType(value, t))) return `${at}: expected ${types.join(' or ')}, got ${typeOf(value)}`;
    }
    if (own(schema, 'const') && !jsonEqual(value, schema.const)) return `${at}: must be ${JSON.stringify(schema.const)}`;
    if (schema.enum !== undefined && !schema.enum.some(e => jsonEqual(value, e))) {
      return `${at}: must be one of ${schema.enum.map(e => JSON.stringify(e)).join(', ')}`;
    }
    if (schema.anyOf !== undefined) {
      const problems = [];
      for (const branch of schema.anyOf) {
        const problem = this.#check(branch, value, path);
        if (!problem) {
          problems.length = 0;
          break;
        }
        problems.push(problem);
      }
      if (problems.length) return `${at}: matches no allowed form (${deepest(problems)})`;
    }
    if (typeof value === 'string') {
      const length = [...value].length; // JSON Schema counts code points
      if (schema.minLength !== undefined && length < schema.minLength) return `${at}: shorter than ${schema.minLength}`;
      if (schema.maxLength !== undefined && length > schema.maxLength) return `${at}: longer than ${schema.maxLength}`;
      if (schema.pattern !== undefined && !this.#regex(schema.pattern).test(value)) return `${at}: does not match ${schema.pattern}`;
    }
    if (typeof value === 'number') {
      if (schema.minimum !== undefined && value < schema.minimum) return `${at}: below ${schema.minimum}`;
      if (schema.maximum !== undefined && value > schema.maximum) return `${at}: above ${schema.maximum}`;
    }
    if (Array.isArray(value)) {
      if (schema.minItems !== undefined && value.length < schema.minItems) return `${at}: fewer than ${schema.minItems} items`;
      if (schema.maxItems !== undefined && value.length > schema.maxItems) return `${at}: more than ${schema.maxItems} items`;
      if (schema.items !== undefined) {
        for (let i = 0; i < value.length; i++) {
          const problem = this.#check(schema.items, value[i], [...path, i]);
          if (problem) return problem;
        }
      }
    }
    if (isObject(value)) {
      const keys = Object.keys(value);
      if (schema.maxProperties !== undefined && keys.length > schema.maxProperties) return `${at}: more than ${schema.maxProperties} properties`;
      for (const name of schema.required ?? []) {
        if (!own(value, name)) return `${at}: ${name} is required`;
      }
      const properties = schema.properties ?? {};
      for (const key of keys) {
        if (own(properties, key)) {
          const problem = this.#check(properties[key], value[key], [...path, key]);
          if (problem) return problem;
        } else if (schema.additionalProperties === false) {
          return `${at}: ${JSON.stringify(key)} is not allowed`;
        } else if (isObject(schema.additionalProperties)) {
          const problem = this.#check(schema.additionalProperties, value[key], [...path, key]);
          if (problem) return problem;
        }
      }
    }
    return null;
  }
}

// The most specific explanation of an anyOf miss is the deepest one.
function deepest(problems) {
  return problems.reduce((best, p) => (p.split('/').length > best.split('/').length ? p : best));
}

export const V1 = new SchemaValidator(v1Schema);
export const V2 = new SchemaValidator(v2Schema);
export const V1_CATALOG_VERSIONS = v1Schema.properties.catalogVersion.enum;
export const BASIC_CATALOG = v2Schema.$defs.catalogId.const;
