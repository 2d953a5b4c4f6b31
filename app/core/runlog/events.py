"""The run log's records as typed values: a recorded event (``schemas/recorded-event.schema.json``),
parsed once, at the edge where its bytes are read.

Pure: the standard library and orjson.

Every record of ``a2ui.runs.log`` is one ``RecordedEvent``: an envelope event (an admitted
envelope, its payload an ``EnvelopePayload``) or a host event (run lifecycle, interrupts,
accepted actions, the fork marker; its payload by type, see the schema). The validator writes
them (``admission/decision.py`` and ``admission/host_commands_call.host_event``) and every
reader turns the bytes back into one with ``parse_event``: the validator's restore and fork
reads, the projector, the read side and the operator commands. What ``parse_event`` checks is
what the readers rely on without looking again: an object with a string ``runId`` and
``type``, an integer ``sequence`` of at least 0 and an object ``payload``. Anything else is not
a recorded event (None): each reader says what it does with one (the log is written only by the
validator, so none is expected; a reader never guesses).

The types are ``TypedDict``s, so an event stays the dict orjson made (no copy, no wrapper on
the hot paths, the same value the schema describes) while mypy checks every field a module
reads or builds.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict, cast

import orjson

__all__ = [
    "EnvelopePayload",
    "RecordedEvent",
    "parse_event",
    "unreadable_event",
]


class EnvelopePayload(TypedDict):
    """The payload of an envelope event: the envelope as received (after SR-1 redaction), the
    per-kind version it was validated as, its trust, and ``driftFrom`` when warn mode
    validated it at the floor instead."""

    envelope: dict[str, Any]
    version: int
    trust: str
    driftFrom: NotRequired[int]


class RecordedEvent(TypedDict):
    """One record of the run log, RunEventDoc-shaped (openwop-a2ui.md §8). ``causationId``
    and ``contentTrust`` are on every envelope event; host events carry ``causationId`` and
    ``nodeId`` where they have one."""

    eventId: str
    runId: str
    sequence: int
    type: str
    schemaVersion: int
    timestamp: str
    payload: dict[str, Any]
    causationId: NotRequired[str]
    contentTrust: NotRequired[str]
    nodeId: NotRequired[str]
    engineVersion: NotRequired[int]


def parse_event(value: bytes | None) -> RecordedEvent | None:
    """A log record's value as a recorded event, or None when it is not one (not JSON, not an
    object, or without a string ``runId`` and ``type``, an integer ``sequence`` >= 0 and an
    object ``payload``)."""
    if value is None:
        return None
    try:
        event = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(event, dict):
        return None
    sequence = event.get("sequence")
    if (
        type(sequence) is not int
        or sequence < 0
        or not isinstance(event.get("runId"), str)
        or not isinstance(event.get("type"), str)
        or not isinstance(event.get("payload"), dict)
    ):
        return None
    return cast(RecordedEvent, event)


def unreadable_event(sequence: int, event_type: str) -> RecordedEvent:
    """What a reader is shown for a log record that ``parse_event`` refuses, where it has
    already been filed by its key and its ``a2ui-type`` header (the read side parses a record
    nobody reads only when it is read): that sequence and type, no ids, an empty payload.
    The validator never writes such a record."""
    return {
        "eventId": "",
        "runId": "",
        "sequence": sequence,
        "type": event_type,
        "schemaVersion": 1,
        "timestamp": "",
        "payload": {},
    }
