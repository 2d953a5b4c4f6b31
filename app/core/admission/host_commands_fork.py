"""The host command ``run.fork`` (openwop-a2ui.md §9 Fork): a new run whose log starts as a copy
of the source run's first events, then one ``run.forked`` marker that names the source.

Role: a pure handler for app.core.admission.host_commands ``COMMANDS``, in named steps: the
command's own shape and a fresh target run (``_fork_point``), the copy of the events the shell
read from the log, checked to be exactly the source's sequences ``0 .. fromSeq-1``
(``_copy_source``), the lineage the child inherits (``_lineage``), and the marker. The record
only says where the source events are (``ForkSource``, app.core.admission.host_commands_call);
they are never taken from the record, which a producer could forge.

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core.admission.host_commands_call import (
    CommandCall,
    ForkSource,
    fork_source_of,
    host_event,
    invalid_command,
)
from app.core.admission.identifiers import run_id_error
from app.core.admission.refusal import Violation
from app.core.admission.rules import FORK_SOURCE, FORK_TARGET_FRESH, refuse
from app.core.runlog.events import RecordedEvent
from app.core.runlog.run_lifecycle import MAX_LINEAGE

__all__ = ["FORK_MODES", "fork_run"]

FORK_MODES = ("replay", "branch")


def fork_run(call: CommandCall) -> Violation | None:
    """``run.fork``: the record's ``runId`` is the NEW run. Appends the source's recorded events
    ``[0, fromSeq)`` as recorded (only ``runId`` and ``eventId`` are the child's), then
    ``run.forked {sourceRunId, fromSeq, mode, lineage}`` at sequence ``fromSeq``."""
    point = _fork_point(call)
    if isinstance(point, Violation):
        return point
    mode, source = point
    child: str = call.record["runId"]
    copied = _copy_source(call, source, child)
    if copied is not None:
        return copied
    lineage = _lineage(call.command, source)
    if isinstance(lineage, Violation):
        return lineage
    marker = {
        "sourceRunId": source.source_run_id,
        "fromSeq": source.from_seq,
        "mode": mode,
        # the fork inherits the SR-1 secrets of every run it descends from (issue 14 item 6b)
        "lineage": lineage,
    }
    call.events.append(
        host_event(
            child,
            source.from_seq,
            "run.forked",
            marker,
            event_id=call.event_id_for(child, source.from_seq),
            now=call.now,
        )
    )
    return None


def _fork_point(call: CommandCall) -> tuple[Any, ForkSource] | Violation:
    """The fork's mode and source range, once the command is well formed and its target run
    is new (``host-command``, ``fork-target-fresh``)."""
    record, command, state = call.record, call.command, call.state
    mode = command.get("mode")
    if mode not in FORK_MODES:
        return invalid_command(
            "/command/mode", f"mode must be one of {list(FORK_MODES)}, not {mode!r}"
        )
    source = fork_source_of(record)
    if source is None:
        return invalid_command(
            "/command",
            "a run.fork command needs sourceRunId, fromSeq >= 0 and source {partition, "
            "firstOffset, lastOffset} (the log offsets of the copied events)",
        )
    child: str = record["runId"]
    if child == source.source_run_id:
        return invalid_command("/runId", "a fork needs a new runId, not the source's")
    if state.next_sequence != 0:
        return refuse(
            FORK_TARGET_FRESH,
            "/runId",
            f"run {child!r} already has {state.next_sequence} events: a fork creates a new run",
            {"runStatus": "exists"},
        )
    return mode, source


def _copy_source(call: CommandCall, source: ForkSource, child: str) -> Violation | None:
    """Append the child's copies of the events the shell read, or refuse (``fork-source``) when
    they are not exactly the source run's sequences ``0 .. fromSeq-1``, gap-free."""
    events = call.fetched(source) if source.from_seq > 0 else ()
    if events is None or len(events) != source.from_seq:
        return refuse(
            FORK_SOURCE,
            "/command/fromSeq",
            f"the log does not hold sequences 0..{source.from_seq - 1} of run "
            f"{source.source_run_id!r} at the offsets given",
            {"fromSeq": source.from_seq},
        )
    out = call.events  # the copies, then the marker (``call.emit`` is not used: a copy is
    for expected, event in enumerate(events):  # recorded as it was, not as a host event)
        if event.get("runId") != source.source_run_id or event.get("sequence") != expected:
            return refuse(
                FORK_SOURCE,
                "/command/source",
                f"the source log is not gap-free at sequence {expected}",
                {"fromSeq": source.from_seq},
            )
        out.append(_copy(event, child, call.event_id_for(child, expected)))
    return None


def _copy(event: RecordedEvent, run_id: str, event_id: str) -> RecordedEvent:
    # Copied as recorded (§8 "Fork children must carry it the same way"): same keys in the same
    # order, the payload object untouched; only the run identity is the child's.
    copied = event.copy()
    copied["eventId"] = event_id
    copied["runId"] = run_id
    return copied


def _lineage(command: Mapping[str, Any], source: ForkSource) -> list[str] | Violation:
    """The child's lineage: the source, then the source's own ancestors (``sourceLineage``,
    at most ``MAX_LINEAGE - 1`` well-formed runIds)."""
    ancestors = command.get("sourceLineage", [])
    if not (
        isinstance(ancestors, list)
        and len(ancestors) < MAX_LINEAGE
        and all(isinstance(r, str) and run_id_error(r) is None for r in ancestors)
    ):
        return invalid_command(
            "/command/sourceLineage",
            f"sourceLineage is the source run's own ancestors: at most {MAX_LINEAGE - 1} runIds",
        )
    return [source.source_run_id, *ancestors]
