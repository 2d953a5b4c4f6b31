"""One host command being decided: what its handler is given and the host events it builds.

Role: pure values shared by the handlers of app.core.admission.host_commands (one module per
group of commands: host_commands_run, host_commands_action, host_commands_fork). ``CommandCall``
carries the record, the run's state, what the shell fetched, the clock reading and the event ids
in, and collects the events to append; ``host_event`` builds one host RunEventDoc. ``ForkSource``
and ``fork_source_of`` say where in the log the shell must read a ``run.fork`` command's source
events before the decision (the validator asks for them first; app.core.admission.validator_batch).
The small checks every group shares (an invalid command, an ended run, ``expectedSequence``) are
here too, so each rule reads the same everywhere.

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, cast

from app.core.admission.redaction import Secrets
from app.core.admission.refusal import Violation
from app.core.admission.rules import HOST_COMMAND, RUN_LIVE, refuse
from app.core.runlog.events import RecordedEvent
from app.core.runlog.run_lifecycle import TERMINAL_STATUSES
from app.core.runlog.run_state import RunState

__all__ = [
    "HOST_EVENT_SCHEMA_VERSION",
    "CommandCall",
    "Fetched",
    "ForkSource",
    "ended_refusal",
    "expected_sequence",
    "fork_source_of",
    "host_event",
    "invalid_command",
]

HOST_EVENT_SCHEMA_VERSION = 1


class ForkSource(NamedTuple):
    """Where the shell must read a fork's source events: the log partition and the offsets of
    the source's first and last copied events (inclusive)."""

    source_run_id: str
    from_seq: int
    partition: int
    first_offset: int
    last_offset: int


# What the shell read for a fork: the log events at a ``ForkSource`` (None: it could not).
Fetched = Callable[[ForkSource], Sequence[RecordedEvent] | None]


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
) -> RecordedEvent:
    """A RunEventDoc for a host event (schemas/recorded-event, host branch)."""
    event: dict[str, Any] = {  # typed once whole: the payload is its last key
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
    return cast(RecordedEvent, event)


class CommandCall:
    """One command being decided: its record, the run's state, what the shell fetched, and the
    host events it appends (``emit`` builds them from the run's next sequence)."""

    __slots__ = (
        "record",
        "command",
        "state",
        "fetched",
        "now",
        "event_id_for",
        "secrets",
        "events",
    )

    def __init__(
        self,
        record: Mapping[str, Any],
        command: Mapping[str, Any],
        state: RunState,
        fetched: Fetched,
        now: str,
        event_id_for: Callable[[str, int], str],
        secrets: Secrets,
    ) -> None:
        self.record, self.command, self.state, self.fetched = record, command, state, fetched
        self.now, self.event_id_for, self.secrets = now, event_id_for, secrets
        self.events: list[RecordedEvent] = []

    def emit(self, event_type: str, payload: Mapping[str, Any], node_id: str | None = None) -> None:
        """Append a host event of the run at its next sequence."""
        run_id = self.state.run_id
        sequence = self.state.next_sequence + len(self.events)
        self.events.append(
            host_event(
                run_id,
                sequence,
                event_type,
                payload,
                event_id=self.event_id_for(run_id, sequence),
                now=self.now,
                node_id=node_id,
            )
        )


def invalid_command(path: str, message: str) -> Violation:
    """The command record is not one the host command schema admits (``host-command``)."""
    return refuse(HOST_COMMAND, path, message)


def ended_refusal(state: RunState) -> Violation | None:
    """``run-live``: the refusal of a command on a run that has ended, or None while it runs."""
    if state.lifecycle.status in TERMINAL_STATUSES:
        return refuse(
            RUN_LIVE,
            "/runId",
            f"run {state.run_id!r} is {state.lifecycle.status}",
            {"runStatus": state.lifecycle.status},
        )
    return None


def expected_sequence(command: Mapping[str, Any]) -> int:
    """The run's last sequence the requester saw (``expectedSequence``), -1 when not given."""
    value = command.get("expectedSequence")
    return value if isinstance(value, int) and not isinstance(value, bool) else -1
