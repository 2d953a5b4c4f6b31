"""The payload rules' affordance detectors: inside a v2 component the profile otherwise admits,
the first excluded affordance (a client function, an event name other than resume or exchange,
an obscured text field, a data-model template, a FunctionCall-shaped value).

Role: pure, for app.core.admission.payload_rules' diagnosis of a refused component. Each detector
returns ``(affordance, path tokens, message)`` for the first exclusion, or None; the affordances
are the keys of app.core.admission.payload_rules_exclusions ``EXCLUSIONS``. The walk is iterative
and bounded in depth and size, so no JSON input makes it raise or run away.

May import: the standard library and app.core.admission.decision (payload_rules_exclusions,
payload_rules_violations).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from app.core.admission.payload_rules_exclusions import ALLOWED_EVENT_NAMES
from app.core.admission.payload_rules_violations import quoted

__all__ = ["AffordanceFound", "find_affordance"]

_MAX_DEPTH: Final = 64  # bound for the FunctionCall scan (the profile's values are shallow)
_MAX_NODES: Final = 100_000


# (affordance, path tokens inside the component, message): the first exclusion a detector found
AffordanceFound = tuple[str, tuple[str | int, ...], str]


def find_affordance(
    component: dict[str, Any], name: str, label: str, who: str
) -> AffordanceFound | None:
    """The first excluded affordance of the v2 component ``name`` (a Button's client function
    or event name, an obscured TextField, a templated Row or Column, then any FunctionCall
    value); ``label`` and ``who`` name the component in the message."""
    action = component.get("action")
    if name == "Button" and isinstance(action, dict):
        if "functionCall" in action:  # RFC 0209 §B.3: openUrl and every client function
            call = action["functionCall"]
            call_name = call.get("call") if isinstance(call, dict) else call
            return (
                "functionCall",
                ("action", "functionCall"),
                f"{who} Button action uses functionCall {quoted(call_name)}: excluded",
            )
        event = action.get("event")
        event_name = event.get("name", "resume") if isinstance(event, dict) else "resume"
        if event_name not in ALLOWED_EVENT_NAMES:
            return (
                "event-name",
                ("action", "event", "name"),
                f"{label} event name {quoted(event_name)} is not resume or exchange",
            )
    if name == "TextField" and component.get("variant") == "obscured":
        return ("obscured", ("variant",), f'{label} variant "obscured": excluded')
    if name in ("Row", "Column") and isinstance(component.get("children"), dict):
        return (
            "template",
            ("children",),
            f"{label} children is a data-model template {{componentId, path}}: excluded",
        )
    return _function_value(component, label)


def _function_value(component: dict[str, Any], label: str) -> AffordanceFound | None:
    """The first FunctionCall-shaped value (an object with ``call``, or with ``functionCall``)
    anywhere in the component, array items at any depth included (web_core evaluates them:
    docs/admission.md decision 11), except the one the profile admits: ``checks[i].condition``
    calling ``required`` over a binding."""
    for tokens, node in _walk(component):
        if not isinstance(node, dict):
            continue
        if "call" in node:
            call = node["call"]
        elif "functionCall" in node:
            wrapped = node["functionCall"]
            call = wrapped.get("call") if isinstance(wrapped, dict) else wrapped
            return (
                "function-value",
                tokens,
                f"{label} {'/'.join(str(t) for t in tokens)} is a functionCall "
                f"{quoted(call)}: excluded",
            )
        else:
            continue
        where = "/".join(str(t) for t in tokens)
        if _is_condition(tokens):
            if call != "required":
                return (
                    "function-value",
                    tokens,
                    f'{label} check condition calls {quoted(call)}: only "required" is admitted',
                )
            continue
        if len(tokens) > 3 and _is_condition(tokens[:3]):
            return (
                "nested-call",
                tokens,
                f"{label} check {tokens[1]} nests a call {quoted(call)} inside required: excluded",
            )
        return (
            "function-value",
            tokens,
            f"{label} {where} is a FunctionCall {quoted(call)}: excluded",
        )
    return None


def _is_condition(tokens: tuple[str | int, ...]) -> bool:
    return len(tokens) == 3 and tokens[0] == "checks" and tokens[2] == "condition"


def _walk(root: Any) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """Pre-order (path, value) pairs, iterative and bounded in depth and size."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), root)]
    seen = 0
    while stack and seen < _MAX_NODES:
        tokens, node = stack.pop()
        seen += 1
        yield tokens, node
        if len(tokens) >= _MAX_DEPTH:
            continue
        if isinstance(node, dict):
            stack.extend(((*tokens, k), v) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend(((*tokens, i), v) for i, v in reversed(list(enumerate(node))))
