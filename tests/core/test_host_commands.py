"""Host commands (run lifecycle, interrupts, actions, fork) decided by the validator, and the
HTTP-side action check (issue 7; openwop-a2ui.md §7, §9). Everything goes through
``app.core.admission.validator.validate``, the function the worker calls per admission record."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from app.core.admission.command_seal import HEADER, seal
from app.core.admission.fold import apply
from app.core.admission.host_commands_call import ForkSource
from app.core.admission.policy import HostPolicy
from app.core.admission.validator import Append, AppendMany, Reject, SourceRecord, validate
from app.core.http.actions import check_action
from app.core.projection.surfaces import V1_SURFACE_ID, SurfaceKey, replay
from app.core.runlog.events import RecordedEvent
from app.core.runlog.keys import partition_for_run
from app.core.runlog.run_state import RunState
from app.shell.schema_files import load_schema_documents
from tests.core.admission_support import (
    NOW,
    V1_SURFACE,
    components_msg,
    create_msg,
    data_msg,
    delete_msg,
    envelope,
    rules,
    v2,
)

PARTITIONS = 3
SECRET = "sk-live-0123456789abcdef"
DOCS = load_schema_documents()
RECORDED = Draft202012Validator(DOCS["recorded-event"])
COMMAND = Draft202012Validator(DOCS["host-command"])
RESUME = Draft202012Validator(DOCS["resume"])


GATEWAY_KEY = b"test-gateway-key-of-at-least-32-bytes!"


class Run:
    """One run driven through ``validate`` as the validator loop would, keeping its log."""

    def __init__(self, run_id: str = "t/run-1", policy: HostPolicy | None = None) -> None:
        self.run_id = run_id
        self.policy = replace(
            policy or HostPolicy(secrets={run_id: (("key", SECRET),)}), command_key=GATEWAY_KEY
        )
        self.state: RunState | None = None
        self.log: list[RecordedEvent] = []
        self.offset = 0

    def send(self, record: dict[str, Any], fetched: Any = None) -> Any:
        """Decide ``record``; a command is sealed as the HTTP gateway seals it."""
        self.offset += 1
        value = orjson.dumps(record)
        source = SourceRecord(
            "a2ui.admission",
            partition_for_run(record["runId"], PARTITIONS),
            self.offset,
            record["runId"].encode(),
            value,
            ((HEADER, seal(GATEWAY_KEY, value)),) if "command" in record else (),
        )
        out = validate(
            source,
            lambda _run: self.state,
            self.policy,
            rules(),
            now=NOW,
            partitions=PARTITIONS,
            fetched=fetched or (lambda _s: None),
        )
        if isinstance(out, Append | AppendMany):
            self.state = out.state
            values = [out.value] if isinstance(out, Append) else [v for _, _, v in out.records]
            types = [out.event_type] if isinstance(out, Append) else list(out.types)
            assert len(types) == len(values)  # each record's a2ui-type header (validator_batch)
            for value, event_type in zip(values, types, strict=True):
                event = orjson.loads(value)
                assert RECORDED.is_valid(event), event
                assert event_type == event["type"]
                self.log.append(event)
        return out

    def command(self, **command: Any) -> Any:
        record = {"runId": self.run_id, "command": command}
        assert COMMAND.is_valid(record), record
        return self.send(record)

    def emit(self, env: dict[str, Any]) -> Any:
        return self.send({"runId": self.run_id, "envelope": env})

    @property
    def last(self) -> int:
        return self.log[-1]["sequence"]


def letter(out: Any) -> dict[str, Any]:
    assert isinstance(out, Reject), out
    return dict(orjson.loads(out.value))


def approval_run() -> Run:
    run = Run()
    out = run.command(type="run.create", workflowId="conformance-approval")
    assert isinstance(out, AppendMany)
    assert [e["type"] for e in run.log] == ["run.created", "node.suspended"]
    assert run.state is not None and run.state.lifecycle.status == "waiting-approval"
    return run


def test_create_suspends_the_approval_fixture_and_refuses_an_existing_run() -> None:
    run = approval_run()
    again = letter(run.command(type="run.create", workflowId="other"))
    assert again["code"] == "run_state_conflict"
    plain = Run("t/plain")
    plain.command(type="run.create", workflowId="anything")
    assert plain.state is not None and plain.state.lifecycle.status == "running"


def test_taint_blocks_the_approval_and_the_interrupt_stays_pending() -> None:
    """§16a §C.12: (i) no trust, (ii) untrusted, (iii) trusted: all recorded; the resolve is
    refused with untrusted_content_blocks_approval and the run still waits."""
    run = approval_run()
    sid = "s-taint"
    for env in (
        envelope(v2(sid, create_msg(sid), components_msg(sid)), node_id="gate"),
        envelope(v2(sid, components_msg(sid)), node_id="gate", trust="untrusted"),
        envelope(v2(sid, components_msg(sid)), node_id="gate", trust="trusted"),
    ):
        assert isinstance(run.emit(env), Append)
    refused = letter(
        run.command(
            type="interrupt.resolve",
            nodeId="gate",
            resumeValue={"action": "accept"},
            expectedSequence=run.last,
        )
    )
    assert refused["code"] == "forbidden"
    assert refused["details"]["reason"] == "untrusted_content_blocks_approval"
    assert "untrusted_content_blocks_approval" in refused["message"]
    assert run.state is not None and run.state.lifecycle.status == "waiting-approval"
    assert run.state.lifecycle.interrupt("gate") == ("pending", 1)


def test_a_trusted_control_run_resolves_once_and_redacts_the_resume_value() -> None:
    run = approval_run()
    sid = "s-ok"
    run.emit(envelope(v2(sid, create_msg(sid), components_msg(sid)), node_id="gate"))
    run.emit(envelope(v2(sid, components_msg(sid)), node_id="gate", trust="trusted"))
    seen = run.last
    out = run.command(
        type="interrupt.resolve",
        nodeId="gate",
        resumeValue={"action": "accept", "apiKey": SECRET},
        expectedSequence=seen,
    )
    assert isinstance(out, AppendMany) and len(out.resumes) == 1
    resolved, completed = run.log[-2:]
    assert resolved["type"] == "interrupt.resolved"
    # the approval fixture's workflow ends at its gate: the run completes with the resolve
    assert (completed["type"], completed["payload"]) == ("run.completed", {})
    assert RECORDED.is_valid(completed)
    assert SECRET not in orjson.dumps(resolved).decode()
    assert resolved["payload"]["resumeValue"]["apiKey"] == "[REDACTED:key]"
    resume = orjson.loads(out.resumes[0])
    assert RESUME.is_valid(resume) and resume["value"]["action"] == "accept"
    assert SECRET not in out.resumes[0].decode()
    assert run.state is not None and run.state.lifecycle.status == "completed"
    # any later resolve, concurrent or not, meets a completed run: 409 (errors.md §One code
    # per state; the suite's v2-interrupt-resolve-terminal leg 2)
    for expected in (seen, run.last):
        again = run.command(
            type="interrupt.resolve", nodeId="gate", resumeValue=1, expectedSequence=expected
        )
        assert letter(again)["code"] == "interrupt_already_resolved"


@pytest.mark.parametrize(
    ("workflow", "types", "status"),
    [
        ("conformance-approval", ["run.created", "node.suspended"], "waiting-approval"),
        ("conformance-noop", ["run.created", "run.completed"], "completed"),
        ("conformance-cancellable", ["run.created"], "running"),
        ("anything-else", ["run.created"], "running"),
    ],
)
def test_the_fixture_workflows(workflow: str, types: list[str], status: str) -> None:
    """The conformance fixtures (issue 17): noop completes at once (it blocked every v2 SSE,
    Last-Event-ID, poll-cursor and stream-mode scenario), cancellable runs until cancelled."""
    run = Run()
    assert isinstance(run.command(type="run.create", workflowId=workflow), AppendMany)
    assert [e["type"] for e in run.log] == types
    assert run.state is not None and run.state.lifecycle.status == status
    if workflow == "conformance-cancellable":
        assert isinstance(run.command(type="run.cancel"), AppendMany)
        assert run.state.lifecycle.status == "cancelled"


def test_a_cancelled_run_takes_no_envelope_command_or_second_cancel() -> None:
    run = approval_run()
    assert isinstance(run.command(type="run.cancel"), AppendMany)
    assert run.state is not None and run.state.lifecycle.status == "cancelled"
    sid = "s-late"
    assert letter(run.emit(envelope(v2(sid, create_msg(sid)))))["code"] == "run_terminal"
    assert letter(run.command(type="run.cancel"))["code"] == "run_terminal"
    # errors.md §One code per state (the suite's v2-interrupt-resolve-terminal): the run's end
    # closed its interrupt, so a resolve is 409 interrupt_already_resolved, not run_terminal
    resolve = letter(run.command(type="interrupt.resolve", nodeId="gate", resumeValue=1))
    assert resolve["code"] == "interrupt_already_resolved"
    assert resolve["details"] == {"nodeId": "gate", "runStatus": "cancelled"}
    # by the status alone (an ended run's state is compacted, its interrupts gone): any node
    nowhere = run.command(type="interrupt.resolve", nodeId="elsewhere", resumeValue=1)
    assert letter(nowhere)["code"] == "interrupt_already_resolved"


def _surface_run(*extra: dict[str, Any]) -> Run:
    run = Run()
    run.emit(envelope(v2("s", create_msg("s"), components_msg("s"), data_msg("s"))))
    for env in extra:
        run.emit(env)
    return run


def _action(run: Run, **overrides: Any) -> Any:
    projection = replay(run.log)
    surface = projection.surfaces.get(SurfaceKey(run.run_id, overrides.get("surfaceId", "s")))
    command = {
        "type": "action.submit",
        "surfaceId": "s",
        "sourceComponentId": "submit",
        "name": "resume",
        "context": {"name": "Ada " + SECRET},
        "expectedSequence": surface.sequence if surface is not None else 0,
        **overrides,
    }
    return run.command(**command)


def test_an_accepted_action_is_recorded_redacted_and_published_for_the_orchestrator() -> None:
    run = _surface_run()
    out = _action(run)
    assert isinstance(out, AppendMany)
    accepted = run.log[-1]
    assert accepted["type"] == "action.accepted"
    assert accepted["payload"]["context"] == {"name": "Ada [REDACTED:key]"}
    resume = orjson.loads(out.resumes[0])
    assert RESUME.is_valid(resume) and resume["name"] == "resume" and resume["surfaceId"] == "s"


@pytest.mark.parametrize(
    ("extra", "overrides", "code", "rule"),
    [
        ((), {"name": "deleteAll"}, "action_refused", "action-confinement"),
        ((), {"surfaceId": "nope"}, "not_found", "surface-live"),
        ((envelope(v2("s", delete_msg("s"))),), {}, "not_found", "surface-live"),
        (
            (
                envelope(
                    v2("s", components_msg("s")),
                    partial={"index": 0, "total": 2, "isPartial": True},
                ),
            ),
            {},
            "action_refused",
            "surface-final",
        ),
        ((envelope(v2("s", components_msg("s")), trust="untrusted"),), {}, "forbidden", None),
        ((), {"expectedSequence": 99}, "run_state_conflict", "surface-unchanged"),
    ],
)
def test_the_validator_refuses_actions_it_must_not_record(
    extra: tuple[dict[str, Any], ...], overrides: dict[str, Any], code: str, rule: str | None
) -> None:
    run = _surface_run(*extra)
    if overrides.get("name") == "deleteAll":  # the schema already refuses it on the wire
        record = {
            "runId": run.run_id,
            "command": {
                "type": "action.submit",
                "surfaceId": "s",
                "sourceComponentId": "submit",
                "name": "deleteAll",
                "expectedSequence": 0,
            },
        }
        assert not COMMAND.is_valid(record)
        refused = letter(run.send(record))
    else:
        refused = letter(_action(run, **overrides))
    assert refused["code"] == code
    if rule is not None:
        assert refused["rule"] == rule
    assert run.log[-1]["type"] != "action.accepted"


# -- the HTTP-side check against the materialized surface --------------------------------------


def _materialized(run: Run, sid: str = "s") -> Any:
    return replay(run.log).surfaces.get(SurfaceKey(run.run_id, sid))


@pytest.mark.parametrize(
    ("submission", "code", "rule"),
    [
        ({"sourceComponentId": "h", "name": "resume"}, "action_refused", "component-button"),
        ({"sourceComponentId": "submit", "name": "exchange"}, "action_refused", "component-button"),
        (
            {"sourceComponentId": "submit", "name": "openUrl"},
            "action_refused",
            "action-confinement",
        ),
        (
            {"sourceComponentId": "submit", "name": "resume", "context": {"other": 1}},
            "action_refused",
            "context-path",
        ),
        (
            {"sourceComponentId": "submit", "name": "resume", "context": []},
            "action_refused",
            "context-path",
        ),
    ],
)
def test_check_action_refuses_with_a_code(submission: dict[str, Any], code: str, rule: str) -> None:
    refused = check_action(_materialized(_surface_run()), {"surfaceId": "s", **submission})
    assert not isinstance(refused, dict)
    assert (refused.code, refused.rule) == (code, rule)


def test_check_action_resolves_the_buttons_context_against_the_data_model() -> None:
    surface = _materialized(_surface_run())
    ok = check_action(
        surface,
        {
            "surfaceId": "s",
            "sourceComponentId": "submit",
            "name": "resume",
            "context": {"name": "A"},
        },
    )
    assert ok == {"context": {"name": "A"}}
    # a Button bound to a path the data model does not hold is refused
    content = dict(surface.content)
    components = dict(content["components"])
    button = dict(components["submit"])
    button["action"] = {"event": {"name": "resume", "context": {"x": {"path": "/missing/leaf"}}}}
    components["submit"] = button
    content["components"] = components
    outside = check_action(
        surface._replace(content=content),
        {"surfaceId": "s", "sourceComponentId": "submit", "name": "resume", "context": {"x": 1}},
    )
    assert not isinstance(outside, dict) and outside.rule == "context-path"


def test_check_action_on_a_partial_deleted_or_untrusted_surface() -> None:
    base = _materialized(_surface_run())
    submit = {"surfaceId": "s", "sourceComponentId": "submit", "name": "resume"}
    partial = check_action(base._replace(partial=True), submit)
    deleted = check_action(base._replace(status="deleted"), submit)
    tainted = check_action(base._replace(trust="untrusted"), submit)
    assert not isinstance(partial, dict) and partial.rule == "surface-final"
    assert not isinstance(deleted, dict) and deleted.code == "not_found"
    assert not isinstance(tainted, dict) and tainted.code == "forbidden"
    # the rule the validator's re-check names
    # (app.core.admission.host_commands_action); before: surface-trust
    assert tainted.rule == "untrusted-blocks-approval"
    assert check_action(None, submit).code == "not_found"  # type: ignore[union-attr]


def test_v1_action_button_and_field_ids() -> None:
    run = Run(policy=HostPolicy(schema_versions={"ui.a2ui-surface": 1}))
    assert isinstance(run.emit(envelope(V1_SURFACE, schema_version=1)), Append)
    surface = _materialized(run, V1_SURFACE_ID)
    go = {"surfaceId": V1_SURFACE_ID, "sourceComponentId": "go", "name": "resume"}
    assert check_action(surface, go) == {"context": {}}
    wrong = check_action(surface, {**go, "name": "exchange"})
    assert not isinstance(wrong, dict) and wrong.rule == "component-button"
    extra = check_action(surface, {**go, "context": {"notafield": 1}})
    assert not isinstance(extra, dict) and extra.rule == "context-path"
    out = run.command(
        type="action.submit",
        surfaceId=V1_SURFACE_ID,
        sourceComponentId="go",
        name="resume",
        context={},
        expectedSequence=surface.sequence,
    )
    assert isinstance(out, AppendMany)


# -- fork --------------------------------------------------------------------------------------


def test_fork_copies_the_prefix_as_recorded_and_refuses_a_forged_source() -> None:
    source = _surface_run(envelope(v2("s", data_msg("s"))))
    child = Run("t/child")
    fork = {
        "type": "run.fork",
        "sourceRunId": source.run_id,
        "fromSeq": 1,
        "mode": "replay",
        "source": {"partition": 0, "firstOffset": 5, "lastOffset": 5},
    }
    record = {"runId": child.run_id, "command": fork}
    assert COMMAND.is_valid(record)
    out = child.send(record, fetched=lambda s: source.log[: s.from_seq])
    assert isinstance(out, AppendMany)
    assert [e["type"] for e in child.log] == ["ui.a2ui-surface", "run.forked"]
    assert child.log[0]["payload"] == source.log[0]["payload"]
    assert child.log[0]["runId"] == child.run_id
    # the child's state is exactly the fold of the prefix
    expected = RunState.initial(child.run_id)
    for event in child.log:
        expected = apply(expected, event)
    assert child.state == expected
    forged = Run("t/forged")
    other = [{**source.log[0], "runId": "t/someone-else"}]
    refused = letter(forged.send(record | {"runId": forged.run_id}, fetched=lambda _s: other))
    assert refused["code"] == "fork_point_invalid"
    missing = letter(Run("t/m").send(record | {"runId": "t/m"}, fetched=lambda _s: None))
    assert missing["code"] == "fork_point_invalid"


def _fork_of(source: Run, child: Run, lineage: list[str] | None = None) -> None:
    fork: dict[str, Any] = {
        "type": "run.fork",
        "sourceRunId": source.run_id,
        "fromSeq": 1,
        "mode": "branch",
        "source": {"partition": 0, "firstOffset": 5, "lastOffset": 5},
    }
    if lineage is not None:
        fork["sourceLineage"] = lineage
    record = {"runId": child.run_id, "command": fork}
    assert COMMAND.is_valid(record)
    assert isinstance(child.send(record, fetched=lambda s: source.log[: s.from_seq]), AppendMany)


def test_a_fork_inherits_the_secrets_of_every_run_it_descends_from() -> None:
    """Item 6b: a branch recorded its parent's run-scoped secrets raw."""
    parent_secret, grand_secret = "sk_parent_0123456789", "sk_grand_0123456789"
    policy = HostPolicy(
        secrets={"t/grand": (("g", grand_secret),), "t/parent": (("p", parent_secret),)}
    )
    grand = Run("t/grand", policy)
    grand.emit(envelope(v2("s", create_msg("s"), components_msg("s"))))
    parent = Run("t/parent", policy)
    _fork_of(grand, parent)
    assert parent.state is not None and parent.state.lifecycle.lineage == ("t/grand",)
    child = Run("t/child", policy)
    _fork_of(parent, child, lineage=["t/grand"])  # the gateway names the source's ancestors
    assert child.state is not None
    assert child.state.lifecycle.lineage == ("t/parent", "t/grand")
    assert child.log[-1]["payload"]["lineage"] == ["t/parent", "t/grand"]
    # the child's state, rebuilt from its log, knows the lineage too
    rebuilt = RunState.initial(child.run_id)
    for event in child.log:
        rebuilt = apply(rebuilt, event)
    assert rebuilt == child.state
    update = envelope(v2("s", data_msg("s", value={"a": parent_secret, "b": grand_secret})))
    assert isinstance(child.emit(update), Append)
    recorded = orjson.dumps(child.log[-1]).decode()
    assert parent_secret not in recorded and grand_secret not in recorded
    assert "[REDACTED:p]" in recorded and "[REDACTED:g]" in recorded
    # and a refusal of the child's is scrubbed with them (its dead letter)
    bad = envelope(v2("s", create_msg("s")))  # the surface is live: a fold refusal
    bad["payload"]["reasoning"] = parent_secret
    assert parent_secret not in letter(child.emit(bad))["original"]["base64"]
    refused = child.emit(bad)
    assert isinstance(refused, Reject) and parent_secret.encode() not in refused.value


def test_a_fork_refuses_a_malformed_source_lineage() -> None:
    source = _surface_run(envelope(v2("s", data_msg("s"))))
    child = Run("t/child-2")
    fork = {
        "type": "run.fork",
        "sourceRunId": source.run_id,
        "fromSeq": 1,
        "mode": "branch",
        "source": {"partition": 0, "firstOffset": 5, "lastOffset": 5},
        "sourceLineage": ["t/ok", "not a run id"],
    }
    out = child.send({"runId": child.run_id, "command": fork}, fetched=lambda s: source.log[:1])
    assert letter(out)["path"] == "/command/sourceLineage"


def test_fork_source_is_hashable_for_the_shells_prefetch() -> None:
    assert {ForkSource("r", 1, 0, 2, 3): 1}[ForkSource("r", 1, 0, 2, 3)] == 1


# --- who may issue a host command (issue 14 item 5) ---------------------------------------------


def _forged(run: Run, value: bytes, headers: tuple[tuple[str, bytes], ...]) -> dict[str, Any]:
    run.offset += 1
    source = SourceRecord(
        "a2ui.admission",
        partition_for_run(run.run_id, PARTITIONS),
        run.offset,
        run.run_id.encode(),
        value,
        headers,
    )
    out = validate(
        source, lambda _r: run.state, run.policy, rules(), now=NOW, partitions=PARTITIONS
    )
    return letter(out)


def test_only_a_sealed_command_resolves_an_interrupt() -> None:
    """A producer that may publish envelopes (so it may write the admission topic) cannot
    approve a gate: without the gateway's seal, with another key's, or with the seal of other
    bytes, the resolve is refused as forbidden and the interrupt stays pending."""
    run = approval_run()
    resolve = {
        "runId": run.run_id,
        "command": {
            "type": "interrupt.resolve",
            "nodeId": "gate",
            "resumeValue": {"action": "accept"},
            "expectedSequence": run.last,
        },
    }
    value = orjson.dumps(resolve)
    other = orjson.dumps({**resolve, "runId": "t/other-run"})
    for headers in (
        (),
        ((HEADER, b""),),
        ((HEADER, seal(b"not-the-deployment-key-but-32-bytes!", value)),),
        ((HEADER, seal(GATEWAY_KEY, other)),),  # a seal of another run's command
        ((HEADER, seal(GATEWAY_KEY, value)), (HEADER, seal(GATEWAY_KEY, value))),
        (("other-header", seal(GATEWAY_KEY, value)),),
    ):
        refused = _forged(run, value, headers)
        assert (refused["code"], refused["rule"]) == ("forbidden", "command-gateway"), headers
        assert run.state is not None and run.state.lifecycle.interrupt("gate") == ("pending", 1)
    # an action, too
    action = orjson.dumps(
        {
            "runId": run.run_id,
            "command": {
                "type": "action.submit",
                "surfaceId": "s",
                "sourceComponentId": "submit",
                "name": "resume",
                "context": {"anything": "at all"},
                "expectedSequence": run.last,
            },
        }
    )
    assert _forged(run, action, ())["rule"] == "command-gateway"
    # the same record sealed by the gateway is decided
    assert isinstance(run.send(resolve), AppendMany)
    assert run.state is not None
    gate = run.state.lifecycle.interrupt("gate")
    assert gate is not None and gate[0] == "resolved"


def test_a_policy_without_a_gateway_key_accepts_no_command_and_prints_no_secret() -> None:
    run = Run(policy=HostPolicy(secrets={"t/run-1": (("key", SECRET),)}))
    run.policy = replace(run.policy, command_key=None)
    value = orjson.dumps({"runId": run.run_id, "command": {"type": "run.cancel"}})
    refused = _forged(run, value, ((HEADER, seal(GATEWAY_KEY, value)),))
    assert refused["rule"] == "command-gateway"
    shown = repr(replace(run.policy, command_key=GATEWAY_KEY))
    assert SECRET not in shown and GATEWAY_KEY.decode() not in shown
