"""The limits' checks on a parsed envelope: the ``limits`` step of
``app.core.admission.decision.decide``, after the payload branch (what the limits are and why:
app.core.admission.limits).

``check_envelope`` is the reference: every check with its pointer, walking only what the branch
schemas leave open (``meta``, the payload of a universal kind or of the v1 branch, and in a v2
payload its ``reasoning``, the component count, ``updateDataModel`` values and paths, and with
the component walk on, Buttons' ``event.context`` arrays and the ``children``/``child`` graph
within the envelope). ``plainly_within`` is its fast screen (STYLE rule 12) for a v2 envelope,
tied to it by a law in tests/core/test_fast_paths.py. The generic scan of an open value, which
both use, is app.core.admission.limits ``scan_open_value``.

May import: the standard library, app.core.admission.limits, app.core.admission.refusal,
app.core.admission.rules, app.core.admission.children and app.core.common.pointer (pure).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from app.core.admission.children import cycle_refusal, locate_component
from app.core.admission.limits import (
    Branch,
    Limits,
    refuse_found,
    refuse_limit,
    scan_open_value,
)
from app.core.admission.refusal import Violation
from app.core.admission.rules import CHILDREN_DEPTH, COMPONENTS, DATA_PATH, refuse
from app.core.common.pointer import escape, syntax_error

__all__ = ["check_envelope", "plainly_within"]

# Nesting levels above each open place (the admission record is level 1):
# record / envelope / payload / messages / message / updateDataModel / value
_VALUE_LEVEL: Final = 7
# record / envelope / payload / messages / message / updateComponents / components / component /
# action / event / context / <array>
_CONTEXT_LEVEL: Final = 12
_PAYLOAD_LEVEL: Final = 3  # record / envelope / payload (and meta)
_MESSAGES: Final = "/envelope/payload/messages"


def _too_many(path: str, count: int, limit: int) -> Violation:
    return refuse_limit(
        COMPONENTS,
        path,
        f"the envelope carries at least {count} components; the limit is {limit} per envelope "
        "(A2UI_STREAM_MAX_COMPONENTS): split the surface over several envelopes",
        limit=limit,
    )


def _scan_at(root: Any, base: str, level: int, limits: Limits) -> Violation | None:
    found = scan_open_value(root, level, limits)
    return None if found is None else refuse_found(found, base, limits)


# --- the checks ----------------------------------------------------------------------------------


def check_envelope(
    envelope: Mapping[str, Any],
    branch: Branch,
    kinds: tuple[str, ...] | None,
    limits: Limits,
) -> Violation | None:
    """The first limit ``envelope`` exceeds, or None. ``branch`` is the payload branch that
    admitted the payload (``unchecked`` for a universal kind); ``kinds`` are the v2 messages'
    kinds (``app.core.admission.cross_field.kinds_and_cross_field``). Never raises on an envelope
    that passed its branch. The reference that ``plainly_within`` screens for."""
    meta = envelope.get("meta")  # the schema requires ``ts`` and closes the object
    if meta is not None and not (
        meta.keys() <= _BOUNDED_META and len(meta["ts"]) <= limits.max_string_chars
    ):
        found = scan_open_value(meta, _PAYLOAD_LEVEL, limits)
        if found is not None:
            return refuse_found(found, "/envelope/meta", limits)
    payload = envelope.get("payload")
    if branch == "v2" and kinds is not None:
        return _check_v2(payload, kinds, limits)
    if branch == "v1":  # the v1 schema bounds neither the component count nor most strings
        surface = payload.get("surface") if isinstance(payload, dict) else None
        components = surface.get("components") if isinstance(surface, dict) else None
        if isinstance(components, list) and len(components) > limits.max_components:
            return _too_many(
                "/envelope/payload/surface/components", len(components), limits.max_components
            )
    return _scan_at(payload, "/envelope/payload", _PAYLOAD_LEVEL, limits)


def plainly_within(envelope: Mapping[str, Any], kinds: tuple[str, ...], limits: Limits) -> bool:
    """The fast screen of ``check_envelope``: True when a v2 ``envelope`` (its payload passed
    the branch; ``kinds`` as for ``check_envelope``) is plainly within the limits, and then
    ``check_envelope(envelope, "v2", kinds, limits)`` is None; False means "look closer", and
    ``check_envelope`` then finds the violation, if any, with its pointer.

    This screen runs for every admitted v2 envelope, and every bytecode of it shows in bench
    admission, so it answers from what is already known where it can: the branch schema allows
    at most 512 components per message, so a few messages cannot pass ``max_components``;
    ``kinds`` says whether there is a data-model value at all; the usual one is a flat object.
    The component walk (``max_children_depth`` > 0) is the costly part."""
    chars = limits.max_string_chars
    meta = envelope["meta"]  # required by the envelope schema, with ``ts``; closed
    if not meta.keys() <= _BOUNDED_META or len(meta["ts"]) > chars:
        return False
    payload = envelope["payload"]
    if "reasoning" in payload:
        return False
    if kinds.count("updateComponents") * _SCHEMA_MAX_COMPONENTS > limits.max_components:
        return False
    if limits.max_children_depth and not _plain_components(payload["messages"], kinds):
        return False
    data = kinds.count("updateDataModel")
    if data != 1:
        return data == 0
    body = payload["messages"][kinds.index("updateDataModel")]["updateDataModel"]
    path = body.get("path")
    if path and "~" in path:
        return False
    value = body.get("value")
    if type(value) is dict:  # a flat object of short strings and scalars
        for key, item in value.items():
            if len(key) > chars or type(item) is dict or type(item) is list:
                return False
            if type(item) is str and len(item) > chars:
                return False
        return True
    return type(value) is not list and not (type(value) is str and len(value) > chars)


def _plain_components(messages: list[Any], kinds: tuple[str, ...]) -> bool:
    """The component walk's screen: no Button context holds an array, and no component with
    children has a child with children (then every chain is at most 3 deep, and acyclic)."""
    parents: dict[str, Any] = {}
    for message, kind in zip(messages, kinds, strict=False):
        if kind == "updateComponents":
            for component in message[kind]["components"]:
                if "children" in component:
                    parents[component["id"]] = component["children"]
                elif "child" in component:
                    parents[component["id"]] = (component["child"],)
                    if "action" in component:
                        context = component["action"].get("event", _NO_EVENT).get("context")
                        if context and list in map(type, context.values()):
                            return False
        elif parents and (kind == "createSurface" or kind == "deleteSurface"):
            return False  # more than one surface in the envelope
    inner = set().union(*parents.values()).intersection(parents)
    return all(inner.isdisjoint(parents[node]) for node in inner)


# maxItems of updateComponents.components in schemas/a2ui-surface-v2-profile.schema.json
_SCHEMA_MAX_COMPONENTS: Final = 512


def _check_v2(payload: Any, kinds: tuple[str, ...], limits: Limits) -> Violation | None:  # noqa: C901 - the compiled hot path: one pass over the messages
    # Every check with its pointer (the careful path; ``plainly_within`` screens the usual case).
    if "reasoning" in payload:
        found = _scan_at(
            payload["reasoning"], "/envelope/payload/reasoning", _PAYLOAD_LEVEL, limits
        )
        if found is not None:
            return found
    messages = payload["messages"]
    walk = limits.max_children_depth != 0
    count = 0
    parents: dict[str, Any] = {}  # component id -> its child ids, in the current surface
    start = 0  # the first message of the current surface
    for index, kind in enumerate(kinds):
        if kind == "updateComponents":
            components = messages[index][kind]["components"]
            count += len(components)
            if count > limits.max_components:
                return _too_many(
                    f"{_MESSAGES}/{index}/updateComponents/components", count, limits.max_components
                )
            if not walk:
                continue
            for component in components:  # the last duplicate id wins, as in the fold
                if "children" in component:  # Row, Column: a list of ids (no templates)
                    parents[component["id"]] = component["children"]
                elif "child" in component:  # Button, Card
                    parents[component["id"]] = (component["child"],)
                    if "action" in component:  # an array in event.context: the open value
                        context = component["action"].get("event", _NO_EVENT).get("context")
                        if context and list in map(type, context.values()):
                            found = _context_arrays(components, index, limits)
                            if found is not None:
                                return found
        elif kind == "updateDataModel":
            body = messages[index][kind]
            path = body.get("path")
            if (path and "~" in path) or (
                "value" in body and scan_open_value(body["value"], _VALUE_LEVEL, limits)
            ):
                violation = _data_model(body, index, limits)
                if violation is not None:
                    return violation
        elif parents and (kind == "createSurface" or kind == "deleteSurface"):
            # a fresh surface: the earlier components are gone (a2ui-v09.md §5)
            violation = _check_children(parents, messages, start, index, limits)
            if violation is not None:
                return violation
            parents, start = {}, index
    if not parents:
        return None
    return _check_children(parents, messages, start, len(kinds), limits)


# The meta members the envelope schema bounds (enums, ``label`` maxLength 256), and ``ts``
# (date-time, but with any number of fraction digits: its length is checked).
_BOUNDED_META: Final = frozenset({"source", "ts", "contentTrust", "label"})
_NO_EVENT: Final[Mapping[str, Any]] = {}


def _context_arrays(components: list[Any], index: int, limits: Limits) -> Violation | None:
    """Scan the array values of the Buttons' ``event.context`` in one message."""
    for position, component in enumerate(components):
        action = component.get("action") if component.get("component") == "Button" else None
        context = action.get("event", {}).get("context", {}) if action else {}
        for name, value in context.items():
            if type(value) is list:
                found = scan_open_value(value, _CONTEXT_LEVEL, limits)
                if found is not None:
                    base = (
                        f"{_MESSAGES}/{index}/updateComponents/components/{position}"
                        f"/action/event/context/{escape(name)}"
                    )
                    return refuse_found(found, base, limits)
    return None


def _data_model(body: Mapping[str, Any], index: int, limits: Limits) -> Violation | None:
    path = body.get("path")
    if path is not None and "~" in path:
        error = syntax_error(path)
        if error is not None:
            return refuse(
                DATA_PATH,
                f"{_MESSAGES}/{index}/updateDataModel/path",
                f"updateDataModel path {path[:120]!r} is not an RFC 6901 JSON Pointer ({error}): "
                'write "~" in a key as "~0" and "/" as "~1"',
                {"rule": DATA_PATH.id},
            )
    if "value" not in body:
        return None
    found = scan_open_value(body["value"], _VALUE_LEVEL, limits)
    if found is None:
        return None
    return refuse_found(found, f"{_MESSAGES}/{index}/updateDataModel/value", limits)


# --- the children graph --------------------------------------------------------------------------


def _check_children(
    parents: dict[str, Any], messages: list[Any], start: int, end: int, limits: Limits
) -> Violation | None:
    """Cycles and the longest chain of one surface's children graph within the envelope
    (messages ``start`` to ``end``). A child id that is no parent here (a leaf, a component of
    an earlier envelope, or dangling) ends a chain.

    Only INNER components (parents that are also children) can lie on a cycle or inside a
    chain. They are found with C-speed set operations (usually a handful); when none has an
    inner child, every chain is at most parent -> inner -> child and there is no cycle.
    Otherwise they are peeled by levels: each round retires the inner components none of whose
    inner children is still pending, so their heights are known; a round that retires nothing
    leaves only cycles and what hangs above them."""
    inner = set().union(*parents.values()).intersection(parents)
    for node in inner:
        if not inner.isdisjoint(parents[node]):
            break
    else:  # at most 3 deep (max_children_depth is at least 3), and acyclic
        return None
    pending = {node: inner.intersection(parents[node]) for node in inner}
    height: dict[str, int] = {}  # components on the longest chain down from an inner one
    limit = limits.max_children_depth
    while pending:
        retired = [node for node, below in pending.items() if pending.keys().isdisjoint(below)]
        if not retired:
            return _cycle(pending, messages, start, end)
        for node in retired:
            below = pending.pop(node)
            tall = 1 + max(map(height.__getitem__, below)) if below else 1 + bool(parents[node])
            height[node] = tall
            if tall + 1 > limit:  # an inner component has a parent above it
                return refuse_limit(
                    CHILDREN_DEPTH,
                    _where(node, messages, start, end),
                    f"the children chain through component {node[:80]!r} is at least "
                    f"{tall + 1} components deep; the limit is {limit} "
                    "(A2UI_STREAM_MAX_CHILDREN_DEPTH): flatten the layout",
                    limit=limit,
                    componentId=node,
                )
    return None


def _where(node: str, messages: list[Any], start: int, end: int) -> str:
    index, position, _ = locate_component(node, messages, start, end)
    return f"{_MESSAGES}/{index}/updateComponents/components/{position}"


def _cycle(pending: dict[str, set[Any]], messages: list[Any], start: int, end: int) -> Violation:
    """Name one cycle among ``pending`` (each has a pending child): follow pending children
    until a component repeats, then list the cycle from it. Refusal path only."""
    node = next(iter(pending))
    seen: set[str] = set()
    while node not in seen:
        seen.add(node)
        node = min(pending[node] & pending.keys())
    cycle = [node]
    child = min(pending[node] & pending.keys())
    while child != node:
        cycle.append(child)
        child = min(pending[child] & pending.keys())
    # every component of the walk is this envelope's: the refusal names the edge back to `node`
    return cycle_refusal(cycle, frozenset(cycle), messages, start, end)
