"""Actions, approvals and the run lifecycle over HTTP against a real worker (issue 7;
openwop-a2ui.md §7, §9, §16a §C.12). Every command goes through the admission topic and the
validator; accepted ones appear in the run's log and on the resumes topic."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from openwop_client import OpenwopClient
from openwop_client.errors import WopError
from openwop_client.types import CreateRunRequest, ForkRunRequest, ResolveInterruptRequest

from app.core.common.examples import rfc0209_positive_payload
from app.devtools.fault_kit import WorkerProcess, apply_topics
from app.shell.cli.broker import Broker
from app.shell.worker.kafka_io import read_topic
from tests.integration.http_kit import (
    TOKEN,
    Builder,
    Http,
    components_msg,
    create_msg,
    delete_msg,
    publish_raw,
    read_sse,
    runs_path,
    v2,
    wait_http,
)
from tests.integration.test_http import SEAM_V2, settings_for

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SECRET = "sk-live-" + uuid.uuid4().hex


class Host:
    def __init__(self, broker: Broker, worker: WorkerProcess, http: Http) -> None:
        self.broker, self.worker, self.http = broker, worker, http

    def emit(self, run: str, envelope: dict) -> tuple[int, dict]:
        reply = self.http.post(SEAM_V2, {"runId": run, "envelope": envelope})
        return reply.status, reply.body

    def create_approval_run(self) -> str:
        created = self.http.post("/runs", {"workflowId": "conformance-approval"})
        assert created.status == 201, created.body
        run = created.body["runId"]
        assert self.status(run) == "waiting-approval"
        return run

    def status(self, run: str) -> str:
        return str(self.http.get(runs_path(run)).body["status"])

    def topic(self, topic_id: str) -> str:
        return str(self.http.get("/health").body["topics"][topic_id])


@pytest.fixture(scope="module")
def host(broker: Broker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    tmp = tmp_path_factory.mktemp("actions")
    settings = settings_for("ac")
    asyncio.run(apply_topics(broker, settings))
    secrets = tmp / "secrets.json"
    secrets.write_text(json.dumps({"*": [{"secretId": "byok-1", "value": SECRET}]}))
    worker = WorkerProcess(
        broker,
        settings,
        "ac0",
        tmp,
        {
            "A2UI_STREAM_HTTP_TOKENS": TOKEN,
            "A2UI_STREAM_SEAMS": "1",
            "A2UI_STREAM_SECRETS_FILE": str(secrets),
        },
    )
    worker.start()
    try:
        yield Host(broker, worker, wait_http(worker))
    finally:
        worker.stop()
        assert SECRET not in worker.tail(10_000_000), "a registered secret reached the logs"


def _gate_surface(b: Builder, sid: str, trust: str | None = None, create: bool = False) -> dict:
    messages = [create_msg(), components_msg()] if create else [components_msg()]
    return b.envelope(v2(sid, messages), node_id="gate", trust=trust)


def test_discovery_advertises_the_approval_fixture_with_the_seams(host: Host) -> None:
    doc = host.http.get("/.well-known/openwop", headers={"OpenWOP-Version": "2"}).body
    assert doc["fixtures"] == [
        "conformance-approval",
        "conformance-noop",
        "conformance-cancellable",
    ]


def test_the_noop_and_cancellable_fixtures(host: Host) -> None:
    """issue 17: POST /runs {workflowId: conformance-noop} answered 404, which blocked every v2
    SSE, Last-Event-ID, poll-cursor and stream-mode scenario. Now it is created, completed in
    the same transaction, and its stream ends with run.completed; conformance-cancellable runs
    until cancelled. runs.md §Create: the 201's status is one of pending, running, waiting-*
    (before: "completed"), so it is the status the run started in, while the snapshot read
    right after it (the create answers once the worker has read the events) is terminal."""
    v2_http = Http(host.http.base, version="2.0")
    noop = v2_http.post("/runs", {"workflowId": "conformance-noop"})
    assert (noop.status, noop.body["status"]) == (201, "running"), noop.body
    assert host.status(noop.body["runId"]) == "completed"
    v1_noop = host.http.post("/v1/runs", {"workflowId": "conformance-noop"})
    assert (v1_noop.status, v1_noop.body["status"]) == (201, "running"), v1_noop.body
    assert host.http.get(v1_noop.body["statusUrl"]).body["status"] == "completed"
    events = read_sse(host.http.base, runs_path(noop.body["runId"], "/events"), until=1)
    assert [e.event for e in events] == ["run.created", "run.completed"]
    assert [e.id for e in events] == ["0", "1"]
    cancellable = v2_http.post("/runs", {"workflowId": "conformance-cancellable"})
    assert (cancellable.status, cancellable.body["status"]) == (201, "running")
    run = cancellable.body["runId"]
    cancel = v2_http.post(runs_path(run, "/cancel"), {})
    assert (cancel.status, cancel.body["status"]) == (200, "cancelled")
    unknown = v2_http.post("/runs", {"workflowId": "conformance-delay"})
    assert (unknown.status, unknown.body["error"]) == (404, "not_found")


def test_16a_c12_taint_is_sticky_and_blocks_the_approval(host: Host) -> None:
    b = Builder()
    run = host.create_approval_run()
    for envelope in (
        _gate_surface(b, "s-taint", create=True),
        _gate_surface(b, "s-taint", trust="untrusted"),
        _gate_surface(b, "s-taint", trust="trusted"),
    ):
        assert host.emit(run, envelope)[0] == 201
    refused = host.http.post(
        runs_path(run, "/interrupts/gate"), {"resumeValue": {"action": "accept"}}
    )
    assert 400 <= refused.status < 500
    assert "untrusted_content_blocks_approval" in refused.raw.decode()
    assert refused.status == 403 and refused.body["error"] == "forbidden"
    for _ in range(5):  # the run keeps waiting (checked over a second, as the suite does)
        assert host.status(run) == "waiting-approval"
        time.sleep(0.2)
    assert host.http.post(runs_path(run, "/cancel"), {}).body["status"] == "cancelled"


def test_16a_c12_trusted_control_run_resolves_after_a_restart(host: Host) -> None:
    b = Builder()
    run = host.create_approval_run()
    assert host.emit(run, _gate_surface(b, "s-ok", create=True))[0] == 201
    assert host.emit(run, _gate_surface(b, "s-ok", trust="trusted"))[0] == 201
    # the lifecycle is in the log: a restarted worker still knows the run waits at `gate`
    host.worker.stop()
    host.worker.start()
    host.http = wait_http(host.worker)
    assert host.status(run) == "waiting-approval"
    resolved = host.http.post(
        runs_path(run, "/interrupts/gate"), {"resumeValue": {"action": "accept", "key": SECRET}}
    )
    assert resolved.status == 200, resolved.body
    # the approval fixture's workflow ends at its gate: resolved, the run is completed
    assert resolved.body == {"runId": run, "nodeId": "gate", "status": "completed"}
    again = host.http.post(runs_path(run, "/interrupts/gate"), {"resumeValue": {}})
    assert (again.status, again.body["error"]) == (409, "interrupt_already_resolved")
    events = host.http.get(runs_path(run, "/events/poll?timeout=1")).body["events"]
    value = next(e for e in events if e["type"] == "interrupt.resolved")["payload"]["resumeValue"]
    assert value == {"action": "accept", "key": "[REDACTED:byok-1]"}
    assert SECRET not in json.dumps(events)
    assert events[-1]["type"] == "run.completed"
    assert host.http.post(runs_path(run, "/cancel"), {}).status == 409  # run_terminal
    late = host.emit(run, b.envelope(v2(b.sid("late"), [create_msg()])))
    assert late[0] == 409 and late[1]["error"] == "run_terminal"


def test_v2_interrupt_resolve_terminal_after_cancel(host: Host) -> None:
    """The suite's v2-interrupt-resolve-terminal (errors.md §One code per state, RFC 0213 §C),
    legs 1 and 3, with its requests (OpenWOP-Version: 2.0): suspend, cancel (200, then
    cancelled), resolve ⇒ 409 interrupt_already_resolved; the snapshot no longer offers the
    interrupt as pending; a resolve on an unknown run of the same tenant ⇒ 404 not_found."""
    v2_http = Http(host.http.base, version="2.0")
    run = host.create_approval_run()
    pending = v2_http.get(runs_path(run)).body["extensions"]["a2ui-stream.run"]["interrupts"]
    assert pending == [{"nodeId": "gate", "status": "pending"}]
    cancel = v2_http.post(runs_path(run, "/cancel"), {})
    assert cancel.status == 200 and host.status(run) == "cancelled"
    resolve = v2_http.post(
        runs_path(run, "/interrupts/gate"), {"resumeValue": {"action": "accept"}}
    )
    assert (resolve.status, resolve.body["error"]) == (409, "interrupt_already_resolved"), (
        resolve.body
    )
    after = v2_http.get(runs_path(run)).body["extensions"]["a2ui-stream.run"]["interrupts"]
    assert after == [{"nodeId": "gate", "status": "cancelled"}]
    tenant = run.split("/")[0]
    unknown = v2_http.post(
        runs_path(f"{tenant}/openwopconformanceunknown{uuid.uuid4().hex[:8]}", "/interrupts/gate"),
        {"resumeValue": {"action": "accept"}},
    )
    assert (unknown.status, unknown.body["error"]) == (404, "not_found")


def test_v2_interrupt_resolve_terminal_after_completion(host: Host) -> None:
    """The suite's v2-interrupt-resolve-terminal leg 2 and the conformance-approval fixture:
    suspend, resolve (accept) ⇒ 200 and the run is completed (the fixture ends at its gate;
    before, it stayed running), resolve again ⇒ 409 interrupt_already_resolved."""
    v2_http = Http(host.http.base, version="2.0")
    run = host.create_approval_run()
    first = v2_http.post(runs_path(run, "/interrupts/gate"), {"resumeValue": {"action": "accept"}})
    assert first.status == 200, first.body
    assert host.status(run) == "completed"
    again = v2_http.post(runs_path(run, "/interrupts/gate"), {"resumeValue": {"action": "accept"}})
    assert (again.status, again.body["error"]) == (409, "interrupt_already_resolved")
    snap = v2_http.get(runs_path(run)).body
    assert snap["extensions"]["a2ui-stream.run"]["interrupts"] == [
        {"nodeId": "gate", "status": "resolved"}
    ]
    assert "currentNodeId" not in snap


def test_openwop_client_runs_get_reads_the_snapshot(host: Host) -> None:
    """openwop-client 2.7.0 unchanged: runs_create, runs_get (before: KeyError('owner'): the
    snapshot lacked owner, workflowId and eventLogSchemaVersion), interrupts_resolve_by_run and
    runs_cancel against the worker, and the v1 snapshot's required fields."""
    client = OpenwopClient(host.http.base, TOKEN)
    created = client.runs_create(CreateRunRequest(workflowId="conformance-approval"))
    assert created.eventsUrl.endswith("/events") and created.status == "waiting-approval"
    snap = client.runs_get(created.runId)
    assert (snap.runId, snap.workflowId, snap.status) == (
        created.runId,
        "conformance-approval",
        "waiting-approval",
    )
    assert snap.owner.tenant == created.runId.split("/")[0] and snap.currentNodeId == "gate"
    assert snap.eventLogSchemaVersion == 3
    resolved = client.interrupts_resolve_by_run(
        created.runId, "gate", ResolveInterruptRequest(resumeValue={"action": "accept"})
    )
    assert (resolved.nodeId, resolved.status) == ("gate", "completed")
    done = client.runs_get(created.runId)
    assert (done.status, done.currentNodeId) == ("completed", None)
    v1 = host.http.get(runs_path(created.runId, v1=True)).body
    assert {"runId", "workflowId", "status"} <= set(v1) and v1["status"] == "completed"
    other = client.runs_create(CreateRunRequest(workflowId="conformance-approval"))
    assert client.runs_cancel(other.runId).status == "cancelled"


def test_openwop_client_runs_list_pages_and_filters(host: Host) -> None:
    """openwop-client 2.7.0 ``runs_list`` (RFC 0182; before: 405, GET /runs was not served):
    pages of full snapshots newest first, walked with next_cursor, every run once; the
    workflowId and status filters; a cursor the host did not mint is 400 validation_error."""
    client = OpenwopClient(host.http.base, TOKEN)
    workflow = f"list-{uuid.uuid4().hex[:8]}"
    made = [client.runs_create(CreateRunRequest(workflowId=workflow)).runId for _ in range(3)]
    assert client.runs_cancel(made[0]).status == "cancelled"  # its last event is the newest
    first = client.runs_list(limit=2, workflow_id=workflow)
    assert first is not None and len(first.runs) == 2 and first.next_cursor
    assert first.runs[0].runId == made[0] and first.runs[0].status == "cancelled"
    rest = client.runs_list(limit=2, workflow_id=workflow, cursor=first.next_cursor)
    assert rest is not None and rest.next_cursor is None and len(rest.runs) == 1
    listed = [r.runId for r in first.runs + rest.runs]
    assert sorted(listed) == sorted(made) and len(set(listed)) == 3
    for snap in first.runs + rest.runs:
        assert snap.workflowId == workflow and snap.eventLogSchemaVersion == 3
        assert snap.owner.tenant == snap.runId.split("/")[0]
    cancelled = client.runs_list(workflow_id=workflow, status="cancelled")
    assert cancelled is not None and [r.runId for r in cancelled.runs] == [made[0]]
    everything = client.runs_list(limit=200)
    assert everything is not None and set(made) <= {r.runId for r in everything.runs}
    with pytest.raises(WopError) as refused:
        client.runs_list(cursor="not-minted-here")
    assert refused.value.status == 400
    assert refused.value.envelope is not None
    assert refused.value.envelope.error == "validation_error"
    assert Http(host.http.base, token=None).get("/runs").status == 401


def test_a_concurrent_second_resolve_gets_409(host: Host) -> None:
    run = host.create_approval_run()
    statuses: list[int] = []

    def resolve() -> None:
        reply = host.http.post(runs_path(run, "/interrupts/gate"), {"resumeValue": 1})
        statuses.append(reply.status)

    threads = [threading.Thread(target=resolve) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(statuses) == [200, 409]


def _surface(host: Host, b: Builder, run: str, sid: str) -> None:
    payload = rfc0209_positive_payload()
    payload = v2(sid, payload["messages"])
    assert host.emit(run, b.envelope(payload))[0] == 201


def test_the_whole_loop_surface_action_resumes_topic_and_log(host: Host) -> None:
    b, run = Builder(), f"loop/{uuid.uuid4().hex}"
    sid = b.sid("loop")
    _surface(host, b, run, sid)
    action = {
        "surfaceId": sid,
        "sourceComponentId": "submit",
        "name": "resume",
        "context": {"name": "Ada " + SECRET},
    }
    accepted = host.http.post(runs_path(run, "/actions"), action)
    assert accepted.status == 201, accepted.body
    events = host.http.get(runs_path(run, "/events/poll?timeout=1")).body["events"]
    recorded = events[-1]
    assert recorded["type"] == "action.accepted"
    assert recorded["payload"]["context"] == {"name": "Ada [REDACTED:byok-1]"}
    resumes = asyncio.run(
        read_topic(host.broker.bootstrap, host.topic("resumes"), isolation="read_committed")
    )
    mine = [json.loads(r.value) for r in resumes if json.loads(r.value)["runId"] == run]
    assert len(mine) == 1
    assert mine[0]["value"] == {"name": "Ada [REDACTED:byok-1]"}
    assert mine[0]["eventId"] == recorded["eventId"] and mine[0]["name"] == "resume"
    assert SECRET not in b"".join(r.value for r in resumes).decode()


@pytest.mark.parametrize(
    ("case", "status", "code"),
    [
        ("not-a-button", 422, "envelope_refusal"),
        ("name-outside", 422, "envelope_refusal"),
        ("partial", 422, "envelope_refusal"),
        ("deleted", 404, "not_found"),
        ("context-outside", 422, "envelope_refusal"),
        ("untrusted", 403, "forbidden"),
    ],
)
def test_refused_actions_get_a_code_and_record_nothing(
    host: Host, case: str, status: int, code: str
) -> None:
    b, run = Builder(), f"refuse/{uuid.uuid4().hex}"
    sid = b.sid("r")
    _surface(host, b, run, sid)
    action = {
        "surfaceId": sid,
        "sourceComponentId": "submit",
        "name": "resume",
        "context": {"name": "x"},
    }
    if case == "not-a-button":
        action["sourceComponentId"] = "h"
    elif case == "name-outside":
        action["name"] = "openUrl"
    elif case == "partial":
        chunk = b.envelope(v2(sid, [components_msg()]))
        chunk["partial"] = {"index": 0, "total": 2, "isPartial": True}
        assert host.emit(run, chunk)[0] == 201
    elif case == "deleted":
        assert host.emit(run, b.envelope(v2(sid, [delete_msg()])))[0] == 201
    elif case == "context-outside":
        action["context"] = {"name": "x", "smuggled": "y"}
    elif case == "untrusted":
        assert host.emit(run, b.envelope(v2(sid, [components_msg()]), trust="untrusted"))[0] == 201
    before = host.http.get(runs_path(run, v1=True)).body["lastSequence"]
    refused = host.http.post(runs_path(run, "/actions"), action)
    assert (refused.status, refused.body["error"]) == (status, code), refused.body
    assert host.http.get(runs_path(run, v1=True)).body["lastSequence"] == before


def test_a_producer_cannot_approve_a_gate_or_forge_a_click(host: Host) -> None:
    """Issue 14 item 5: anyone who may publish envelopes may write the admission topic. A
    command record published there by hand (no gateway seal) is refused and records nothing;
    the same approval through the HTTP gateway is decided."""
    b = Builder()
    run = host.create_approval_run()
    sid = b.sid("forge")
    assert host.emit(run, _gate_surface(b, sid, create=True))[0] == 201
    last = max(e["sequence"] for e in _events(host, run))
    resolve: dict[str, Any] = {
        "runId": run,
        "command": {
            "type": "interrupt.resolve",
            "nodeId": "gate",
            "resumeValue": {"action": "accept"},
            "expectedSequence": last,
        },
    }
    click: dict[str, Any] = {
        "runId": run,
        "command": {
            "type": "action.submit",
            "surfaceId": sid,
            "sourceComponentId": "submit",
            "name": "resume",
            "context": {"injected": "by a producer"},
            "expectedSequence": last,
        },
    }
    for forged in (resolve, click):
        letter = asyncio.run(publish_raw(host.http, host.broker.bootstrap, forged))
        assert letter is not None, forged["command"]["type"]
        assert (letter["code"], letter["rule"]) == ("forbidden", "command-gateway")
    assert host.status(run) == "waiting-approval"
    types = [e["type"] for e in _events(host, run)]
    assert "interrupt.resolved" not in types and "action.accepted" not in types
    resolved = host.http.post(runs_path(run, "/interrupts/gate"), {"resumeValue": {"ok": 1}})
    assert resolved.status == 200, resolved.body
    assert host.status(run) == "completed"


def _events(host: Host, run: str) -> list[dict]:
    return list(host.http.get(runs_path(run, "/events/poll?timeout=1")).body["events"])


def test_openwop_client_discovery_poll_stream_and_fork(host: Host) -> None:
    """The rest of openwop-client 2.7.0's calls that map to a route this host serves, unchanged:
    discovery_capabilities (the v2 document: runList advertised, replay not), discovery_openapi
    (before this stop's route table: 404), runs_poll_events, runs_events (SSE) and runs_fork."""
    client = OpenwopClient(host.http.base, TOKEN)
    caps = client.discovery_capabilities()
    assert "2.0" in caps.protocolVersions and "runList" in caps.raw
    assert "replay" not in caps.raw
    openapi = client.discovery_openapi()
    assert openapi["openapi"].startswith("3.1") and "/runs/{runId}:fork" in openapi["paths"]
    created = client.runs_create(CreateRunRequest(workflowId="conformance-noop"))
    polled = client.runs_poll_events(created.runId, timeout_seconds=1)
    types = [e.type for e in polled.events]
    assert types[0] == "run.created" and types[-1] == "run.completed"
    assert (polled.isTerminal, polled.lastSequence) == (True, polled.events[-1].sequence)
    streamed = []
    for event in client.runs_events(created.runId, timeout_seconds=10, reconnect=False):
        streamed.append(event.type)
        if event.type == "run.completed":
            break
    assert streamed == types
    fork = client.runs_fork(created.runId, ForkRunRequest(mode="branch", fromSeq=1))
    assert (fork.sourceRunId, fork.mode) == (created.runId, "branch")
    child = client.runs_poll_events(fork.runId, timeout_seconds=1)
    assert [e.type for e in child.events][:1] == ["run.created"]
