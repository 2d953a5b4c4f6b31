"""Explicit resource limits on an admission record, and the checks that enforce them.

A hostile or broken producer must not be able to crash the validator, the projector or a
renderer, nor to make them spend unbounded memory or time (issue 8 §2). Limits that are
checked on the BYTES (size before parsing, unique member names, integer range, the parser's and
the encoder's nesting ceilings) live in ``app.core.admission.intake``; the limits here are checked
on the parsed envelope by the ``limits`` step of ``app.core.admission.decision.decide``, after the
payload branch. The branch schemas already bound most of a ``ui.a2ui-surface`` payload (string
``maxLength``, ``maxItems`` per array, closed objects of fixed depth), so this step only walks
what they leave open (its cost: docs/admission.md "Performance"):

- ``updateDataModel.value`` (any JSON), and its ``path`` (an RFC 6901 pointer);
- strings without a ``maxLength`` (``payload.reasoning``, ``meta.ts`` fractions,
  ``meta.traceparent``, ``meta.rendering.*``, most of the v1 branch);
- the payload of a universal kind (recorded unchecked, docs/admission.md decision 1);
- the number of components across the messages of one envelope;
- with the component walk on (``Limits.max_children_depth``): the ``children``/``child`` graph
  between them (its depth, and cycles within the envelope) and the array values of a Button's
  ``event.context``. Cycles across envelopes are the ``children`` step's
  (app.core.admission.children).

Every refusal is ``record_limit_exceeded`` with ``rule`` naming the limit, except what is not a
resource limit but a malformed value: a cycle (``envelope_invalid``, rule ``children-cycle``)
and a malformed pointer (``envelope_invalid``, rule ``data-path``). Paths are RFC 6901 JSON
Pointers into the admission record.

Fast paths (STYLE rule 12), each beside the reference it shortcuts and tied to it by a law in
tests/core/test_fast_paths.py:

- ``plainly_within`` is the fast screen of ``check_envelope`` (the reference) for a v2
  envelope: True only when the reference finds no violation; False means "ask the reference";
- ``scan_open_value`` is the fast twin of ``walk_open_value`` (the reference walk): a flat
  container is checked in one loop, anything nested is walked; both find the same thing.

May import: the standard library, app.core.admission.refusal, app.core.admission.rules,
app.core.admission.children and app.core.common.pointer (pure).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from app.core.admission.children import cycle_refusal, locate_component
from app.core.admission.refusal import Violation
from app.core.admission.rules import (
    CHILDREN_DEPTH,
    COMPONENTS,
    DATA_PATH,
    DEPTH,
    STRING_CHARS,
    Rule,
    refuse,
)
from app.core.common.pointer import escape, join, syntax_error

__all__ = [
    "DEPTH_CEILING",
    "DEPTH_FLOOR",
    "Branch",
    "Limits",
    "check_envelope",
    "first_deeper",
    "plainly_within",
    "scan_open_value",
    "walk_open_value",
]

# orjson encodes at most 254 nested levels and the recorded event puts the envelope one level
# deeper than the admission record does (event.payload.envelope vs record.envelope): a record
# deeper than this could be admitted but never recorded (admission.encode_event).
DEPTH_CEILING: Final = 250
# The schemas' own structure reaches level 13 (a check's condition binding inside a component),
# so a limit below that would say less than they do, and one at 16 leaves a data-model value
# (level 7) room for a few levels; nothing lower is useful.
DEPTH_FLOOR: Final = 16

# Nesting levels above each open place (the admission record is level 1):
# record / envelope / payload / messages / message / updateDataModel / value
_VALUE_LEVEL: Final = 7
# record / envelope / payload / messages / message / updateComponents / components / component /
# action / event / context / <array>
_CONTEXT_LEVEL: Final = 12
_PAYLOAD_LEVEL: Final = 3  # record / envelope / payload (and meta)
_MESSAGES: Final = "/envelope/payload/messages"

Branch = Literal["v1", "v2", "unchecked"]


@dataclass(frozen=True, slots=True)
class Limits:
    """The configurable limits (defaults with their reasons; docs/admission.md "Limits").

    - ``max_depth`` (64): nesting of objects and arrays, counted from the admission record
      (level 1). Outside the open places the schemas stop at level 13; 64 leaves a data-model
      value (level 7) 57 levels: far more than any form needs, and far below what orjson can
      encode (``DEPTH_CEILING``) or a recursive renderer can walk.
    - ``max_string_chars`` (65,536): characters (code points) of any string or object key the
      schemas leave unbounded. The profile's own text fields stop at 4096; 64 Ki leaves a
      data-model string room for a long draft while refusing a megabyte blob that every frame,
      SR-1 scan and renderer would carry again.
    - ``max_components`` (2,048): components across all ``updateComponents`` messages of ONE
      envelope (the schema allows 512 per message and 64 messages: 32,768). Four full messages;
      a surface this large is already beyond what a person reviews.
    - ``max_children_depth`` (0: off): when set (3 or more; 64 is many times a real layout),
      the component walk refuses a chain of ``children``/``child`` longer than this within one
      envelope (and a cycle within it, first), and scans the array values of Buttons'
      ``event.context``. Off by default: it walks every component in Python (about 7 µs on the
      RFC 0209 example where the rest of this step costs 2.5, +45 % on a 512-component
      envelope), and a deep acyclic chain is no hazard. Cycles are refused whatever this says,
      across envelopes too, by the ``children`` step (app.core.admission.children).
      Without it, context arrays are bounded by ``DEPTH_CEILING`` and the record size.
    """

    max_depth: int = 64
    max_string_chars: int = 65_536
    max_components: int = 2_048
    max_children_depth: int = 0

    def __post_init__(self) -> None:
        # Operator errors (the shell's settings check the same bounds and name the variable).
        if not DEPTH_FLOOR <= self.max_depth <= DEPTH_CEILING:
            raise ValueError(
                f"max_depth must be in [{DEPTH_FLOOR}, {DEPTH_CEILING}], not {self.max_depth!r}"
            )
        for name, low in (("max_string_chars", 1), ("max_components", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer of at least {low}, not {value!r}")
        chain = self.max_children_depth
        if not isinstance(chain, int) or chain < 0 or chain in (1, 2):
            raise ValueError(
                "max_children_depth must be 0 (no component walk) or at least 3, "
                f"not {self.max_children_depth!r}"
            )


# --- refusals ------------------------------------------------------------------------------------


def _exceeded(rule: Rule, path: str, message: str, **details: Any) -> Violation:
    return refuse(rule, path, message, {"rule": rule.id, **details})


def _too_many(path: str, count: int, limit: int) -> Violation:
    return _exceeded(
        COMPONENTS,
        path,
        f"the envelope carries at least {count} components; the limit is {limit} per envelope "
        "(A2UI_STREAM_MAX_COMPONENTS): split the surface over several envelopes",
        limit=limit,
    )


# --- the generic scan of an open value ------------------------------------------------------------

# (the parent's link, this node's token): a node's pointer, built only when it is refused
_Link = tuple[Any, str | int] | None
# what a scan found: (the rule, the link of the offending node, its size, what it is)
_Found = tuple[Rule, _Link, int, str]


def _pointer(base: str, link: _Link) -> str:
    tokens: list[str | int] = []
    while link is not None:
        link, token = link
        tokens.append(token)
    return join(base, *reversed(tokens))


def scan_open_value(root: Any, level: int, limits: Limits) -> _Found | None:
    """The first string, key or container in ``root`` (nesting ``level`` if a container) over
    the limits: the fast twin of ``walk_open_value``. It runs for every data-model value, so a
    flat container (the usual case) is checked in one loop before the general walk sets up."""
    chars = limits.max_string_chars
    kind = type(root)
    if kind is str:
        return (STRING_CHARS, None, len(root), "a string") if len(root) > chars else None
    if kind is dict:
        items: Any = root.items()
    elif kind is list:
        items = enumerate(root)
    else:
        return None
    if level > limits.max_depth:
        return (DEPTH, None, level, "a container")
    for token, value in items:
        if type(token) is str and len(token) > chars:
            return (STRING_CHARS, None, len(token), "an object key")
        kind = type(value)
        if kind is str:
            if len(value) > chars:
                return (STRING_CHARS, (None, token), len(value), "a string")
        elif kind is dict or kind is list:
            return walk_open_value(root, level, limits)
    return None


def walk_open_value(root: Any, level: int, limits: Limits) -> _Found | None:
    """The first string, key or container in the container ``root`` (nesting ``level``) over
    the limits, checking every member of a container before what is nested in it: the
    reference of ``scan_open_value``. Iterative: any depth is safe."""
    chars = limits.max_string_chars
    max_depth = limits.max_depth
    stack: list[tuple[Any, int, _Link]] = [(root, level, None)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth, link = pop()
        if depth > max_depth:
            return (DEPTH, link, depth, "a container")
        items = node.items() if type(node) is dict else enumerate(node)
        for token, value in items:
            if type(token) is str and len(token) > chars:
                return (STRING_CHARS, link, len(token), "an object key")
            kind = type(value)
            if kind is str:
                if len(value) > chars:
                    return (STRING_CHARS, (link, token), len(value), "a string")
            elif kind is dict or kind is list:
                push((value, depth + 1, (link, token)))
    return None


def _refuse(found: _Found, base: str, limits: Limits) -> Violation:
    rule, link, size, what = found
    path = _pointer(base, link)
    if rule is DEPTH:
        return _exceeded(
            DEPTH,
            path,
            f"{path} nests deeper than {limits.max_depth} levels from the record "
            "(A2UI_STREAM_MAX_DEPTH): flatten the value or split it over several "
            "updateDataModel paths",
            limit=limits.max_depth,
        )
    return _exceeded(
        STRING_CHARS,
        path,
        f"{what} at {path or '/'} has {size} characters; the limit is "
        f"{limits.max_string_chars} (A2UI_STREAM_MAX_STRING_CHARS): send a reference to large "
        "content, not the content",
        limit=limits.max_string_chars,
        size=size,
    )


def _scan_at(root: Any, base: str, level: int, limits: Limits) -> Violation | None:
    found = scan_open_value(root, level, limits)
    return None if found is None else _refuse(found, base, limits)


def first_deeper(root: Any, max_depth: int) -> str | None:
    """The JSON Pointer of the first container nested deeper than ``max_depth`` (``root`` is
    level 1), or None. Iterative: any depth is safe."""
    if type(root) is not dict and type(root) is not list:
        return None
    stack: list[tuple[Any, int, _Link]] = [(root, 1, None)]
    while stack:
        node, depth, link = stack.pop()
        if depth > max_depth:
            return _pointer("", link)
        items = node.items() if type(node) is dict else enumerate(node)
        for token, value in items:
            if type(value) is dict or type(value) is list:
                stack.append((value, depth + 1, (link, token)))
    return None


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
            return _refuse(found, "/envelope/meta", limits)
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
                    return _refuse(found, base, limits)
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
    return _refuse(found, f"{_MESSAGES}/{index}/updateDataModel/value", limits)


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
                return _exceeded(
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
