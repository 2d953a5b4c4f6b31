"""A run's status as a fold over its log's event types (the run lifecycle as data).

Role: pure. a2ui-stream is a host for surfaces, not a workflow engine: a run exists from its
first recorded event and its status only moves on host events (docs/http.md). The statuses are
the OpenWOP run statuses the HTTP API reports (``GET /runs/{runId}``, poll's ``status`` and
``isTerminal``).

``apply_host_event`` folds the same table into the validator's ``RunState.lifecycle`` and
also tracks interrupts: ``node.suspended {nodeId}`` opens one (the run waits for approval),
``interrupt.resolved {nodeId}`` closes it; ``run.forked`` names the run's ancestors (its
``lineage``, whose SR-1 secrets the fork inherits).

May import: the standard library and app.core.runlog.run_state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from app.core.runlog.events import RecordedEvent
from app.core.runlog.run_state import Lifecycle

__all__ = [
    "INITIAL_STATUS",
    "TERMINAL_STATUSES",
    "STATUS_AFTER",
    "status_after",
    "status_of",
    "apply_host_event",
    "created_status",
    "lineage_of",
    "MAX_LINEAGE",
]

INITIAL_STATUS = "running"
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})

# event type -> the status the run has after it (events not listed leave it unchanged).
STATUS_AFTER: Mapping[str, str] = {
    "run.created": "running",
    "run.forked": "running",
    "node.suspended": "waiting-approval",
    "interrupt.resolved": "running",
    "run.completed": "completed",
    "run.failed": "failed",
    "run.cancelled": "cancelled",
}


def status_after(status: str, event_type: str) -> str:
    """The status after one event; a terminal status never changes (§9: the stream closes)."""
    if status in TERMINAL_STATUSES:
        return status
    return STATUS_AFTER.get(event_type, status)


def status_of(event_types: Iterable[str]) -> str:
    """The run status after ``event_types``, in order, from the initial status."""
    status = INITIAL_STATUS
    for event_type in event_types:
        status = status_after(status, event_type)
    return status


def created_status(event_types: Iterable[str]) -> str:
    """The ``status`` a create answers: the last live status its events (one transaction) pass
    through. runs.md §Create: the 201's status is one of pending, running, waiting-approval,
    waiting-input, waiting-external, never terminal; a fixture that ends in its create's own
    transaction (``conformance-noop``: run.created, run.completed) answers ``running``, the
    status it started in, and ``GET /runs/{runId}`` read after the 201 says ``completed``."""
    status = answer = INITIAL_STATUS
    for event_type in event_types:
        status = status_after(status, event_type)
        if status not in TERMINAL_STATUSES:
            answer = status
    return answer


def apply_host_event(lifecycle: Lifecycle, event: RecordedEvent) -> Lifecycle:
    """Fold one host event into the validator's lifecycle state."""
    event_type = str(event.get("type", ""))
    status = status_after(lifecycle.status, event_type)
    payload = event.get("payload")
    node = payload.get("nodeId") if isinstance(payload, dict) else None
    interrupts = lifecycle.interrupts
    if event_type in ("node.suspended", "interrupt.resolved") and isinstance(node, str):
        state = "pending" if event_type == "node.suspended" else "resolved"
        kept = tuple(i for i in interrupts if i[0] != node)
        interrupts = (*kept, (node, state, int(event["sequence"])))
        if state == "resolved" and any(i[1] == "pending" for i in kept):
            status = lifecycle.status  # another interrupt still waits
    lineage = lifecycle.lineage
    if event_type == "run.forked" and isinstance(payload, dict):
        lineage = lineage_of(payload)
    unchanged = interrupts is lifecycle.interrupts and lineage is lifecycle.lineage
    if unchanged and status == lifecycle.status:
        return lifecycle
    return Lifecycle(status, interrupts, lineage)


MAX_LINEAGE = 32  # forks of forks: the ancestors a fork marker names, nearest first


def lineage_of(marker: Mapping[str, Any]) -> tuple[str, ...]:
    """The ancestors a ``run.forked`` payload names: its ``lineage`` (the source first, then
    the source's own ancestors), or just ``sourceRunId`` in a marker written before lineage
    was recorded."""
    named = marker.get("lineage")
    if isinstance(named, list) and all(isinstance(r, str) for r in named):
        return tuple(named[:MAX_LINEAGE])
    source = marker.get("sourceRunId")
    return (source,) if isinstance(source, str) else ()
