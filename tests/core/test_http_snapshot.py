"""The run snapshot (app.core.http.snapshot): interrupts as the run's host events leave them,
closed when the run ends (the suite's v2-interrupt-resolve-terminal: after cancel the snapshot
lists no pending interrupt), and the fields the v1/v2 RunSnapshot schemas require, as
openwop-client 2.7.0's runs_get reads them (issue 17)."""

from __future__ import annotations

import json
import re
from typing import cast

import pytest
from openwop_client.client import _run_snapshot_from_dict

from app.core.http.snapshot import EXTENSION, SNAPSHOT_EVENT_TYPES, interrupts_of, snapshot
from app.core.runlog.events import RecordedEvent


# The host events here carry only what the snapshot reads: their type and payload.
def _event(event_type: str, node: str | None = None) -> RecordedEvent:
    return cast(
        RecordedEvent, {"type": event_type, "payload": {} if node is None else {"nodeId": node}}
    )


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
        (
            [
                _event("node.suspended"),
                cast(RecordedEvent, {"type": "node.suspended", "payload": 1}),  # not an object
            ],
            "running",
            {},
        ),
    ],
)
def test_interrupts_of(events: list[RecordedEvent], status: str, expected: dict[str, str]) -> None:
    assert interrupts_of(events, status) == expected


def test_a_cancelled_approval_run_lists_no_pending_interrupt() -> None:
    doc = snapshot("local/run-1", "cancelled", 2, [SUSPENDED], major=1)
    assert doc["interrupts"] == [{"nodeId": "gate", "status": "cancelled"}]
    assert doc["isTerminal"] is True and doc["status"] == "cancelled"
    assert doc["eventsUrl"] == "/v1/runs/local~2Frun-1/events"
    assert "currentNodeId" not in doc
    host = snapshot("local/run-1", "cancelled", 2, [SUSPENDED])["extensions"][EXTENSION]
    assert host["interrupts"] == [{"nodeId": "gate", "status": "cancelled"}]


def test_the_snapshot_reads_only_host_events() -> None:
    assert {"node.suspended", "interrupt.resolved"} <= SNAPSHOT_EVENT_TYPES
    assert "ui.a2ui-surface" not in SNAPSHOT_EVENT_TYPES


# schemas/v2/run-snapshot.schema.json (openwop-sdks): required, and every root property (the
# object is closed); subject.schema.json's required fields and the id grammars it uses.
V2_REQUIRED = {"eventLogSchemaVersion", "owner", "runId", "status", "workflowId"}
V2_PROPERTIES = V2_REQUIRED | {
    "compensationStatus", "currentNodeId", "startedAt", "completedAt", "agent",
    "runOrchestrator", "nodeStates", "variables", "channels", "error", "engineVersion", "tags",
    "metadata", "configurable", "metrics", "parentRunId", "inputs", "extensions",
}  # fmt: skip
V1_REQUIRED = {"runId", "workflowId", "status"}
RUN_ID = re.compile(r"[A-Za-z0-9._~-]{1,128}/[A-Za-z0-9._~-]{16,128}")
WORKFLOW_ID = re.compile(r"[A-Za-z0-9._~:-]{1,128}")
TENANT_ID = re.compile(r"(anon:)?[A-Za-z0-9._~-]{1,128}")
EXTENSION_KEY = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z][a-z0-9]*(-[a-z0-9]+)*")
CREATED = cast(
    RecordedEvent, {"type": "run.created", "payload": {"workflowId": "conformance-approval"}}
)
FORKED = cast(RecordedEvent, {"type": "run.forked", "payload": {"sourceRunId": "a/b"}})
RUN = "local/0123456789abcdef0123456789abcdef"

CASES = [
    ("waiting", RUN, "waiting-approval", [CREATED, SUSPENDED]),
    ("resolved", RUN, "running", [CREATED, SUSPENDED, RESOLVED]),
    ("cancelled", RUN, "cancelled", [CREATED, SUSPENDED]),
    ("surfaces only", "conf/run-0123456789abcdef", "running", []),
    ("fork", RUN, "running", [CREATED, FORKED]),
    ("no tenant", "demo-run", "running", []),
]


@pytest.mark.parametrize(("name", "run_id", "status", "events"), CASES)
def test_the_v2_snapshot_is_what_the_closed_schema_and_runs_get_read(
    name: str, run_id: str, status: str, events: list[RecordedEvent]
) -> None:
    doc = snapshot(run_id, status, len(events) - 1, events)
    assert V2_REQUIRED <= set(doc) <= V2_PROPERTIES, name
    assert WORKFLOW_ID.fullmatch(doc["workflowId"]) and doc["eventLogSchemaVersion"] >= 2
    owner = doc["owner"]
    assert set(owner) == {"tenant", "subject"} and TENANT_ID.fullmatch(owner["tenant"])
    subject = owner["subject"]
    assert set(subject) == {"issuer", "subjectId", "tenant", "lane", "kind"}
    assert subject["issuer"] == "urn:openwop:legacy" and subject["tenant"] == owner["tenant"]
    assert "/" not in subject["subjectId"] and (subject["lane"], subject["kind"]) == (
        "api-key",
        "workload",
    )
    assert all(EXTENSION_KEY.fullmatch(key) for key in doc["extensions"])
    if RUN_ID.fullmatch(run_id):
        assert owner["tenant"] == run_id.split("/")[0]
    # openwop-client 2.7.0's runs_get parses it (before: KeyError('owner'))
    parsed = _run_snapshot_from_dict(json.loads(json.dumps(doc)))
    assert (parsed.runId, parsed.status, parsed.owner.tenant) == (run_id, status, owner["tenant"])
    assert parsed.eventLogSchemaVersion == 3
    v1 = snapshot(run_id, status, len(events) - 1, events, major=1)
    assert set(v1) >= V1_REQUIRED and set(v1["owner"]) == {"tenant"}
    assert v1["workflowId"] == doc["workflowId"]


def test_the_snapshot_names_the_workflow_the_gate_and_the_parent() -> None:
    waiting = snapshot(RUN, "waiting-approval", 1, [CREATED, SUSPENDED])
    assert waiting["workflowId"] == "conformance-approval"
    assert waiting["currentNodeId"] == "gate"
    assert "currentNodeId" not in snapshot(RUN, "running", 2, [CREATED, SUSPENDED, RESOLVED])
    plain = snapshot("demo-run", "running", 0, [])
    assert plain["workflowId"] == "a2ui-stream:surfaces" and plain["owner"]["tenant"] == "local"
    fork = snapshot(RUN, "running", 1, [CREATED, FORKED])
    assert fork["parentRunId"] == "a/b" and fork["workflowId"] == "conformance-approval"
