// The official A2UI renderer (@a2ui/lit, A2UI v0.9) fed from the viewer's validated surfaces.
//
// Every change to a held surface builds a FRESH A2UI surface model from validated data only
// (the v2 fold's messages, or the v1 payload through the RFC 0209 migration map), so what is
// drawn is always exactly the validated fold: nothing the viewer refused ever reaches the
// renderer, and a stale surface is simply not drawn.
//
// The catalog is the OpenWOP profile of the basic catalog (RFC 0209 §B.6): the ten profile
// components and the one function the profile allows (`required`). Media components (which
// would fetch URLs) and `openUrl` are not in it, whatever a payload says.
//
// Cycle safety: @a2ui/lit walks `children`/`child` with no visited set (core/tree.js says how),
// so a cyclic tree would nest elements forever and freeze the tab. The core never marks such a
// surface renderable, and buildSurface checks once more, on the renderer's OWN component model
// after the messages are processed (whatever produced them: the v2 fold or the v1 migration),
// and refuses to hand an unsafe tree to <a2ui-surface>.
//
// Buttons: <a2ui-viewer-button> is the basic catalog's button that also honours the viewer's
// action gate (trusted, final, live surface of a live run; E1, §7). A gated button renders
// `disabled` and its click does nothing; an enabled one dispatches the A2UI action, which the
// page sends to POST /runs/{runId}/actions and nowhere else.

import { nothing, html } from 'lit';
import { classMap } from 'lit/directives/class-map.js';
import { Catalog, MessageProcessor } from '@a2ui/web_core/v0_9';
import {
  A2uiBasicButtonElement,
  A2uiCard,
  A2uiCheckBox,
  A2uiChoicePicker,
  A2uiColumn,
  A2uiDateTimeInput,
  A2uiDivider,
  A2uiRow,
  A2uiText,
  A2uiTextField,
  ButtonApi,
  RequiredImplementation,
} from '@a2ui/web_core/v0_9/basic_catalog';
import '@a2ui/lit/v0_9'; // defines <a2ui-surface>

import { BASIC_CATALOG } from '../core/schema.js';
import { treeProblem } from '../core/tree.js';

/** The renderer refused to draw a tree it would walk forever (or absurdly far). */
export class UnsafeTreeError extends Error {
  constructor(problem) {
    super(problem.message);
    this.problem = problem;
  }
}

/** The components as the renderer holds them: id -> {id, component, ...properties}. */
function rendererComponents(surface) {
  const components = new Map();
  for (const [id, model] of surface.componentsModel.entries) {
    components.set(id, { ...model.properties, id, component: model.type });
  }
  return components;
}

/** surface components model -> {enabled, reason}: read by every button of that surface. */
const gates = new WeakMap();

class ViewerButton extends A2uiBasicButtonElement {
  render() {
    const props = this.controller.props;
    if (!props) return nothing;
    const gate = gates.get(this.context?.surfaceComponents) ?? { enabled: false, reason: 'no gate' };
    const disabled = !gate.enabled || props.isValid === false;
    const variant = props.variant ?? 'default';
    const classes = { 'a2ui-button': true, [variant]: true, ['a2ui-button-' + variant]: true };
    return html`
      <button
        type="button"
        class=${classMap(classes)}
        title=${gate.enabled ? 'sends this action to POST /runs/{runId}/actions' : `disabled: ${gate.reason}`}
        data-gated=${gate.enabled ? 'open' : 'closed'}
        ?disabled=${disabled}
        @click=${() => {
          if (!disabled) props.action?.();
        }}
      >
        ${props.child ? this.renderNode(props.child) : nothing}
      </button>
    `;
  }
}
customElements.define('a2ui-viewer-button', ViewerButton);

export const profileCatalog = new Catalog(
  BASIC_CATALOG,
  [
    A2uiText,
    A2uiTextField,
    A2uiCheckBox,
    A2uiChoicePicker,
    A2uiDateTimeInput,
    { ...ButtonApi, tagName: 'a2ui-viewer-button' },
    A2uiColumn,
    A2uiRow,
    A2uiCard,
    A2uiDivider,
  ],
  [RequiredImplementation],
);

/**
 * A fresh A2UI surface model for `messages` (all for `surfaceId`), with its action gate.
 * `onAction(action)` receives A2UI client actions {name, surfaceId, sourceComponentId, context}.
 * Returns {surface, dispose} or throws when the renderer refuses the messages, and
 * UnsafeTreeError when their component tree is not safe to walk (core/tree.js).
 */
export function buildSurface(surfaceId, messages, gate, onAction) {
  const processor = new MessageProcessor([profileCatalog], action => {
    if (gate.enabled) return onAction(action);
    return undefined; // a gated surface never sends (belt and braces: its buttons are disabled)
  });
  processor.processMessages(structuredClone(messages));
  const surface = processor.model.getSurface(surfaceId);
  const dispose = () => processor.model.dispose?.();
  if (!surface) {
    dispose();
    throw new Error('the renderer holds no surface after the messages');
  }
  const problem = treeProblem(rendererComponents(surface));
  if (problem) {
    dispose();
    throw new UnsafeTreeError(problem);
  }
  gates.set(surface.componentsModel, gate);
  return { surface, dispose };
}
