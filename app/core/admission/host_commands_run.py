"""The host commands on a run's lifecycle and its interrupts: ``run.create``, ``run.cancel`` and
``interrupt.resolve``, and the conformance fixture workflows they play out.

Role: pure handlers for app.core.admission.host_commands ``COMMANDS`` (that module's docstring
says what each command appends or refuses). Each takes the ``CommandCall``
(app.core.admission.host_commands_call), appends its host events there and returns None, or
returns the ``Violation`` that refuses it.

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core.admission.host_commands_call import (
    CommandCall,
    ended_refusal,
    expected_sequence,
    invalid_command,
)
from app.core.admission.redaction import redact
from app.core.admission.refusal import Violation
from app.core.admission.rules import (
    INTERRUPT_PENDING,
    RUN_EXISTS,
    RUN_FRESH,
    UNTRUSTED_BLOCKS_APPROVAL,
    refuse,
)
from app.core.runlog.run_lifecycle import TERMINAL_STATUSES
from app.core.runlog.run_state import RunState

__all__ = [
    "APPROVAL_FIXTURE",
    "CANCELLABLE_FIXTURE",
    "FIXTURES",
    "NOOP_FIXTURE",
    "cancel_run",
    "create_run",
    "resolve_interrupt",
]

APPROVAL_FIXTURE = "conformance-approval"
NOOP_FIXTURE = "conformance-noop"
CANCELLABLE_FIXTURE = "conformance-cancellable"
# The conformance fixture workflows (RFC 0003 ``fixtures``), served and advertised only with
# the seams (A2UI_STREAM_SEAMS=1; app.shell.http.lifecycle refuses other ``conformance-*`` ids).
FIXTURES = (APPROVAL_FIXTURE, NOOP_FIXTURE, CANCELLABLE_FIXTURE)
APPROVAL_NODE = "gate"


def create_run(call: CommandCall) -> Violation | None:
    """``run.create {workflowId}``: ``run.created``, then what the fixture workflow does."""
    command, state, emit = call.command, call.state, call.emit
    workflow = command.get("workflowId")
    if not isinstance(workflow, str) or not 1 <= len(workflow) <= 256:
        return invalid_command("/command/workflowId", "workflowId must be a string of 1..256 chars")
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


def cancel_run(call: CommandCall) -> Violation | None:
    """``run.cancel``: ``run.cancelled``, unless there is no such run or it has ended."""
    state = call.state
    if state.next_sequence == 0:
        return refuse(RUN_EXISTS, "/runId", f"no run {state.run_id!r}")
    ended = ended_refusal(state)
    if ended is not None:
        return ended
    call.emit("run.cancelled", {})
    return None


def resolve_interrupt(call: CommandCall) -> Violation | None:
    """``interrupt.resolve {nodeId, resumeValue, expectedSequence}`` (§9 Interrupt resolve, §7):
    ``interrupt.resolved`` (SR-1 redacted), then ``run.completed`` for the approval gate."""
    command, state, emit, secrets = call.command, call.state, call.emit, call.secrets
    node = command.get("nodeId")
    if not isinstance(node, str) or not node:
        return invalid_command("/command/nodeId", "nodeId must be a non-empty string")
    closed = _closed_interrupt(state, node, command)
    if closed is not None:
        return closed
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


def _closed_interrupt(state: RunState, node: str, command: Mapping[str, Any]) -> Violation | None:
    """Why the interrupt at ``node`` cannot be resolved (``interrupt-pending``), or None while
    it is pending on a live run."""
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
    if found is not None and found[0] == "pending":
        return None
    if found is not None and found[1] > expected_sequence(command):
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
