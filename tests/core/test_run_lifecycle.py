"""The run lifecycle as a fold (app.core.runlog.run_lifecycle): the status a create answers."""

from __future__ import annotations

import pytest

from app.core.runlog.run_lifecycle import TERMINAL_STATUSES, created_status, status_of

# runs.md §Create: the 201's status is one of these.
CREATE_STATUSES = {"pending", "running", "waiting-approval", "waiting-input", "waiting-external"}


@pytest.mark.parametrize(
    ("events", "answered", "now"),
    [
        # the fixtures' creates (app.core.admission.host_commands_run.create_run)
        (["run.created"], "running", "running"),  # conformance-cancellable, any workflow
        (["run.created", "node.suspended"], "waiting-approval", "waiting-approval"),
        (["run.created", "run.completed"], "running", "completed"),  # conformance-noop
        # a create that ended otherwise still answers the status it started in
        (["run.created", "run.failed"], "running", "failed"),
        (["run.created", "node.suspended", "run.cancelled"], "waiting-approval", "cancelled"),
        ([], "running", "running"),
    ],
)
def test_a_create_answers_its_last_live_status(events: list[str], answered: str, now: str) -> None:
    assert created_status(events) == answered
    assert status_of(events) == now  # what GET /runs/{runId} reads after the 201


@pytest.mark.parametrize(
    "events",
    [
        ["run.created", "run.completed"],
        ["run.created", "run.completed", "node.suspended"],
        ["run.cancelled"],
        ["run.created", "interrupt.resolved", "run.failed"],
    ],
)
def test_law_a_create_never_answers_a_terminal_status(events: list[str]) -> None:
    status = created_status(events)
    assert status not in TERMINAL_STATUSES and status in CREATE_STATUSES
