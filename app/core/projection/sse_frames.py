"""The run event stream as Server-Sent Events, and RFC 0114 v1 delta transport over it.

Two parts, both pure (the shell owns the connection, the log reads and the clock):

SSE encoding (WHATWG HTML §9.2 "Server-sent events"; openwop-a2ui.md §9): ``sse_frame`` writes
``id: <sequence>``, ``event: <type>``, ``data: <JSON>`` and the blank line that dispatches it;
``keep_alive`` is a comment (§9: at least every 30 s); ``retry_hint`` sets the reconnection
delay. Field values never contain CR or LF, so no recorded value can inject an SSE field.

Delta transport for ``?a2uiDelta=1`` (openwop-a2ui.md §10, following the conformance suite on
both open conflicts, §18 item 5): ``step`` decides, per connection, whether a recorded v1
``ui.a2ui-surface`` event goes out FULL (the recorded event, untouched) or as the RFC 0114
frame ``{surfaceRef, catalogVersion, patch}``, where
- ``patch`` is RFC 6902 rooted at the v1 PAYLOAD ``{catalogVersion, surface, reasoning?}``
  (``/surface/components/1/text``), over the payload last delivered on this connection, with
  only add/remove/replace ops and at least one op (the frame schema's ``minItems: 1``);
- ``surfaceRef`` is the eventId of the recorded event the frame stands for (the NEW surface:
  the suite's live leg filters on the ref the emit of the update returned).
``next_output`` wraps that into the bytes of one SSE frame (the delta's event name,
``ui.a2ui-surface.delta``, is openwop-app's; the spec names none, §18 item 6), and
``delta_event_doc`` renders a delta for the ``Accept: application/json`` read.

An event goes FULL, for the first reason that applies (``FULL_REASONS``, from the one
vocabulary of both transports, ``app.core.projection.frame_reasons``):
  first       nothing v1 was delivered on this connection yet (RFC 0114: start from a full)
  catalog     its catalogVersion differs (RFC 0114: a catalog change starts from a fresh full)
  trust       its trust differs from the last delivered one's. A delta carries no trust
              marker, so the consumer keeps the trust of the last full: a change must go full,
              or an ``untrusted`` marker could be dropped before render (§10, RFC 0114)
  binding     its nodeId (the gate the surface is bound to) or its partial flag differs: both
              live outside the payload, and v1 rule 3 (nothing actionable before the envelope
              finalizes) must survive the transport
  empty       the payloads are equal (a frame needs a non-empty patch)
  unverified  no patch reproduces the new payload exactly (``verified_diff`` said none, the
              patch does not apply, applying it is not EXACTLY the new payload, or it uses an
              op outside add/remove/replace)
  invalid     the post-patch payload fails the v1 catalog (``PayloadRules.check_v1``; RFC
              0114: the consumer re-validates and would fall back), or the event has no
              usable eventId for ``surfaceRef``
Everything else on the stream (v2 surfaces, run lifecycle) passes through byte-identical.

Sticky taint on every read (docs/admission.md decisions 4-5; openwop-a2ui.md §7, RFC 0209
§C.12, RFC 0143): the log records each envelope's OWN trust, but a surface that has seen one
untrusted envelope is untrusted for the life of the run. ``present`` turns a recorded event
into the event a reader is given: a surface event (the run's one v1 surface, or a v2
``surfaceId``, the identities of ``app.core.projection.surfaces``) whose surface is tainted by the
log prefix (``Taint``, the surfaces tainted so far) says ``contentTrust: "untrusted"`` and
``payload.trust: "untrusted"``; only those two fields are rewritten, the recorded envelope
(``payload.envelope``) travels as recorded. Every read (SSE full events, delta frames and
their JSON documents, the event-log read, poll) goes through it, with the taint of the WHOLE
log prefix, so a reconnect with ``Last-Event-ID`` cannot launder either. A delta frame carries
no trust: it keeps the trust of the consumer's last full event, which ``present`` made sticky,
so after a taint the chain goes on as deltas (``step`` sees no trust change) and never as a
full event that says ``trusted``.

Caching (the shell memoizes across connections): the outputs depend only on the cursor's
content, the event, its bytes and the rules. The shell feeds ``step`` the events as
``present`` shows them, which depend only on the recorded event and the trust shown; a cursor
is only ever built by ``step``, from the last v1 event alone, so its content is a function of
``(cursor.event_id, cursor.trust)``, and ``(cursor.event_id, cursor.trust, event["eventId"],
trust shown)`` is a complete memo key for ``step`` and ``next_output`` (the empty cursor has
``event_id`` None; eventIds embed a run hash, so they do not collide across runs). The
returned frame shares subtrees with the event: treat both as read-only.

SR-1 (§14) needs no pass here: patch values are subtrees of the recorded payload, which was
redacted before it was recorded (app.core.admission.decision).

May import: the standard library, orjson and app.core.* (pure).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Literal, NamedTuple, TypeAlias

import orjson

from app.core.admission.fold import is_v2_body
from app.core.admission.payload_rules import PayloadRules
from app.core.projection.frame_reasons import FULL_REASONS
from app.core.projection.patch import verified_diff
from app.core.projection.patch_apply import PatchError, apply_patch
from app.core.projection.patch_equal import json_equal
from app.core.projection.surfaces import V1_SURFACE_ID
from app.core.runlog.events import RecordedEvent

__all__ = [
    "SURFACE_EVENT",
    "DELTA_EVENT",
    "FULL_REASONS",
    "NO_TAINT",
    "DeltaCursor",
    "Shown",
    "DeltaStep",
    "StreamOutput",
    "Taint",
    "sse_frame",
    "keep_alive",
    "retry_hint",
    "surface_of",
    "present",
    "step",
    "next_output",
    "delta_event_doc",
]

SURFACE_EVENT: Final = "ui.a2ui-surface"
DELTA_EVENT: Final = "ui.a2ui-surface.delta"  # openwop-app's name; unspecified (§18 item 6)

_V1_VERSIONS: Final = (0, 1)  # the per-kind versions whose payload is the v1 branch (§1)
_PATCH_OPS: Final = frozenset({"add", "remove", "replace"})  # what our diff emits (§10)

# --- SSE encoding -------------------------------------------------------------------------------

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")  # the SSE end-of-line forms


def _field_value(value: str) -> bytes:
    """A single-line field value: CR and LF would end the line and start a forged field, so
    each becomes U+FFFD (the name is damaged visibly rather than split)."""
    if "\r" in value or "\n" in value:
        value = value.replace("\r", "\ufffd").replace("\n", "\ufffd")
    return value.encode("utf-8", "replace")  # a lone surrogate is not UTF-8: "?"


def sse_frame(event: str, data: bytes, id: int | None = None) -> bytes:
    """One SSE message: ``id: N`` (when given), ``event: X``, one ``data:`` line per line of
    ``data`` (a consumer joins them with LF, so JSON survives: orjson writes no raw newline),
    and the blank line that dispatches it."""
    head = b"" if id is None else b"id: %d\n" % id
    head += b"event: " + _field_value(event) + b"\n"
    if b"\n" not in data and b"\r" not in data:
        return head + b"data: " + data + b"\n\n"
    lines = b"".join(b"data: " + line + b"\n" for line in _LINE_BREAK.split(data))
    return head + lines + b"\n"


def keep_alive() -> bytes:
    """An SSE comment: keeps proxies from closing an idle stream (§9: at least every 30 s)."""
    return b": keep-alive\n\n"


def retry_hint(ms: int) -> bytes:
    """The reconnection delay a consumer should use, in milliseconds (ASCII digits only)."""
    if ms < 0:
        raise ValueError(f"a retry delay is a non-negative number of milliseconds, not {ms}")
    return b"retry: %d\n\n" % ms


# --- sticky taint ---------------------------------------------------------------------------------

Taint: TypeAlias = frozenset[str]  # the surfaces (V1_SURFACE_ID or a v2 surfaceId) tainted so far
NO_TAINT: Final[Taint] = frozenset()


class Shown(NamedTuple):
    """What ``present`` gives a reader for one recorded event: the taint after it, the event
    and its bytes as the reader sees them (the recorded ones when nothing was rewritten), and
    the trust it presents (None for an event that is not a surface event)."""

    taint: Taint
    event: RecordedEvent
    data: bytes
    trust: str | None


def surface_of(event: RecordedEvent) -> str | None:
    """The surface a recorded event touches, with ``app.core.projection.surfaces``' identities: a v2
    body is its ``surfaceId``, any other surface body is the run's one v1 surface (docs/admission.md
    decision 4). None for an event that is not a surface event."""
    if event.get("type") != SURFACE_EVENT:
        return None
    body = _get(_get(event.get("payload"), "envelope"), "payload")
    if not isinstance(body, dict):
        return None
    if is_v2_body(body):
        surface_id = body.get("surfaceId", "")
        return surface_id if isinstance(surface_id, str) else ""
    return V1_SURFACE_ID


def _says_untrusted(event: RecordedEvent, v1: bool) -> bool:
    """Whether the fields a reader takes the trust from already say ``untrusted``: the root
    ``contentTrust`` (v1 RunEventDoc; the closed v2 one may lack it) and ``payload.trust``."""
    if (v1 or "contentTrust" in event) and event.get("contentTrust") != "untrusted":
        return False
    return bool(_get(event.get("payload"), "trust") == "untrusted")


def _relabelled(event: RecordedEvent, v1: bool) -> RecordedEvent:
    """``event`` saying ``untrusted`` at the root and in ``payload.trust``; every other field
    (the envelope included) is the recorded one, in the recorded key order."""
    shown = event.copy()
    if v1 or "contentTrust" in event:
        shown["contentTrust"] = "untrusted"
    payload = event.get("payload")
    if isinstance(payload, Mapping):
        shown["payload"] = {**payload, "trust": "untrusted"}
    return shown


def present(taint: Taint, event: RecordedEvent, event_bytes: bytes) -> Shown:
    """The recorded ``event`` as a reader must see it after a log prefix that tainted
    ``taint`` (module docstring, "Sticky taint"): a surface event is untrusted when its
    surface is tainted or when it says so itself (the meet of what it states, §7); then it
    says ``untrusted`` at the root and in ``payload.trust``, re-encoded only when the recorded
    bytes did not already say so. Pure; ``event`` is not modified."""
    surface = surface_of(event)
    if surface is None:
        return Shown(taint, event, event_bytes, None)
    envelope = _get(event.get("payload"), "envelope")
    if surface not in taint and _trust(event, envelope) == "trusted":
        return Shown(taint, event, event_bytes, "trusted")
    if surface not in taint:
        taint = taint | {surface}
    v1 = surface == V1_SURFACE_ID
    if _says_untrusted(event, v1):
        return Shown(taint, event, event_bytes, "untrusted")
    shown = _relabelled(event, v1)
    return Shown(taint, shown, orjson.dumps(shown), "untrusted")


# --- RFC 0114 delta transport --------------------------------------------------------------------


class DeltaCursor(NamedTuple):
    """One connection's state: the last v1 event delivered (in full, or reconstructed by the
    consumer from a delta) and what the consumer holds for it. ``DeltaCursor()`` is empty."""

    event_id: str | None = None
    payload: Any = None  # the v1 payload {catalogVersion, surface, reasoning?}
    catalog_version: Any = None
    trust: str | None = None
    node_id: Any = None
    partial: bool = False


class DeltaStep(NamedTuple):
    """What ``step`` decided: the cursor after the event, the RFC 0114 frame when the event
    goes as a delta (else None), and ``"delta"``, ``"other"`` or one of ``FULL_REASONS``."""

    cursor: DeltaCursor
    frame: dict[str, Any] | None
    reason: str


class StreamOutput(NamedTuple):
    """One SSE message to write: ``sse_frame(event_name, data, sequence)``."""

    event_name: str
    data: bytes
    sequence: int
    kind: Literal["full", "delta", "other"]


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, Mapping) else None


def _v1_envelope(event: RecordedEvent) -> Any:
    """The envelope of a v1 surface event (per-kind version 0 or 1), else None."""
    if event.get("type") != SURFACE_EVENT:
        return None
    recorded = event.get("payload")
    version = _get(recorded, "version")
    # ``type`` first: True == 1 in Python, and a boolean is not a version
    if type(version) is not int or version not in _V1_VERSIONS:
        return None
    envelope = _get(recorded, "envelope")
    return envelope if isinstance(envelope, dict) else None


def _trust(event: RecordedEvent, envelope: Any) -> str:
    """The meet of every trust the event states (§7: trust only ever goes down)."""
    stated = (
        event.get("contentTrust"),
        _get(event.get("payload"), "trust"),
        _get(_get(envelope, "meta"), "contentTrust"),
    )
    return "untrusted" if "untrusted" in stated else "trusted"


def _cursor_for(event: RecordedEvent, envelope: Any) -> DeltaCursor:
    payload = _get(envelope, "payload")
    return DeltaCursor(
        event_id=event.get("eventId"),
        payload=payload,
        catalog_version=_get(payload, "catalogVersion"),
        trust=_trust(event, envelope),
        node_id=event.get("nodeId"),
        partial=_get(_get(envelope, "partial"), "isPartial") is True,  # E1: PartialInfo
    )


def _context_reason(old: DeltaCursor, new: DeltaCursor) -> str | None:
    """Why the event cannot be a delta whatever the payloads are (module docstring)."""
    if old.event_id is None:
        return "first"
    if old.catalog_version != new.catalog_version:
        return "catalog"
    if old.trust != new.trust:
        return "trust"
    if old.node_id != new.node_id or old.partial != new.partial:
        return "binding"
    return None


def _patch_or_reason(old: Any, new: Any, rules: PayloadRules) -> list[dict[str, Any]] | str:
    """The verified patch ``old`` -> ``new``, or why there is none. The patch is applied here
    once more and compared, independently of ``verified_diff``: a frame is only ever sent
    when it reproduces the new payload exactly and the result passes the catalog (§10)."""
    patch = verified_diff(old, new)
    if patch is None:
        return "unverified"
    if not patch:
        return "empty"
    if any(op.get("op") not in _PATCH_OPS for op in patch):
        return "unverified"
    try:
        result = apply_patch(old, patch)
    except (PatchError, RecursionError):
        return "unverified"
    if not json_equal(result, new):
        return "unverified"
    if rules.check_v1(result) is not None:
        return "invalid"
    return patch


def step(cursor: DeltaCursor, event: RecordedEvent, rules: PayloadRules) -> DeltaStep:
    """Decide how ``event`` goes to a ``?a2uiDelta=1`` connection holding ``cursor``."""
    envelope = _v1_envelope(event)
    if envelope is None:
        return DeltaStep(cursor, None, "other")
    after = _cursor_for(event, envelope)  # the consumer holds the new payload either way
    reason = _context_reason(cursor, after)
    if reason is not None:
        return DeltaStep(after, None, reason)
    surface_ref = after.event_id
    if not isinstance(surface_ref, str) or not surface_ref:
        return DeltaStep(after, None, "invalid")  # the frame schema needs a surfaceRef
    found = _patch_or_reason(cursor.payload, after.payload, rules)
    if isinstance(found, str):
        return DeltaStep(after, None, found)
    frame = {"surfaceRef": surface_ref, "catalogVersion": after.catalog_version, "patch": found}
    return DeltaStep(after, frame, "delta")


def next_output(
    cursor: DeltaCursor, event: RecordedEvent, event_bytes: bytes, rules: PayloadRules
) -> tuple[DeltaCursor, StreamOutput]:
    """The cursor after ``event`` and the SSE message for it: a v1 surface full (the recorded
    bytes, untouched) or delta (the RFC 0114 frame), or any other event as recorded."""
    after, frame, reason = step(cursor, event, rules)
    sequence: int = event["sequence"]
    if frame is not None:
        return after, StreamOutput(DELTA_EVENT, orjson.dumps(frame), sequence, "delta")
    kind: Literal["full", "other"] = "other" if reason == "other" else "full"
    return after, StreamOutput(str(event["type"]), event_bytes, sequence, kind)


def delta_event_doc(event: RecordedEvent, frame: Mapping[str, Any]) -> dict[str, Any]:
    """The ``Accept: application/json`` rendering of a delta: the recorded event's RunEventDoc
    fields with type ``ui.a2ui-surface.delta`` and the frame as ``payload`` (the suite collects
    every object that validates as a frame, §16c)."""
    doc: dict[str, Any] = {
        "eventId": event["eventId"],
        "runId": event["runId"],
        "sequence": event["sequence"],
        "type": DELTA_EVENT,
        "schemaVersion": event["schemaVersion"],
        "timestamp": event["timestamp"],
    }
    for optional in ("nodeId", "causationId"):
        if optional in event:
            doc[optional] = event[optional]
    doc["contentTrust"] = _trust(event, _get(event.get("payload"), "envelope"))
    doc["payload"] = dict(frame)
    return doc
