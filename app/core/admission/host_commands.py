"""Host commands: admission records that are not AI envelopes but operations on a run's log,
decided by the validator like envelopes so that the run's single writer assigns their sequences.

Role: pure decisions. A command record is ``{runId, command: {...}}`` (schemas/host-command);
``decide_command`` turns it, the run's state and what the shell fetched from the log into the
events to append, or a ``Violation`` (a dead letter, as for any refused record). It dispatches
by the command's type through the table ``COMMANDS`` (each type's handler and the rules it
refuses by, in order); app.core.admission.validator ``ADMISSION`` places that dispatch in the order
of the whole decision (after the gateway seal and the identifier check).

Commands:

- ``run.create`` ``{workflowId}``: a fresh run gets ``run.created``; the ``conformance-approval``
  fixture (§16a gate) is then suspended at node ``gate`` (``node.suspended``, kind approval),
  ``conformance-noop`` is completed (``run.completed``), ``conformance-cancellable`` runs until
  cancelled.
- ``run.cancel``: ``run.cancelled``; a terminal run refuses (``run_terminal``).
- ``interrupt.resolve`` ``{nodeId, resumeValue, expectedSequence}`` (§9 Interrupt resolve, §7):
  refused with ``forbidden`` (details.reason ``untrusted_content_blocks_approval``) while ANY
  surface bound to the node is tainted, and the interrupt stays pending; ``not_found`` when
  no interrupt is pending there; ``interrupt_already_resolved`` (409) when it was resolved
  after ``expectedSequence``, the run's last sequence the requester saw (a concurrent
  resolve), and for any resolve on a run that has ended (errors.md §One code per state: a
  cancelled or completed run's interrupts are closed). Accepted: ``interrupt.resolved {nodeId,
  resumeValue}`` (SR-1 redacted), then ``run.completed`` when it was the approval fixture's
  gate (the fixture's workflow ends there).
- ``action.submit`` ``{surfaceId, sourceComponentId, name, context, expectedSequence}``
  (a2ui-action-confinement; the HTTP layer checked the component and the context against the
  materialized surface at ``expectedSequence``, app.core.http.actions): re-checked here against the
  run state: the name is resume or exchange, the surface is live, final and untainted, and
  it has not changed since ``expectedSequence`` (else ``run_state_conflict``: look again).
  Accepted: ``action.accepted {surfaceId, sourceComponentId, name, context}`` (SR-1 redacted).
- ``run.fork`` (openwop-a2ui.md §9 Fork): the record's ``runId`` is the NEW run. Its log gets the
  source run's recorded events ``[0, fromSeq)`` copied as recorded (payload untouched, byte for
  byte; only ``runId`` and ``eventId`` are the child's), then one ``run.forked`` host event at
  sequence ``fromSeq`` that names the source. The copy and the marker are appended in one
  transaction with the command's offset, so a crash never leaves a half-copied fork visible.
  The source events are NOT taken from the record (a producer could forge them): the record
  only says where in the log they are (``source.partition``, ``firstOffset``, ``lastOffset``),
  and the shell reads them from the log topic itself; here they are checked to be exactly the
  source run's sequences ``0 .. fromSeq-1``.

The handlers live by group, each a pure function of one ``CommandCall``
(app.core.admission.host_commands_call, with ``ForkSource``, ``fork_source_of`` and
``host_event``): host_commands_run (``run.create``, ``run.cancel``, ``interrupt.resolve``
and the fixtures), host_commands_action (``action.submit``), host_commands_fork
(``run.fork``). This module holds the table, the dispatch and ``resume_of``.

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

from app.core.admission.host_commands_action import submit_action
from app.core.admission.host_commands_call import CommandCall, Fetched, invalid_command
from app.core.admission.host_commands_fork import fork_run
from app.core.admission.host_commands_run import cancel_run, create_run, resolve_interrupt
from app.core.admission.redaction import Secrets
from app.core.admission.refusal import Violation
from app.core.admission.rules import (
    ACTION_CONFINEMENT,
    FORK_SOURCE,
    FORK_TARGET_FRESH,
    HOST_COMMAND,
    INTERRUPT_PENDING,
    RUN_EXISTS,
    RUN_FRESH,
    RUN_LIVE,
    SURFACE_FINAL,
    SURFACE_LIVE,
    SURFACE_UNCHANGED,
    UNTRUSTED_BLOCKS_APPROVAL,
    Rule,
)
from app.core.runlog.events import RecordedEvent
from app.core.runlog.run_state import RunState

__all__ = [
    "COMMANDS",
    "decide_command",
    "resume_of",
]

# The commands by type (STYLE rule 1): each with the rules it can refuse by, in the order it
# first applies each, and its handler. ``decide_command`` dispatches here; an unknown type, or a
# record whose ``command`` is not an object, is ``host-command`` before any of them.
# (app.core.admission.validator.ADMISSION places this dispatch in the order of the whole decision.)
COMMANDS: Final[
    Mapping[str, tuple[tuple[Rule, ...], Callable[[CommandCall], Violation | None]]]
] = MappingProxyType(
    {
        "run.create": ((HOST_COMMAND, RUN_FRESH), create_run),
        "run.cancel": ((RUN_EXISTS, RUN_LIVE), cancel_run),
        "interrupt.resolve": (
            (HOST_COMMAND, INTERRUPT_PENDING, UNTRUSTED_BLOCKS_APPROVAL),
            resolve_interrupt,
        ),
        "action.submit": (
            (
                ACTION_CONFINEMENT,
                RUN_LIVE,
                HOST_COMMAND,
                SURFACE_LIVE,
                SURFACE_FINAL,
                UNTRUSTED_BLOCKS_APPROVAL,
                SURFACE_UNCHANGED,
            ),
            submit_action,
        ),
        "run.fork": ((HOST_COMMAND, FORK_TARGET_FRESH, FORK_SOURCE), fork_run),
    }
)


def resume_of(event: RecordedEvent) -> dict[str, Any] | None:
    """The record for the resumes topic (schemas/resume) that an accepted action or a resolved
    interrupt produces, for the orchestrator; None for other events."""
    payload = event.get("payload")
    if not isinstance(payload, dict):
        return None
    base = {
        "runId": event["runId"],
        "sequence": event["sequence"],
        "eventId": event["eventId"],
        "type": event["type"],
    }
    if event["type"] == "interrupt.resolved":
        return {**base, "nodeId": payload["nodeId"], "value": payload.get("resumeValue")}
    if event["type"] == "action.accepted":
        resumed = {**base, "surfaceId": payload["surfaceId"], "name": payload["name"]}
        if "nodeId" in event:
            resumed["nodeId"] = event["nodeId"]
        return {**resumed, "value": payload.get("context")}
    return None


def decide_command(
    record: Mapping[str, Any],
    state: RunState,
    fetched: Fetched,
    *,
    now: str,
    event_id_for: Callable[[str, int], str],
    secrets: Secrets = (),
) -> list[RecordedEvent] | Violation:
    """The events a command record appends to its run (in order, from ``state.next_sequence``),
    or why it is refused. ``fetched(source)`` returns the log events the shell read for a fork
    (None when it could not read them); ``secrets`` are the run's SR-1 registrations."""
    command = record.get("command")
    if not isinstance(command, dict):
        return invalid_command("/command", "a command record is {runId, command: {type, ...}}")
    kind = command.get("type")
    entry = COMMANDS.get(kind) if isinstance(kind, str) else None  # a list is unhashable
    if entry is None:
        return invalid_command("/command/type", f"unknown host command {kind!r}")
    call = CommandCall(record, command, state, fetched, now, event_id_for, secrets)
    refused = entry[1](call)
    return refused if refused is not None else call.events
