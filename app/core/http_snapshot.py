"""The run snapshot that ``GET /runs/{runId}`` and ``GET /v1/runs/{runId}`` answer (an OpenWOP
HTTP value, beside http_errors and http_admission), built from the run's recorded host events
(a fold of the log, like every read here).

Role: pure. The shell passes the run's status (app.core.run_lifecycle's fold, kept by the run
index), its last sequence and the decoded host events whose types are in
``SNAPSHOT_EVENT_TYPES`` (the only ones the snapshot reads, so the shell decodes no envelope).

Interrupts: ``node.suspended {nodeId}`` opens one (``pending``), ``interrupt.resolved {nodeId}``
closes it (``resolved``). When the run ends while one is still pending, it is ``cancelled``:
the run's end closed it (spec/v2/core/errors.md §One code per state: a resolve after the end is
409 interrupt_already_resolved), so a snapshot never offers a pending interrupt on a run that
cannot resume (the suite's v2-interrupt-resolve-terminal).

May import: the standard library, app.core.run_lifecycle and app.core.wire_ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from app.core.run_lifecycle import TERMINAL_STATUSES
from app.core.wire_ids import project_run_id

__all__ = ["SNAPSHOT_EVENT_TYPES", "interrupts_of", "snapshot"]

SNAPSHOT_EVENT_TYPES: frozenset[str] = frozenset({"node.suspended", "interrupt.resolved"})


def interrupts_of(events: Iterable[Mapping[str, Any]], status: str) -> dict[str, str]:
    """nodeId -> ``pending`` | ``resolved`` | ``cancelled`` for every interrupt the events
    opened, in the order each was first opened, for a run whose status is ``status``."""
    interrupts: dict[str, str] = {}
    for event in events:
        payload = event.get("payload")
        node = payload.get("nodeId") if isinstance(payload, dict) else None
        if not isinstance(node, str):
            continue
        if event.get("type") == "node.suspended":
            interrupts[node] = "pending"
        elif event.get("type") == "interrupt.resolved":
            interrupts[node] = "resolved"
    if status in TERMINAL_STATUSES:
        interrupts = {n: "cancelled" if s == "pending" else s for n, s in interrupts.items()}
    return interrupts


def snapshot(
    run_id: str, status: str, last_sequence: int, events: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """The snapshot document of run ``run_id`` (``events``: its host events of
    ``SNAPSHOT_EVENT_TYPES``, in sequence order)."""
    interrupts = interrupts_of(events, status)
    return {
        "runId": run_id,
        "status": status,
        "lastSequence": last_sequence,
        "isTerminal": status in TERMINAL_STATUSES,
        "interrupts": [{"nodeId": n, "status": s} for n, s in interrupts.items()],
        "eventsUrl": f"/runs/{project_run_id(run_id)}/events",
    }
