"""Explicit resource limits on an admission record, and the scan of an open value against them.

A hostile or broken producer must not be able to crash the validator, the projector or a
renderer, nor to make them spend unbounded memory or time (issue 8 §2). Limits that are
checked on the BYTES (size before parsing, unique member names, integer range, the parser's and
the encoder's nesting ceilings) live in ``app.core.admission.intake``; the limits here are checked
on the parsed envelope by the ``limits`` step of ``app.core.admission.decision.decide``, after the
payload branch (``check_envelope``, app.core.admission.limits_envelope). The branch schemas
already bound most of a ``ui.a2ui-surface`` payload (string ``maxLength``, ``maxItems`` per array,
closed objects of fixed depth), so this step only walks what they leave open (its cost:
docs/admission.md "Performance"):

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

This module holds the limits (``Limits``), the generic scan of an open value and the refusals
it yields (``refuse_found``, ``refuse_limit``); app.core.admission.limits_envelope holds the
checks of an envelope's open places that use them. Fast paths (STYLE rule 12), each beside the
reference it shortcuts and tied to it by a law in tests/core/test_fast_paths.py:

- ``plainly_within`` (limits_envelope) is the fast screen of ``check_envelope`` (the reference)
  for a v2 envelope: True only when the reference finds no violation; False means "ask the
  reference";
- ``scan_open_value`` is the fast twin of ``walk_open_value`` (the reference walk): a flat
  container is checked in one loop, anything nested is walked; both find the same thing.

May import: the standard library, app.core.admission.refusal, app.core.admission.rules and
app.core.common.pointer (pure).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from app.core.admission.refusal import Violation
from app.core.admission.rules import DEPTH, STRING_CHARS, Rule, refuse
from app.core.common.pointer import join

__all__ = [
    "DEPTH_CEILING",
    "DEPTH_FLOOR",
    "Branch",
    "Limits",
    "first_deeper",
    "refuse_found",
    "refuse_limit",
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


def refuse_limit(rule: Rule, path: str, message: str, **details: Any) -> Violation:
    """The refusal of a limit: ``rule``'s code, with ``rule`` and ``details`` in its details."""
    return refuse(rule, path, message, {"rule": rule.id, **details})


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


def refuse_found(found: _Found, base: str, limits: Limits) -> Violation:
    """The refusal of what a scan ``found`` in the open value at the pointer ``base``."""
    rule, link, size, what = found
    path = _pointer(base, link)
    if rule is DEPTH:
        return refuse_limit(
            DEPTH,
            path,
            f"{path} nests deeper than {limits.max_depth} levels from the record "
            "(A2UI_STREAM_MAX_DEPTH): flatten the value or split it over several "
            "updateDataModel paths",
            limit=limits.max_depth,
        )
    return refuse_limit(
        STRING_CHARS,
        path,
        f"{what} at {path or '/'} has {size} characters; the limit is "
        f"{limits.max_string_chars} (A2UI_STREAM_MAX_STRING_CHARS): send a reference to large "
        "content, not the content",
        limit=limits.max_string_chars,
        size=size,
    )


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
