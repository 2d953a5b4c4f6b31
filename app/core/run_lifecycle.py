"""A run's status as a fold over its log's event types (the run lifecycle as data).

Role: pure. a2ui-stream is a host for surfaces, not a workflow engine: a run exists from its
first recorded event and its status only moves on host events (docs/http.md). The statuses are
the OpenWOP run statuses the HTTP API reports (``GET /runs/{runId}``, poll's ``status`` and
``isTerminal``).

May import: the standard library.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["INITIAL_STATUS", "TERMINAL_STATUSES", "STATUS_AFTER", "status_after", "status_of"]

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
    status = INITIAL_STATUS
    for event_type in event_types:
        status = status_after(status, event_type)
    return status
