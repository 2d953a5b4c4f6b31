"""Operators' commands, the pure part: which dead letters, which log keys, what to re-submit,
and the one-line renderings (docs/operations.md).

Pure: standard library, orjson and app.core only. The shell (app/shell/cli/deadletter.py and
app/shell/cli/ops.py) reads the topics, calls these functions on plain values, and performs the
sends and prints.

Records of a topic come in as ``(key, value)`` pairs in partition order; a value of ``None`` is
a tombstone. A log key's latest record decides whether the key is live (compaction's rule), so
a key re-used after ``runs delete`` (the run starts again at sequence 0) shows its new event.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from app.core.admission.fold import is_v2_body, kinds_of
from app.core.runlog.events import RecordedEvent, parse_event
from app.core.runlog.keys import run_of_log_key, sequence_of_log_key

__all__ = [
    "NotReplayable",
    "Original",
    "Position",
    "Resubmission",
    "dead_letter_line",
    "event_line",
    "live_log_values",
    "original_of",
    "parse_position",
    "replay_corrected",
    "replay_original",
    "run_events",
    "select_dead_letters",
    "source_of",
    "tombstone_keys",
]

Position = tuple[int, int]  # (partition, offset)
KeyValue = tuple[bytes | None, bytes | None]


# -- positions and dead letters ---------------------------------------------------------------


def parse_position(text: str) -> Position | None:
    """``"P:O"`` (two non-negative integers) as ``(P, O)``; None when it is not one."""
    partition, sep, offset = text.strip().partition(":")
    if not sep or not partition.isdigit() or not offset.isdigit():
        return None
    return int(partition), int(offset)


def source_of(letter: Mapping[str, Any]) -> Position:
    """The admission partition and offset a dead letter refused (schemas/dead-letter)."""
    source = letter["source"]
    return int(source["partition"]), int(source["offset"])


def select_dead_letters(
    letters: Iterable[Mapping[str, Any]], *, code: str | None = None, run: str | None = None
) -> list[Mapping[str, Any]]:
    """The dead letters with that code and that runId (None: any), in the order given."""
    return [
        letter
        for letter in letters
        if (code is None or letter.get("code") == code)
        and (run is None or letter.get("runId") == run)
    ]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def dead_letter_line(letter: Mapping[str, Any]) -> str:
    """``P:O  time  code  rule  path  runId  message``; ``-`` for an empty path or no runId."""
    partition, offset = source_of(letter)
    return "  ".join(
        (
            f"{partition}:{offset}",
            str(letter.get("timestamp", "-")),
            str(letter.get("code", "-")),
            str(letter.get("rule", "-")),
            str(letter.get("path") or "-"),
            str(letter.get("runId") or "-"),
            _one_line(str(letter.get("message", ""))),
        )
    )


@dataclass(frozen=True, slots=True)
class Original:
    """A dead letter's kept bytes: as received, or SR-1 redacted, or emptied (schemas/dead-letter
    ``original``)."""

    data: bytes  # the bytes kept in the dead letter
    size: int  # the size of the bytes as received
    sha256: str  # the digest of the bytes as received
    redacted: bool

    @property
    def text(self) -> str:
        """The kept bytes as text (invalid UTF-8 replaced), for display."""
        return self.data.decode("utf-8", "replace")

    @property
    def emptied(self) -> bool:
        """Nothing kept although something was received (a secret survived redaction)."""
        return not self.data and self.size > 0


def original_of(letter: Mapping[str, Any]) -> Original:
    """The ``original`` of a dead letter, decoded; what is missing or malformed reads as empty."""
    original = letter.get("original") or {}
    try:
        data = base64.b64decode(str(original.get("base64", "")), validate=True)
    except (binascii.Error, ValueError):
        data = b""
    return Original(
        data,
        int(original.get("size", len(data))),
        str(original.get("sha256", "")),
        bool(original.get("redacted", False)),
    )


# -- replay -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Resubmission:
    """A new admission record to publish for the dead letter refused at ``source``."""

    source: Position
    run_id: str | None
    key: bytes | None
    value: bytes
    corrected: bool  # True: the operator's corrected record; False: the original bytes


@dataclass(frozen=True, slots=True)
class NotReplayable:
    """A dead letter that cannot be re-submitted as it is, and why."""

    source: Position
    reason: str


def replay_original(
    letter: Mapping[str, Any], letter_key: bytes | None
) -> Resubmission | NotReplayable:
    """Re-submit the original bytes (after a policy change). Refused when they were redacted or
    emptied: the admission topic would then record the ``[REDACTED:...]`` marker, not the value.
    The key is the runId (the default partitioner then puts it on the run's partition); without
    a runId, the dead letter's own key, which is the source record's key."""
    source = source_of(letter)
    original = original_of(letter)
    where = f"{source[0]}:{source[1]}"
    if original.redacted or original.emptied:
        what = "emptied (a secret survived redaction)" if not original.data else "SR-1 redacted"
        return NotReplayable(
            source,
            f"the original bytes of {where} were {what}; re-submitting them would record the "
            f"marker, not the value: replay it with --source {where} --file CORRECTED.json",
        )
    if not original.data:
        return NotReplayable(source, f"the original record of {where} was empty")
    run_id = letter.get("runId")
    key = run_id.encode("utf-8") if isinstance(run_id, str) else letter_key
    return Resubmission(
        source, run_id if isinstance(run_id, str) else None, key, original.data, corrected=False
    )


def replay_corrected(letter: Mapping[str, Any], data: bytes) -> Resubmission | NotReplayable:
    """Re-submit an operator's corrected admission record ``{runId, envelope}`` (as given,
    byte for byte) for one dead letter, keyed by its runId."""
    source = source_of(letter)
    try:
        record = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return NotReplayable(source, f"the corrected record is not JSON: {exc}")
    if not isinstance(record, dict):
        return NotReplayable(source, "the corrected record must be a JSON object {runId, envelope}")
    run_id = record.get("runId")
    if not isinstance(run_id, str) or not run_id:
        return NotReplayable(source, "the corrected record has no runId (a non-empty string)")
    if not isinstance(record.get("envelope"), dict):
        return NotReplayable(source, "the corrected record has no envelope (a JSON object)")
    return Resubmission(source, run_id, run_id.encode("utf-8"), data, corrected=True)


# -- the per-run log --------------------------------------------------------------------------


def _latest(records: Iterable[KeyValue], run: str) -> dict[bytes, bytes | None]:
    latest: dict[bytes, bytes | None] = {}
    for key, value in records:
        if key is not None and run_of_log_key(key) == run:
            latest[key] = value  # later records of a key supersede earlier ones
    return latest


def live_log_values(records: Iterable[KeyValue], run: str) -> list[tuple[bytes, bytes]]:
    """``(key, value)`` of every key of ``run`` whose latest record is not a tombstone, in
    sequence order. Keys of other runs (including ``run#x#n``, a run named ``run#x``) are not
    the run's."""
    live = [(k, v) for k, v in _latest(records, run).items() if v is not None]
    return sorted(live, key=lambda kv: sequence_of_log_key(kv[0]))


def tombstone_keys(records: Iterable[KeyValue], run: str) -> list[bytes]:
    """The keys ``runs delete`` must tombstone: the run's live keys (an already-tombstoned key
    needs none), in sequence order."""
    return [key for key, _ in live_log_values(records, run)]


def run_events(
    records: Iterable[KeyValue], run: str, from_sequence: int = 0
) -> list[RecordedEvent]:
    """The run's recorded events (schemas/recorded-event) from ``from_sequence`` on, in order
    (a value that is not one, never written by the validator, is left out)."""
    return [
        event
        for event in (parse_event(value) for _, value in live_log_values(records, run))
        if event is not None and event["sequence"] >= from_sequence
    ]


def _kinds(messages: Sequence[Any]) -> str:
    return ",".join(kinds_of(messages)) or "-"


def _body_summary(envelope: Any) -> str:
    """Ids and message kinds only: payload values never reach a terminal (issue 4 item 5)."""
    body = envelope.get("payload") if isinstance(envelope, dict) else None
    if isinstance(body, dict) and is_v2_body(body):
        messages = body.get("messages")
        kinds = _kinds(messages) if isinstance(messages, list) else "-"
        return f"surface={body.get('surfaceId', '-')} [{kinds}]"
    if isinstance(body, dict) and "surface" in body:
        return "v1 surface"
    return "-"


def event_line(event: RecordedEvent) -> str:
    """``sequence  eventId  timestamp  type  trust  node=…  causation=…  surface=… [kinds]``."""
    payload = event.get("payload") or {}
    return "  ".join(
        (
            str(event.get("sequence", "-")),
            str(event.get("eventId", "-")),
            str(event.get("timestamp", "-")),
            str(event.get("type", "-")),
            str(event.get("contentTrust") or payload.get("trust") or "-"),
            f"node={event.get('nodeId') or '-'}",
            f"causation={event.get('causationId') or '-'}",
            _body_summary(payload.get("envelope")),
        )
    )
