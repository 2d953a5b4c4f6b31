"""Intake: the bytes of one admission-topic record -> an admission record, or a Violation.

Pure: standard library, orjson and app.core. This is the first stage of the admission order
(app.core.admission.validator ``ADMISSION``), the table ``INTAKE`` here: a record that is too large,
not UTF-8, not JSON, ambiguous JSON, or whose Kafka key disagrees with its runId never reaches
``decide`` (docs/pipeline.md). Every one is a value, never an exception, so the validator
never crashes on a poison record.

Ambiguous JSON (RFC 7493, I-JSON) is refused because two readers of the same bytes would see
two different records, and the log must mean to every consumer what the producer meant:

- a duplicate member name (orjson keeps the last value, other parsers the first or refuse):
  ``record_not_json``, rule ``record-duplicate-key``;
- an integer literal outside [-2^63, 2^64-1] (orjson silently reads it as a double, a different
  number), or a number beyond the double range (``1e400``): ``record_limit_exceeded``, rule
  ``number-range``.

Both are found without a second parse on the hot path: the parsed record is re-encoded (orjson,
about a quarter of the parse) and compared with the bytes, verbatim or with whitespace removed.
Equal means every member and every number survived the parse as written. Only other spellings
(other escapes, exponents) pay for the exact check with the standard library parser.
Nesting deeper than any setting admits (``DEPTH_CEILING``; orjson parses 1024 levels but
encodes 254) is ``record_limit_exceeded``, rule ``depth``, here too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import orjson

from app.core.admission.limits import DEPTH_CEILING, first_deeper
from app.core.admission.refusal import Violation
from app.core.admission.rules import (
    DEPTH,
    NUMBER_RANGE,
    RECORD_BYTES,
    RECORD_DUPLICATE_KEY,
    RECORD_JSON,
    RECORD_KEY,
    RECORD_SIZE,
    RECORD_UTF8,
    Rule,
    refuse,
)
from app.core.common.pointer import join

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "INTAKE",
    "Intake",
    "IntakeStep",
    "Reading",
    "read_admission",
    "read_body",
]

DEFAULT_MAX_RECORD_BYTES = 1_048_576


@dataclass(frozen=True, slots=True)
class Intake:
    """A decoded admission record (``record`` is whatever JSON the bytes held) and its runId
    as far as it could be read (for keys and dead letters)."""

    record: Any
    run_id: str | None


def _run_id_of(record: Any) -> str | None:
    run_id = record.get("runId") if isinstance(record, dict) else None
    return run_id if isinstance(run_id, str) else None


class Reading:
    """The working values of reading one record's bytes (local to one decision): the steps of
    ``INTAKE`` fill ``record`` and, once every step passed, ``run_id``. app.core.admission.validator
    decides the whole record on a subclass of it, so intake allocates nothing of its own."""

    __slots__ = ("key", "value", "max_bytes", "record", "run_id")

    def __init__(self, key: bytes | None, value: bytes | None, max_bytes: int) -> None:
        self.key = key
        self.value = value
        self.max_bytes = max_bytes
        self.record: Any = None
        self.run_id: str | None = None  # the record's runId, once intake admitted the bytes


def _value(reading: Reading) -> Violation | None:
    if reading.value is None:
        return refuse(RECORD_BYTES, "", "the record has no value (a tombstone?)")
    return None


def _size(reading: Reading) -> Violation | None:
    size = len(reading.value or b"")
    if size > reading.max_bytes:
        return refuse(
            RECORD_SIZE,
            "",
            f"the record is {size} bytes; the limit is {reading.max_bytes} "
            "(A2UI_STREAM_MAX_RECORD_BYTES); it was refused before parsing",
            {"size": size, "limit": reading.max_bytes},
        )
    return None


def _utf8(reading: Reading) -> Violation | None:
    try:
        (reading.value or b"").decode("utf-8")
    except UnicodeDecodeError as exc:
        return refuse(
            RECORD_UTF8,
            "",
            f"the record is not UTF-8 (byte {exc.start}: {exc.reason})",
            {"offset": exc.start},
        )
    return None


def _json(reading: Reading) -> Violation | None:
    try:
        reading.record = orjson.loads(reading.value or b"")
    except orjson.JSONDecodeError as exc:
        return _not_parsed(exc)
    return None


def _exact(reading: Reading) -> Violation | None:
    return _ambiguity(reading.value or b"", reading.record)


def _key(reading: Reading) -> Violation | None:
    run_id = _run_id_of(reading.record)
    key = reading.key
    if key is not None and run_id is not None:
        try:
            key_text = key.decode("utf-8")
        except UnicodeDecodeError:
            key_text = None
        if key_text != run_id:
            # The key places the record on the run's partition (docs/topics.md): a record keyed
            # for another run would be ordered against the wrong run's log.
            return refuse(
                RECORD_KEY,
                "/runId",
                "the Kafka key must equal the record's runId (UTF-8): publish with key=runId",
                {"key": key.decode("utf-8", "replace"), "runId": run_id},
            )
    reading.run_id = run_id
    return None


IntakeStep = tuple[str, tuple[Rule, ...], Callable[[Reading], Violation | None]]

# The intake stage of the admission order (app.core.admission.validator ADMISSION): each step's
# name, the rules it refuses by, its check. The size before any parsing; the exact-JSON check
# (duplicate names, inexact integers, nesting orjson cannot encode) before anything reads a
# member; the key last, against the runId the exact parse vouched for.
INTAKE: Final[tuple[IntakeStep, ...]] = (
    ("record-bytes", (RECORD_BYTES,), _value),
    ("record-size", (RECORD_SIZE,), _size),
    ("record-utf8", (RECORD_UTF8,), _utf8),
    ("record-json", (RECORD_JSON, DEPTH, NUMBER_RANGE), _json),
    ("record-exact", (DEPTH, RECORD_DUPLICATE_KEY, NUMBER_RANGE), _exact),
    ("record-key", (RECORD_KEY,), _key),
)


def read_admission(
    key: bytes | None, value: bytes | None, *, max_bytes: int = DEFAULT_MAX_RECORD_BYTES
) -> Intake | Violation:
    """Decode one admission-topic record: the steps of ``INTAKE`` in order (the size limit
    before any parsing). The worker's validator walks the same steps inside the whole order
    (app.core.admission.validator); this is intake alone, for ``a2ui-stream check`` and the fork
    prefetch."""
    reading = Reading(key, value, max_bytes)
    for _name, _rules, check in INTAKE:
        refused = check(reading)
        if refused is not None:
            return refused
    return Intake(reading.record, reading.run_id)


def read_body(
    value: bytes, *, max_bytes: int = DEFAULT_MAX_RECORD_BYTES, at: str = ""
) -> Intake | Violation:
    """Decode one JSON document that becomes (part of) an admission record: an HTTP request
    body (docs/http.md). The checks of ``read_admission`` in the same order, with the same codes
    and rules: the size limit before any parsing, not UTF-8, not JSON (one JSON value, nothing
    after it), a duplicate member name, an integer outside 64 bits, nesting beyond any setting.
    Pointers are prefixed with ``at``: where the document sits in the record it becomes
    (``/envelope`` for the body of ``POST /runs/{runId}/envelopes``). There is no Kafka key, so
    no key check; ``run_id`` is the body's ``runId`` member, if it has a string one."""
    # The size and UTF-8 steps repeat read_admission's on purpose: its messages say "record"
    # and a producer reads them, so it stays as it is; this one speaks of the request body.
    if len(value) > max_bytes:
        return refuse(
            RECORD_SIZE,
            at,
            f"the request body is {len(value)} bytes; the limit is {max_bytes} "
            "(A2UI_STREAM_MAX_RECORD_BYTES); it was refused before parsing",
            {"size": len(value), "limit": max_bytes},
        )
    try:
        value.decode("utf-8")
    except UnicodeDecodeError as exc:
        return refuse(
            RECORD_UTF8,
            at,
            f"the request body is not UTF-8 (byte {exc.start}: {exc.reason})",
            {"offset": exc.start},
        )
    try:
        document = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        failure = _not_parsed(exc)
        if failure.rule == RECORD_JSON.id:
            failure = Violation(
                failure.code,
                failure.rule,
                failure.path,
                f"the request body is not JSON: {exc}",
                failure.details,
            )
        return _located(failure, at)
    ambiguous = _ambiguity(value, document)
    if ambiguous is not None:
        return _located(ambiguous, at)
    return Intake(document, _run_id_of(document))


def _located(violation: Violation, at: str) -> Violation:
    if not at:
        return violation
    return Violation(
        violation.code, violation.rule, at + violation.path, violation.message, violation.details
    )


# --- parse failures and ambiguous JSON -----------------------------------------------------------

_WHITESPACE = b" \t\n\r"
_INT_LOW, _INT_HIGH = -(2**63), 2**64 - 1  # what orjson reads as an int, exactly


def _not_parsed(exc: orjson.JSONDecodeError) -> Violation:
    text = str(exc)
    if "depth limit exceeded" in text:  # orjson's own ceiling, 1024 levels
        return _too_deep("", {"position": exc.pos}, f"at character {exc.pos}")
    if "number is infinity" in text:
        return _number_range("", f"a number at character {exc.pos} is beyond the double range")
    return refuse(
        RECORD_JSON,
        "",
        f"the record is not JSON: {exc}",
        {"position": exc.pos},
    )


def _too_deep(path: str, details: dict[str, Any], where: str = "") -> Violation:
    return refuse(
        DEPTH,
        path,
        f"the record nests deeper than {DEPTH_CEILING} levels {where or 'at ' + (path or '/')}, "
        "more than any host setting admits (A2UI_STREAM_MAX_DEPTH); flatten it",
        {"rule": DEPTH.id, "limit": DEPTH_CEILING, **details},
    )


def _number_range(path: str, what: str) -> Violation:
    return refuse(
        NUMBER_RANGE,
        path,
        f"{what}: JSON numbers must be doubles and integers must lie in [-2^63, 2^64-1], or "
        "readers disagree on the value; send larger numbers as strings",
        {"rule": NUMBER_RANGE.id},
    )


class _Ambiguous(Exception):
    """Raised by the exact check's hooks (internal: never leaves this module)."""

    def __init__(self, key: str | None, pairs: Any = None, literal: str = "") -> None:
        super().__init__(key or literal)
        self.key, self.pairs, self.literal = key, pairs, literal


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Ambiguous(key, pairs)
            seen.add(key)
    return obj


def _int64(literal: str) -> int:
    # 20 characters hold both ends of the range; never convert a longer literal (int() of
    # thousands of digits is slow, and refused by CPython past 4300)
    if len(literal) > 20 or not _INT_LOW <= int(literal) <= _INT_HIGH:
        raise _Ambiguous(None, literal=literal)
    return int(literal)


def _ambiguity(value: bytes, record: Any) -> Violation | None:
    """A duplicate member name, an integer orjson read inexactly, or nesting orjson cannot
    encode; None when the bytes say exactly what ``record`` says."""
    try:
        canonical = orjson.dumps(record)
    except orjson.JSONEncodeError:  # loads takes 1024 levels, dumps only 254
        return _too_deep(first_deeper(record, DEPTH_CEILING) or "", {})
    if canonical == value or canonical.translate(None, _WHITESPACE) == value.translate(
        None, _WHITESPACE
    ):
        return None
    try:
        json.loads(value, object_pairs_hook=_unique, parse_int=_int64)
    except _Ambiguous as found:
        if found.key is not None:
            return _duplicate(record, found.key, found.pairs)
        return _inexact(record, found.literal)
    except (ValueError, RecursionError):  # orjson parsed it; the standard library should too
        return None
    return None


def _duplicate(record: Any, key: str, pairs: Any) -> Violation:
    target = dict(pairs)
    where = _find(record, lambda node: type(node) is dict and key in node and node == target)
    path = join(where or "", key)
    return refuse(
        RECORD_DUPLICATE_KEY,
        path,
        f"member {key[:80]!r} appears more than once in one object at {where or '/'}; JSON "
        "readers disagree on which value counts (RFC 8259 §4, RFC 7493 §2.3): send it once",
        {"rule": RECORD_DUPLICATE_KEY.id, "key": key[:256]},
    )


def _inexact(record: Any, literal: str) -> Violation:
    try:
        approximation: float | None = float(literal)
    except OverflowError:
        approximation = None
    where = _find(record, lambda node: type(node) is float and node == approximation)
    shown = literal if len(literal) <= 40 else literal[:40] + "..."
    return _number_range(where or "", f"the integer {shown} is outside the 64-bit range")


def _find(root: Any, match: Any) -> str | None:
    """The JSON Pointer of the first node (pre-order) that ``match``es. Refusal path only."""
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if match(node):
            return path
        if type(node) is dict:
            children = [(v, join(path, k)) for k, v in node.items()]
        elif type(node) is list:
            children = [(v, f"{path}/{i}") for i, v in enumerate(node)]
        else:
            continue
        stack.extend(reversed(children))
    return None
