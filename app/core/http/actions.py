"""Checking a user's action against the materialized surface it was fired from (issue 7).

Role: pure. ``POST /runs/{runId}/actions`` carries ``{surfaceId, sourceComponentId, name,
context}`` as the user fired it (A2UI v0.9 client-to-server ``action``; v1: the
``action.button``'s target and the collected field values). Before the host records anything
it checks, against the surface as the log materializes it (app.core.projection.surfaces):

1. ``action-confinement``: the name is ``resume`` or ``exchange`` (a2ui-action-confinement);
2. ``surface-live``: the surface exists and is not deleted (``not_found``);
3. ``surface-final``: its last envelope is not a partial chunk (E1);
4. ``untrusted-blocks-approval``: it is trusted (§7: ``forbidden`` /
   untrusted_content_blocks_approval; the rule the validator's re-check names too);
5. ``component-button``: the source component is a v2 ``Button`` / v1 ``action.button`` whose
   action name (v2 ``action.event.name``, v1 ``action.target``) is the submitted name;
6. ``context-path``: the context resolves against the surface's data model. v2 with a declared
   ``event.context``: exactly its keys; a literal must come back unchanged; a ``{path}``
   binding must point at a location the data model holds (the user's value is taken as
   typed). No declared context: the whole data model at ``/``, so every submitted key must
   be a top-level key of the data model. v1: every key is the id of a field of the surface.

The validator re-checks 1-4 against the run state, plus "unchanged since", when it records the
action (app.core.admission.host_commands_action), so a surface that changed in between is never
acted on.

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core.admission.host_commands_action import ACTION_NAMES
from app.core.admission.refusal import Violation
from app.core.admission.rules import (
    ACTION_CONFINEMENT,
    ACTION_SHAPE,
    COMPONENT_BUTTON,
    CONTEXT_PATH,
    SURFACE_FINAL,
    SURFACE_LIVE,
    UNTRUSTED_BLOCKS_APPROVAL,
    Rule,
    refuse,
)
from app.core.projection.surfaces import V1_SURFACE_ID, Surface, parse_data_path

__all__ = ["check_action"]

_V1_FIELDS = frozenset({"field.text", "field.select", "field.checkbox", "field.date"})


def _refuse(rule: Rule, pointer: str, message: str, **details: Any) -> Violation:
    return refuse(rule, pointer, message, details)


def _resolves(data_model: Any, path: Any) -> bool:
    try:
        tokens = parse_data_path(path)
    except (ValueError, TypeError):
        return False
    node = data_model
    for token in tokens:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return True


def _v2_context(button: Mapping[str, Any], content: Mapping[str, Any], context: Any) -> Any:
    event = button.get("action", {}).get("event", {})
    declared = event.get("context")
    data_model = content.get("dataModel", {})
    submitted = {} if context is None else context
    if not isinstance(submitted, dict):
        return _refuse(CONTEXT_PATH, "/context", "context must be an object")
    if not isinstance(declared, dict):  # no context: the whole data model at "/"
        extra = sorted(set(submitted) - set(data_model if isinstance(data_model, dict) else {}))
        if extra:
            return _refuse(
                CONTEXT_PATH,
                "/context",
                f"keys {extra} are not in the surface's data model",
                keys=extra,
            )
        return submitted
    if set(submitted) != set(declared):
        return _refuse(
            CONTEXT_PATH,
            "/context",
            f"the Button declares context keys {sorted(declared)}, not {sorted(submitted)}",
        )
    for key, binding in declared.items():
        if isinstance(binding, dict) and "path" in binding:
            if not _resolves(data_model, binding["path"]):
                return _refuse(
                    CONTEXT_PATH,
                    f"/context/{key}",
                    f"context {key!r} binds {binding['path']!r}, outside the data model",
                )
        elif submitted[key] != binding:
            return _refuse(
                CONTEXT_PATH, f"/context/{key}", f"context {key!r} is a literal: unchanged"
            )
    return submitted


def _v1_context(components: list[Any], context: Any) -> Any:
    submitted = {} if context is None else context
    if not isinstance(submitted, dict):
        return _refuse(CONTEXT_PATH, "/context", "context must be an object")
    fields = {
        c.get("id") for c in components if isinstance(c, dict) and c.get("component") in _V1_FIELDS
    }
    extra = sorted(set(submitted) - fields)
    if extra:
        return _refuse(
            CONTEXT_PATH, "/context", f"keys {extra} are not fields of the surface", keys=extra
        )
    return submitted


def check_action(surface: Surface | None, submission: Any) -> dict[str, Any] | Violation:
    """The context to record for ``submission`` on ``surface``, or why it is refused."""
    if not isinstance(submission, dict):
        return refuse(ACTION_SHAPE, "", "the body is an action object")
    name = submission.get("name")
    if name not in ACTION_NAMES:
        return _refuse(
            ACTION_CONFINEMENT, "/name", f"an action is resume or exchange, not {name!r}"
        )
    source = submission.get("sourceComponentId")
    if not isinstance(source, str):
        return refuse(ACTION_SHAPE, "/sourceComponentId", "a string is required")
    if surface is None or surface.deleted:
        return refuse(SURFACE_LIVE, "/surfaceId", "no live surface there")
    if surface.partial:
        return _refuse(SURFACE_FINAL, "/surfaceId", "the surface is not final yet (E1)")
    if surface.trust != "trusted":
        return refuse(
            UNTRUSTED_BLOCKS_APPROVAL,
            "/surfaceId",
            "untrusted_content_blocks_approval: the surface carries untrusted content",
            {"reason": "untrusted_content_blocks_approval"},
        )
    content = surface.content
    if surface.key.surface_id == V1_SURFACE_ID:
        components = content.get("surface", {}).get("components", [])
        button = next(
            (c for c in components if isinstance(c, dict) and c.get("id") == source), None
        )
        if button is None or button.get("component") != "action.button":
            return _refuse(COMPONENT_BUTTON, "/sourceComponentId", "not an action.button")
        if button.get("action", {}).get("target") != name:
            return _refuse(COMPONENT_BUTTON, "/name", "the button's target is another name")
        return _wrap(_v1_context(components, submission.get("context")))
    button = content.get("components", {}).get(source)
    if not isinstance(button, dict) or button.get("component") != "Button":
        return _refuse(COMPONENT_BUTTON, "/sourceComponentId", "not a Button of this surface")
    if button.get("action", {}).get("event", {}).get("name") != name:
        return _refuse(COMPONENT_BUTTON, "/name", "the Button's event name is another name")
    return _wrap(_v2_context(button, content, submission.get("context")))


def _wrap(context: Any) -> dict[str, Any] | Violation:
    return context if isinstance(context, Violation) else {"context": context}
