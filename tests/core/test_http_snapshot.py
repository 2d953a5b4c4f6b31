"""The run snapshot (app.core.http_snapshot): interrupts as the run's host events leave them,
closed when the run ends (the suite's v2-interrupt-resolve-terminal: after cancel the snapshot
lists no pending interrupt)."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.http_snapshot import SNAPSHOT_EVENT_TYPES, interrupts_of, snapshot


def _event(event_type: str, node: str | None = None) -> dict[str, Any]:
    return {"type": event_type, "payload": {} if node is None else {"nodeId": node}}


SUSPENDED = _event("node.suspended", "gate")
RESOLVED = _event("interrupt.resolved", "gate")


@pytest.mark.parametrize(
    ("events", "status", "expected"),
    [
        ([], "running", {}),
        ([SUSPENDED], "waiting-approval", {"gate": "pending"}),
        ([SUSPENDED, RESOLVED], "running", {"gate": "resolved"}),
        # the run's end closes what was still pending; a resolved interrupt stays resolved
        ([SUSPENDED], "cancelled", {"gate": "cancelled"}),
        ([SUSPENDED], "failed", {"gate": "cancelled"}),
        ([SUSPENDED, RESOLVED], "cancelled", {"gate": "resolved"}),
        (
            [SUSPENDED, _event("node.suspended", "second"), RESOLVED],
            "cancelled",
            {"gate": "resolved", "second": "cancelled"},
        ),
        # events without a nodeId open nothing
        ([_event("node.suspended"), {"type": "node.suspended", "payload": 1}], "running", {}),
    ],
)
def test_interrupts_of(events: list[dict[str, Any]], status: str, expected: dict[str, str]) -> None:
    assert interrupts_of(events, status) == expected


def test_a_cancelled_approval_run_lists_no_pending_interrupt() -> None:
    doc = snapshot("local/run-1", "cancelled", 2, [SUSPENDED])
    assert doc["interrupts"] == [{"nodeId": "gate", "status": "cancelled"}]
    assert doc["isTerminal"] is True and doc["status"] == "cancelled"
    assert doc["eventsUrl"] == "/runs/local~2Frun-1/events"


def test_the_snapshot_reads_only_host_events() -> None:
    assert {"node.suspended", "interrupt.resolved"} <= SNAPSHOT_EVENT_TYPES
    assert "ui.a2ui-surface" not in SNAPSHOT_EVENT_TYPES
