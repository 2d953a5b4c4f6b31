// RFC 0209 "Migration from schema version 1 (informative)": the v1 seven-component tree as A2UI
// v0.9 messages in the OpenWOP profile, so ONE renderer (@a2ui/lit) draws both versions.
//
//   heading {text, level}          -> Text {variant: "h<level>"} (level 6 -> h5; no level -> h2)
//   text {text}                    -> Text {variant: "body"}
//   field.text {id, label, req}    -> TextField {value: {path: "/<id>"}, checks: [required] if req}
//   field.date {id, label}         -> DateTimeInput {value: {path: "/<id>"}, enableDate: true}
//   field.select {id, label, opts} -> ChoicePicker {variant: "mutuallyExclusive", value: {path}}
//                                     (the collected value becomes a one-element array)
//   field.checkbox {id, label, d}  -> CheckBox {value: {path}}, `default` seeded by updateDataModel
//   action.button {id, label, t}   -> Button {child: "<id>_label", action: {event: {name: t,
//                                     context: {<each field id>: {path: "/<id>"}}}}} + a Text label
//   surface title                  -> a leading Text {variant: "h1"}
//   (root)                         -> Column {id: "root", children: [...]} in v1 order
// Only `placeholder` is lost (RFC 0209). Decisions the RFC leaves open: a heading without a
// level is h2; a v1 id that is not a valid v0.9 componentId (or is "root", or repeats) gets a
// generated one, and `sourceIds` maps it back so an action names the v1 button id.
// Pure: no DOM, no network.

import { escapeToken } from './patch.js';
import { BASIC_CATALOG } from './schema.js';

const COMPONENT_ID = /^[A-Za-z0-9_.-]{1,128}$/;
const FIELDS = new Set(['field.text', 'field.date', 'field.select', 'field.checkbox']);

export const V1_SURFACE_ID = '~v1'; // the run's one v1 surface (app/core/projection/surfaces.py)

/**
 * The v1 payload {catalogVersion, surface} as {messages, sourceIds}: three A2UI v0.9 messages
 * (createSurface, updateComponents, updateDataModel) for `surfaceId`, and a map from each
 * generated v0.9 component id back to the v1 component id it came from.
 */
export function migrateV1(payload, surfaceId = V1_SURFACE_ID) {
  const used = new Set(['root']);
  const sourceIds = {};
  let counter = 0;
  const fresh = base => {
    let id = base;
    while (used.has(id)) id = `${base}.${++counter}`;
    used.add(id);
    return id;
  };
  const idFor = v1Id => {
    const id = typeof v1Id === 'string' && COMPONENT_ID.test(v1Id) && !used.has(v1Id) ? v1Id : fresh('v1c');
    used.add(id);
    if (typeof v1Id === 'string') sourceIds[id] = v1Id;
    return id;
  };
  const surface = payload.surface ?? {};
  const v1Components = Array.isArray(surface.components) ? surface.components : [];
  const path = v1Id => ({ path: '/' + escapeToken(v1Id) });
  const fieldIds = v1Components.filter(c => FIELDS.has(c.component)).map(c => c.id);

  const components = [];
  const children = [];
  const data = {};
  const push = component => {
    components.push(component);
    return component.id;
  };

  if (typeof surface.title === 'string') {
    children.push(push({ id: fresh('title'), component: 'Text', text: surface.title, variant: 'h1' }));
  }
  for (const c of v1Components) {
    switch (c.component) {
      case 'heading': {
        const level = Number.isInteger(c.level) ? Math.min(c.level, 5) : 2;
        children.push(push({ id: fresh('heading'), component: 'Text', text: c.text, variant: `h${level}` }));
        break;
      }
      case 'text':
        children.push(push({ id: fresh('text'), component: 'Text', text: c.text, variant: 'body' }));
        break;
      case 'field.text': {
        const field = { id: idFor(c.id), component: 'TextField', label: c.label, value: path(c.id) };
        if (c.required === true) {
          field.checks = [{ condition: { call: 'required', args: { value: path(c.id) } }, message: 'Required' }];
        }
        data[c.id] ??= '';
        children.push(push(field));
        break;
      }
      case 'field.date':
        data[c.id] ??= '';
        children.push(push({ id: idFor(c.id), component: 'DateTimeInput', label: c.label, value: path(c.id), enableDate: true }));
        break;
      case 'field.select':
        data[c.id] ??= [];
        children.push(push({
          id: idFor(c.id),
          component: 'ChoicePicker',
          label: c.label,
          variant: 'mutuallyExclusive',
          options: c.options.map(o => ({ label: o.label, value: o.value })),
          value: path(c.id),
        }));
        break;
      case 'field.checkbox':
        data[c.id] = c.default === true;
        children.push(push({ id: idFor(c.id), component: 'CheckBox', label: c.label, value: path(c.id) }));
        break;
      case 'action.button': {
        const id = idFor(c.id);
        const label = push({ id: fresh(`${id}_label`), component: 'Text', text: c.label });
        const context = {};
        for (const fieldId of fieldIds) context[fieldId] = path(fieldId);
        const event = { name: c.action.target };
        if (fieldIds.length) event.context = context;
        children.push(push({ id, component: 'Button', child: label, action: { event } }));
        break;
      }
      default:
        throw new Error(`component ${JSON.stringify(c.component)} is not in the v1 catalog`);
    }
  }
  components.unshift({ id: 'root', component: 'Column', children });
  const messages = [
    { version: 'v0.9', createSurface: { surfaceId, catalogId: BASIC_CATALOG } },
    { version: 'v0.9', updateComponents: { surfaceId, components } },
    { version: 'v0.9', updateDataModel: { surfaceId, path: '/', value: data } },
  ];
  return { messages, sourceIds };
}
