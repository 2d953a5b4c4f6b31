"""Host commands: admission records that are not AI envelopes but operations on a run's log,
decided by the validator like envelopes so that the run's single writer assigns their sequences.

Role: pure decisions. A command record is ``{runId, command: {...}}`` (schemas/host-command);
``decide_command`` turns it, the run's state and what the shell fetched from the log into the
events to append, or a ``Violation`` (a dead letter, as for any refused record).

Commands:

- ``run.fork`` (openwop-a2ui.md §9 Fork): the record's ``runId`` is the NEW run. Its log gets the
  source run's recorded events ``[0, fromSeq)`` copied as recorded (payload untouched, byte for
  byte; only ``runId`` and ``eventId`` are the child's), then one ``run.forked`` host event at
  sequence ``fromSeq`` that names the source. The copy and the marker are appended in one
  transaction with the command's offset, so a crash never leaves a half-copied fork visible.
  The source events are NOT taken from the record (a producer could forge them): the record
  only says where in the log they are (``source.partition``, ``firstOffset``, ``lastOffset``),
  and the shell reads them from the log topic itself; here they are checked to be exactly the
  source run's sequences ``0 .. fromSeq-1``.

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from app.core.refusal import Violation
from app.core.run_state import RunState

__all__ = [
    "HOST_EVENT_SCHEMA_VERSION",
    "FORK_MODES",
    "ForkSource",
    "fork_source_of",
    "host_event",
    "decide_command",
]

HOST_EVENT_SCHEMA_VERSION = 1
FORK_MODES = ("replay", "branch")


class ForkSource(NamedTuple):
    """Where the shell must read a fork's source events: the log partition and the offsets of
    the source's first and last copied events (inclusive)."""

    source_run_id: str
    from_seq: int
    partition: int
    first_offset: int
    last_offset: int


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def fork_source_of(record: Any) -> ForkSource | None:
    """The log range a ``run.fork`` command needs read, or None when the record is not a
    well-formed fork command (``decide_command`` then refuses it with the reason)."""
    command = record.get("command") if isinstance(record, dict) else None
    if not isinstance(command, dict) or command.get("type") != "run.fork":
        return None
    source = command.get("source")
    run = command.get("sourceRunId")
    from_seq = _int(command.get("fromSeq"))
    if not isinstance(source, dict) or not isinstance(run, str) or from_seq is None:
        return None
    partition = _int(source.get("partition"))
    first = _int(source.get("firstOffset"))
    last = _int(source.get("lastOffset"))
    if partition is None or first is None or last is None or last < first:
        return None
    return ForkSource(run, from_seq, partition, first, last)


def host_event(
    run_id: str,
    sequence: int,
    event_type: str,
    payload: Mapping[str, Any],
    *,
    event_id: str,
    now: str,
    node_id: str | None = None,
    causation_id: str | None = None,
) -> dict[str, Any]:
    """A RunEventDoc for a host event (schemas/recorded-event, host branch)."""
    event: dict[str, Any] = {
        "eventId": event_id,
        "runId": run_id,
        "sequence": sequence,
        "type": event_type,
        "schemaVersion": HOST_EVENT_SCHEMA_VERSION,
        "timestamp": now,
    }
    if node_id is not None:
        event["nodeId"] = node_id
    if causation_id is not None:
        event["causationId"] = causation_id
    event["payload"] = dict(payload)
    return event


def _invalid(path: str, message: str) -> Violation:
    return Violation("validation_error", "host-command", path, message)


def _copy(event: Mapping[str, Any], run_id: str, event_id: str) -> dict[str, Any]:
    # Copied as recorded (§8 "Fork children must carry it the same way"): same keys in the same
    # order, the payload object untouched; only the run identity is the child's.
    copied = dict(event)
    copied["eventId"] = event_id
    copied["runId"] = run_id
    return copied


def _fork(
    record: Mapping[str, Any],
    command: Mapping[str, Any],
    state: RunState,
    fetched: Callable[[ForkSource], Sequence[Mapping[str, Any]] | None],
    now: str,
    event_id_for: Callable[[str, int], str],
) -> list[dict[str, Any]] | Violation:
    mode = command.get("mode")
    if mode not in FORK_MODES:
        return _invalid("/command/mode", f"mode must be one of {list(FORK_MODES)}, not {mode!r}")
    source = fork_source_of(record)
    if source is None:
        return _invalid(
            "/command",
            "a run.fork command needs sourceRunId, fromSeq >= 0 and source {partition, "
            "firstOffset, lastOffset} (the log offsets of the copied events)",
        )
    child: str = record["runId"]
    if child == source.source_run_id:
        return _invalid("/runId", "a fork needs a new runId, not the source's")
    if state.next_sequence != 0:
        return Violation(
            "run_state_conflict",
            "fork-target-fresh",
            "/runId",
            f"run {child!r} already has {state.next_sequence} events: a fork creates a new run",
            {"runStatus": "exists"},
        )
    events = fetched(source) if source.from_seq > 0 else ()
    if events is None or len(events) != source.from_seq:
        return Violation(
            "fork_point_invalid",
            "fork-source",
            "/command/fromSeq",
            f"the log does not hold sequences 0..{source.from_seq - 1} of run "
            f"{source.source_run_id!r} at the offsets given",
            {"fromSeq": source.from_seq},
        )
    out: list[dict[str, Any]] = []
    for expected, event in enumerate(events):
        if event.get("runId") != source.source_run_id or event.get("sequence") != expected:
            return Violation(
                "fork_point_invalid",
                "fork-source",
                "/command/source",
                f"the source log is not gap-free at sequence {expected}",
                {"fromSeq": source.from_seq},
            )
        out.append(_copy(event, child, event_id_for(child, expected)))
    marker = {"sourceRunId": source.source_run_id, "fromSeq": source.from_seq, "mode": mode}
    out.append(
        host_event(
            child,
            source.from_seq,
            "run.forked",
            marker,
            event_id=event_id_for(child, source.from_seq),
            now=now,
        )
    )
    return out


def decide_command(
    record: Mapping[str, Any],
    state: RunState,
    fetched: Callable[[ForkSource], Sequence[Mapping[str, Any]] | None],
    *,
    now: str,
    event_id_for: Callable[[str, int], str],
) -> list[dict[str, Any]] | Violation:
    """The events a command record appends to its run (in order, from ``state.next_sequence``),
    or why it is refused. ``fetched(source)`` returns the log events the shell read for a fork
    (None when it could not read them)."""
    command = record.get("command")
    if not isinstance(command, dict):
        return _invalid("/command", "a command record is {runId, command: {type, ...}}")
    if command.get("type") == "run.fork":
        return _fork(record, command, state, fetched, now, event_id_for)
    return _invalid("/command/type", f"unknown host command {command.get('type')!r}")
