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

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from app.core.admission.identifiers import run_id_error
from app.core.admission.redaction import Secrets, redact
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
    refuse,
)
from app.core.runlog.run_lifecycle import MAX_LINEAGE, TERMINAL_STATUSES
from app.core.runlog.run_state import RunState

__all__ = [
    "COMMANDS",
    "HOST_EVENT_SCHEMA_VERSION",
    "FORK_MODES",
    "ForkSource",
    "fork_source_of",
    "host_event",
    "decide_command",
    "resume_of",
    "APPROVAL_FIXTURE",
    "CANCELLABLE_FIXTURE",
    "FIXTURES",
    "NOOP_FIXTURE",
    "ACTION_NAMES",
]

APPROVAL_FIXTURE = "conformance-approval"
NOOP_FIXTURE = "conformance-noop"
CANCELLABLE_FIXTURE = "conformance-cancellable"
# The conformance fixture workflows (RFC 0003 ``fixtures``), served and advertised only with
# the seams (A2UI_STREAM_SEAMS=1; app.shell.http.lifecycle refuses other ``conformance-*`` ids).
FIXTURES = (APPROVAL_FIXTURE, NOOP_FIXTURE, CANCELLABLE_FIXTURE)
APPROVAL_NODE = "gate"
ACTION_NAMES = ("resume", "exchange")  # a2ui-action-confinement

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
    return refuse(HOST_COMMAND, path, message)


def _copy(event: Mapping[str, Any], run_id: str, event_id: str) -> dict[str, Any]:
    # Copied as recorded (§8 "Fork children must carry it the same way"): same keys in the same
    # order, the payload object untouched; only the run identity is the child's.
    copied = dict(event)
    copied["eventId"] = event_id
    copied["runId"] = run_id
    return copied


def _fork(call: _Call) -> Violation | None:
    record, command, state, event_id_for = call.record, call.command, call.state, call.event_id_for
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
        return refuse(
            FORK_TARGET_FRESH,
            "/runId",
            f"run {child!r} already has {state.next_sequence} events: a fork creates a new run",
            {"runStatus": "exists"},
        )
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
        out.append(_copy(event, child, event_id_for(child, expected)))
    ancestors = command.get("sourceLineage", [])
    if not (
        isinstance(ancestors, list)
        and len(ancestors) < MAX_LINEAGE
        and all(isinstance(r, str) and run_id_error(r) is None for r in ancestors)
    ):
        return _invalid(
            "/command/sourceLineage",
            f"sourceLineage is the source run's own ancestors: at most {MAX_LINEAGE - 1} runIds",
        )
    marker = {
        "sourceRunId": source.source_run_id,
        "fromSeq": source.from_seq,
        "mode": mode,
        # the fork inherits the SR-1 secrets of every run it descends from (issue 14 item 6b)
        "lineage": [source.source_run_id, *ancestors],
    }
    out.append(
        host_event(
            child,
            source.from_seq,
            "run.forked",
            marker,
            event_id=event_id_for(child, source.from_seq),
            now=call.now,
        )
    )
    return None


class _Call:
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
        fetched: Callable[[ForkSource], Sequence[Mapping[str, Any]] | None],
        now: str,
        event_id_for: Callable[[str, int], str],
        secrets: Secrets,
    ) -> None:
        self.record, self.command, self.state, self.fetched = record, command, state, fetched
        self.now, self.event_id_for, self.secrets = now, event_id_for, secrets
        self.events: list[dict[str, Any]] = []

    def emit(self, event_type: str, payload: Mapping[str, Any], node_id: str | None = None) -> None:
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


def _terminal(state: RunState) -> Violation | None:
    if state.lifecycle.status in TERMINAL_STATUSES:
        return refuse(
            RUN_LIVE,
            "/runId",
            f"run {state.run_id!r} is {state.lifecycle.status}",
            {"runStatus": state.lifecycle.status},
        )
    return None


def _create(call: _Call) -> Violation | None:
    command, state, emit = call.command, call.state, call.emit
    workflow = command.get("workflowId")
    if not isinstance(workflow, str) or not 1 <= len(workflow) <= 256:
        return _invalid("/command/workflowId", "workflowId must be a string of 1..256 chars")
    if state.next_sequence != 0:
        return refuse(
            RUN_FRESH,
            "/runId",
            f"run {state.run_id!r} already exists",
            {"runStatus": state.lifecycle.status},
        )
    emit("run.created", {"workflowId": workflow})
    if workflow == APPROVAL_FIXTURE:  # §16a gate: a run suspended at node `gate`
        emit("node.suspended", {"nodeId": APPROVAL_NODE, "kind": "approval"}, APPROVAL_NODE)
    elif workflow == NOOP_FIXTURE:  # a workflow with nothing to do: completed at once
        emit("run.completed", {})
    # CANCELLABLE_FIXTURE: running until cancelled. The suite's definition completes after
    # ``inputs.delayMs``; this host has no timer (no clock in the core, no orchestrator), so it
    # never completes on its own (docs/actions.md).
    return None


def _cancel(call: _Call) -> Violation | None:
    state = call.state
    if state.next_sequence == 0:
        return refuse(RUN_EXISTS, "/runId", f"no run {state.run_id!r}")
    ended = _terminal(state)
    if ended is not None:
        return ended
    call.emit("run.cancelled", {})
    return None


def _expected(command: Mapping[str, Any]) -> int:
    value = command.get("expectedSequence")
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _resolve(call: _Call) -> Violation | None:
    command, state, emit, secrets = call.command, call.state, call.emit, call.secrets
    node = command.get("nodeId")
    if not isinstance(node, str) or not node:
        return _invalid("/command/nodeId", "nodeId must be a non-empty string")
    if state.lifecycle.status in TERMINAL_STATUSES:
        # spec/v2/core/errors.md §One code per state (RFC 0213 §C): a resolve of an interrupt
        # whose run is cancelled or completed is 409 interrupt_already_resolved, never
        # run_terminal or interrupt_cancelled (the suite's v2-interrupt-resolve-terminal).
        # Decided by the status alone: an ended run's state is compacted and keeps no
        # interrupts (app.core.runlog.run_snapshot.compact), and no interrupt of it can be resolved.
        return refuse(
            INTERRUPT_PENDING,
            "/command/nodeId",
            f"the run is {state.lifecycle.status}: the interrupt at {node!r} is closed",
            {"nodeId": node, "runStatus": state.lifecycle.status},
            code="interrupt_already_resolved",
        )
    found = state.lifecycle.interrupt(node)
    if found is None or found[0] != "pending":
        if found is not None and found[1] > _expected(command):
            return refuse(
                INTERRUPT_PENDING,
                "/command/nodeId",
                f"the interrupt at {node!r} was resolved concurrently (sequence {found[1]})",
                {"nodeId": node, "resolvedAt": found[1]},
                code="interrupt_already_resolved",
            )
        return refuse(
            INTERRUPT_PENDING,
            "/command/nodeId",
            f"no pending interrupt at node {node!r} (not found or already resolved)",
            {"nodeId": node},
        )
    tainted = state.tainted_surfaces_for_node(node)
    if tainted:  # §7: an approval never advances on an untrusted surface (sticky in v2)
        return refuse(
            UNTRUSTED_BLOCKS_APPROVAL,
            "/command/nodeId",
            "untrusted_content_blocks_approval: a surface bound to this node carries "
            "untrusted content; the interrupt stays pending",
            {"reason": "untrusted_content_blocks_approval", "nodeId": node, "surfaceIds": tainted},
        )
    value = command.get("resumeValue")
    emit("interrupt.resolved", {"nodeId": node, "resumeValue": redact(value, secrets)}, node)
    others = [i for i in state.lifecycle.interrupts if i[0] != node and i[1] == "pending"]
    if node == APPROVAL_NODE and not others:
        # The only interrupt this host opens is the conformance-approval fixture's gate, and
        # that workflow ends there: resolved, the run is completed (the suite's fixture;
        # v2-interrupt-resolve-terminal leg 2 resolves again after it completed).
        emit("run.completed", {})
    return None


def _action(call: _Call) -> Violation | None:
    command, state, emit, secrets = call.command, call.state, call.emit, call.secrets
    name = command.get("name")
    if name not in ACTION_NAMES:  # a2ui-action-confinement
        return refuse(
            ACTION_CONFINEMENT,
            "/command/name",
            f"an action's name is resume or exchange, not {name!r}",
            {"name": name},
        )
    ended = _terminal(state)
    if ended is not None:
        return ended
    sid = command.get("surfaceId")
    if not isinstance(sid, str):
        return _invalid("/command/surfaceId", "surfaceId must be a string")
    if sid == "~v1":
        v1 = state.v1_surface
        last, tainted, partial, nodes = (
            (None, False, False, frozenset[str]())
            if v1 is None
            else (v1.last, v1.tainted, False, v1.node_ids)
        )
        live = v1 is not None
    else:
        surface = state.surfaces.get(sid)
        live = surface is not None and surface.status == "live"
        last = None if surface is None else surface.last
        tainted = surface is not None and surface.tainted
        partial = surface is not None and surface.partial
        nodes = frozenset() if surface is None else surface.node_ids
    if not live:
        return refuse(SURFACE_LIVE, "/command/surfaceId", f"no live surface {sid!r}")
    if partial:
        return refuse(
            SURFACE_FINAL,
            "/command/surfaceId",
            "the surface's last envelope is a partial chunk: actions wait for the final one (E1)",
        )
    if tainted:
        return refuse(
            UNTRUSTED_BLOCKS_APPROVAL,
            "/command/surfaceId",
            "untrusted_content_blocks_approval: this surface carries untrusted content",
            {"reason": "untrusted_content_blocks_approval", "surfaceIds": [sid]},
        )
    if last is None or last.sequence != _expected(command):
        return refuse(
            SURFACE_UNCHANGED,
            "/command/expectedSequence",
            "the surface changed after the action was checked; submit it again",
            {"runStatus": state.lifecycle.status},
        )
    payload = {
        "surfaceId": sid,
        "sourceComponentId": command.get("sourceComponentId"),
        "name": name,
        "context": redact(command.get("context"), secrets),
    }
    node = next(iter(sorted(nodes)), None)
    emit("action.accepted", payload, node)
    return None


# The commands by type (STYLE rule 1): each with the rules it can refuse by, in the order it
# first applies each, and its handler. ``decide_command`` dispatches here; an unknown type, or a
# record whose ``command`` is not an object, is ``host-command`` before any of them.
# (app.core.admission.validator.ADMISSION places this dispatch in the order of the whole decision.)
COMMANDS: Final[Mapping[str, tuple[tuple[Rule, ...], Callable[[_Call], Violation | None]]]] = (
    MappingProxyType(
        {
            "run.create": ((HOST_COMMAND, RUN_FRESH), _create),
            "run.cancel": ((RUN_EXISTS, RUN_LIVE), _cancel),
            "interrupt.resolve": (
                (HOST_COMMAND, INTERRUPT_PENDING, UNTRUSTED_BLOCKS_APPROVAL),
                _resolve,
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
                _action,
            ),
            "run.fork": ((HOST_COMMAND, FORK_TARGET_FRESH, FORK_SOURCE), _fork),
        }
    )
)


def resume_of(event: Mapping[str, Any]) -> dict[str, Any] | None:
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
    fetched: Callable[[ForkSource], Sequence[Mapping[str, Any]] | None],
    *,
    now: str,
    event_id_for: Callable[[str, int], str],
    secrets: Secrets = (),
) -> list[dict[str, Any]] | Violation:
    """The events a command record appends to its run (in order, from ``state.next_sequence``),
    or why it is refused. ``fetched(source)`` returns the log events the shell read for a fork
    (None when it could not read them); ``secrets`` are the run's SR-1 registrations."""
    command = record.get("command")
    if not isinstance(command, dict):
        return _invalid("/command", "a command record is {runId, command: {type, ...}}")
    kind = command.get("type")
    entry = COMMANDS.get(kind) if isinstance(kind, str) else None  # a list is unhashable
    if entry is None:
        return _invalid("/command/type", f"unknown host command {kind!r}")
    call = _Call(record, command, state, fetched, now, event_id_for, secrets)
    refused = entry[1](call)
    return refused if refused is not None else call.events
