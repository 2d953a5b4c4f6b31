"""Named cases for every server-free assertion of openwop-a2ui.md §16a, §16d and §16e, run
through the pure ``decide`` (the seam's 201 is ``Admitted``, its 422/409 a ``Refused``)."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from app.core.admission.decision import Admitted, Deduplicated, Refused, decide, event_id_for
from app.core.admission.policy import HostPolicy
from app.core.admission.refusal import CODES, HTTP_STATUS
from app.core.runlog.events import RecordedEvent
from app.core.runlog.run_state import RunState
from tests.core.admission_support import (
    BASIC,
    NOW,
    POSITIVE,
    RUN,
    V1_LATER,
    V1_SURFACE,
    Host,
    components_msg,
    create_msg,
    data_msg,
    delete_msg,
    envelope,
    record,
    rules,
    v2,
)

WARN = HostPolicy()
STRICT = HostPolicy(strictness="strict")
LEGACY = HostPolicy(schema_versions={"ui.a2ui-surface": 1})


def refused_code(outcome: object) -> str:
    assert isinstance(outcome, Refused), outcome
    return outcome.violation.code


# --- §A.1 version selects branch (floor 2) ------------------------------------------------


@pytest.mark.parametrize("policy", [WARN, STRICT], ids=["warn", "strict"])
def test_admission_a1_v2_positive_is_admitted_with_a_sequence(policy: HostPolicy) -> None:
    outcome = Host(policy).emit(envelope(copy.deepcopy(POSITIVE)))
    assert isinstance(outcome, Admitted)
    assert outcome.sequence == 0
    assert outcome.event["payload"]["version"] == 2


@pytest.mark.parametrize("policy", [WARN, STRICT], ids=["warn", "strict"])
def test_admission_a1_v2_envelope_with_v1_body_is_envelope_invalid(policy: HostPolicy) -> None:
    outcome = Host(policy).emit(envelope(copy.deepcopy(V1_SURFACE), schema_version=2))
    assert refused_code(outcome) == "envelope_invalid"
    assert isinstance(outcome, Refused)
    assert outcome.violation.rule == "branch"
    assert outcome.violation.details["branch"] == "payloadV2"


@pytest.mark.parametrize("policy", [WARN, STRICT], ids=["warn", "strict"])
def test_admission_a1_above_floor_is_unknown_schema_version(policy: HostPolicy) -> None:
    outcome = Host(policy).emit(envelope(v2("s-a13", create_msg("s-a13")), schema_version=3))
    assert refused_code(outcome) == "unknown_schema_version"
    assert isinstance(outcome, Refused)
    assert outcome.violation.rule == "floor"
    assert outcome.violation.details == {"kind": "ui.a2ui-surface", "schemaVersion": 3, "floor": 2}
    assert outcome.violation.path == "/envelope/schemaVersion"


def test_admission_a1_below_floor_strict_is_unknown_schema_version() -> None:
    outcome = Host(STRICT).emit(envelope(v2("s-a14", create_msg("s-a14")), schema_version=1))
    assert refused_code(outcome) == "unknown_schema_version"
    assert isinstance(outcome, Refused)
    assert outcome.violation.rule == "strictness"


def test_admission_a1_below_floor_warn_validates_as_v2_and_flags_drift() -> None:
    host = Host(WARN)
    outcome = host.emit(envelope(v2("s-a14", create_msg("s-a14")), schema_version=1))
    assert isinstance(outcome, Admitted)
    assert outcome.drift == 1
    assert outcome.event["payload"]["version"] == 2
    assert outcome.event["payload"]["driftFrom"] == 1
    # ... and then schemaVersion 1 + V1_SURFACE is validated as v2 too: envelope_invalid.
    later = host.emit(envelope(copy.deepcopy(V1_SURFACE), schema_version=1))
    assert refused_code(later) == "envelope_invalid"


def test_admission_a1_absent_schema_version_is_below_floor() -> None:
    assert (
        refused_code(Host(STRICT).emit(envelope(v2("s", create_msg("s")), schema_version=None)))
        == "unknown_schema_version"
    )
    assert isinstance(
        Host(WARN).emit(envelope(v2("s", create_msg("s")), schema_version=None)), Admitted
    )


# --- §C.9 fold guarded, legs 1-7 exactly ---------------------------------------------------


def test_admission_c9_fold_guarded_sequence() -> None:
    host = Host()
    steps = [
        ("fold-a", [components_msg("fold-a")], "envelope_invalid"),
        ("fold-b", [create_msg("fold-b"), components_msg("fold-b")], None),
        ("fold-b", [delete_msg("fold-b")], None),
        ("fold-b", [data_msg("fold-b")], "envelope_invalid"),
        ("fold-c", [create_msg("fold-c")], None),
        ("fold-c", [create_msg("fold-c")], "envelope_invalid"),
        ("fold-b", [create_msg("fold-b"), data_msg("fold-b")], None),
    ]
    sequences = []
    for number, (sid, messages, expected) in enumerate(steps, start=1):
        outcome = host.emit(envelope(v2(sid, *messages)))
        if expected is None:
            assert isinstance(outcome, Admitted), (number, outcome)
            sequences.append(outcome.sequence)
        else:
            assert isinstance(outcome, Refused), (number, outcome)
            assert outcome.violation.code == expected
            assert outcome.violation.rule == "fold"
    assert sequences == [0, 1, 2, 3]
    assert host.state().surface_status("fold-b") == "live"
    assert host.state().surface_status("fold-c") == "live"
    assert host.state().surface_status("fold-a") == "absent"


def test_admission_c9_fold_refusal_names_the_message_and_clause() -> None:
    outcome = Host().emit(
        envelope(v2("fold-x", create_msg("fold-x"), delete_msg("fold-x"), data_msg("fold-x")))
    )
    assert isinstance(outcome, Refused)
    v = outcome.violation
    assert v.path == "/envelope/payload/messages/2"
    assert v.details == {"rule": "fold", "surfaceId": "fold-x", "index": 2, "status": "deleted"}
    assert "§6 (iii)" in v.message and "updateDataModel" in v.message


# --- §A.2 cross-field rules ---------------------------------------------------------------


def test_admission_a2_foreign_create_catalog_is_envelope_invalid_and_equal_control_admits() -> None:
    host = Host()
    foreign = create_msg("s-cat")
    foreign["createSurface"]["catalogId"] = BASIC.replace("/basic/", "/other/")
    assert refused_code(host.emit(envelope(v2("s-cat", foreign)))) == "envelope_invalid"
    assert isinstance(host.emit(envelope(v2("s-cat", create_msg("s-cat")))), Admitted)


def test_admission_a2_surface_id_equality_then_success_proves_nothing_recorded() -> None:
    host = Host()
    before = host.state()
    outcome = host.emit(envelope(v2("s-eq", create_msg("s-eq"), components_msg("s-other"))))
    assert isinstance(outcome, Refused)
    v = outcome.violation
    assert (v.code, v.rule) == ("envelope_invalid", "surface-id-equality")
    assert v.details["index"] == 1 and v.details["rule"] == "surface-id-equality"
    assert v.path == "/envelope/payload/messages/1/updateComponents/surfaceId"
    assert host.state() == before  # refusal recorded nothing
    ok = host.emit(envelope(v2("s-eq", create_msg("s-eq"), components_msg("s-eq"))))
    assert isinstance(ok, Admitted) and ok.sequence == 0


def test_admission_a2_catalog_equality_rule_when_branch_admits_both() -> None:
    """The schema pins catalogId to one value today, so catalog-equality is reached only when the
    branch admits both ids; check the rule directly with the cross-field function."""
    from app.core.admission.cross_field import check_cross_field
    from app.core.admission.fold import kinds_of

    payload = v2("s", create_msg("s"))
    payload["catalogId"] = "urn:other"
    violation = check_cross_field(payload, kinds_of(payload["messages"]))
    assert violation is not None
    assert violation.rule == "catalog-equality"
    assert violation.details == {"rule": "catalog-equality", "index": 0, "catalogId": "urn:other"}
    assert violation.path == "/envelope/payload/messages/0/createSurface/catalogId"


# --- §C.11 recorded as recorded -------------------------------------------------------------


def _payload_bytes_in(event: RecordedEvent, payload: object) -> bool:
    return orjson.dumps(payload) in orjson.dumps(event["payload"])


def test_admission_c11_recorded_payload_is_byte_equal_with_key_order() -> None:
    # Scramble key order: the recorded bytes must follow the received order, not a sorted one.
    payload = dict(reversed(list(copy.deepcopy(POSITIVE).items())))
    raw = orjson.dumps(record(envelope(payload)))
    rec = orjson.loads(raw)
    outcome = decide(rec, None, WARN, rules(), now=NOW)
    assert isinstance(outcome, Admitted)
    emitted = orjson.dumps(rec["envelope"]["payload"])
    assert orjson.dumps(outcome.event["payload"]["envelope"]["payload"]) == emitted
    assert orjson.dumps(outcome.event["payload"]["envelope"]) == orjson.dumps(rec["envelope"])
    assert list(outcome.event["payload"]["envelope"]["payload"]) == list(payload)


def test_admission_c11_update_then_fork_prefix_carries_the_payload() -> None:
    from functools import reduce

    from app.core.admission.fold import apply

    host = Host()
    first = host.emit(envelope(copy.deepcopy(POSITIVE)))
    later = host.emit(envelope(v2("approve-brief", data_msg("approve-brief"))))
    assert isinstance(first, Admitted) and isinstance(later, Admitted)
    assert later.sequence > first.sequence
    fork = host.logs[RUN][: later.sequence]  # fork replay at F copies [0, F)
    assert any(_payload_bytes_in(e, POSITIVE) for e in fork)
    forked = reduce(apply, fork, RunState.initial(RUN))
    assert forked == first.state


def test_admission_c11_legacy_floor_1() -> None:
    host = Host(LEGACY)
    first = host.emit(envelope(copy.deepcopy(V1_SURFACE), schema_version=1))
    assert isinstance(first, Admitted)
    assert _payload_bytes_in(first.event, V1_SURFACE)
    later = host.emit(envelope(copy.deepcopy(V1_LATER), schema_version=1))
    assert isinstance(later, Admitted) and later.sequence > first.sequence
    surface = host.state().v1_surface
    assert surface is not None
    assert surface.last.sequence == later.sequence
    fork = host.logs[RUN][: later.sequence]
    assert any(_payload_bytes_in(e, V1_SURFACE) for e in fork)
    # At floor 1 a version-2 envelope is above the floor.
    assert refused_code(host.emit(envelope(v2("s", create_msg("s"))))) == "unknown_schema_version"


def test_admission_c11_legacy_unknown_catalog_version_is_unknown_schema_version() -> None:
    outcome = Host(LEGACY).emit(
        envelope({"catalogVersion": "9.9.9", "surface": {"components": []}}, schema_version=1)
    )
    assert refused_code(outcome) == "unknown_schema_version"


# --- §C.12 taint sticky ----------------------------------------------------------------------


def test_admission_c12_taint_is_sticky_and_untrusted_is_recorded() -> None:
    host = Host()
    sid = "s-taint"
    outcomes = [
        host.emit(envelope(v2(sid, create_msg(sid), components_msg(sid)), node_id="gate")),
        host.emit(envelope(v2(sid, components_msg(sid)), node_id="gate", trust="untrusted")),
        host.emit(envelope(v2(sid, components_msg(sid)), node_id="gate", trust="trusted")),
    ]
    assert all(isinstance(o, Admitted) for o in outcomes)
    trusts = [o.event["contentTrust"] for o in outcomes if isinstance(o, Admitted)]
    assert trusts == ["trusted", "untrusted", "trusted"]
    surface = host.state().surfaces[sid]
    assert surface.tainted is True
    assert host.state().tainted_surfaces_for_node("gate") == (sid,)


def test_admission_c12_control_trusted_surface_does_not_block() -> None:
    host = Host()
    sid = "s-ctl"
    assert isinstance(
        host.emit(envelope(v2(sid, create_msg(sid), components_msg(sid)), node_id="gate")), Admitted
    )
    assert isinstance(
        host.emit(envelope(v2(sid, components_msg(sid)), node_id="gate", trust="trusted")), Admitted
    )
    assert host.state().tainted_surfaces_for_node("gate") == ()


def test_admission_c12_taint_survives_delete_and_recreate() -> None:
    host = Host()
    sid = "s-t2"
    host.emit(envelope(v2(sid, create_msg(sid)), trust="untrusted", node_id="n1"))
    host.emit(envelope(v2(sid, delete_msg(sid))))
    host.emit(envelope(v2(sid, create_msg(sid)), node_id="n2"))
    assert host.state().surfaces[sid].tainted
    assert host.state().tainted_surfaces_for_node("n2") == (sid,)


# --- §16d replay, degrades, version refusal -------------------------------------------------


def test_admission_16d_same_correlation_other_type_is_conflict() -> None:
    host = Host()
    assert isinstance(host.emit(envelope(v2("s", create_msg("s")), correlation_id="X")), Admitted)
    outcome = host.emit(
        envelope(
            {"question": "?"}, kind="clarification.request", schema_version=None, correlation_id="X"
        )
    )
    assert refused_code(outcome) == "envelope_correlation_conflict"
    assert HTTP_STATUS["envelope_correlation_conflict"] == 409


def test_admission_16d_same_correlation_same_type_returns_original_and_records_nothing() -> None:
    host = Host()
    first = host.emit(envelope(v2("s", create_msg("s")), correlation_id="X"))
    assert isinstance(first, Admitted)
    state = host.state()
    again = host.emit(envelope(v2("s", create_msg("s")), correlation_id="X"))
    assert again == Deduplicated(first.sequence, first.event["eventId"], "X")
    assert host.state() is state
    assert len(host.logs[RUN]) == 1
    # Even a re-emission whose body would now be refused (createSurface on a live surface)
    # returns the cached outcome: E2 runs before the branch and the fold.
    assert isinstance(
        host.emit(envelope(v2("s", create_msg("s")), correlation_id="X")), Deduplicated
    )


def test_admission_16d_kind_not_in_catalog_is_unknown_envelope_kind() -> None:
    policy = HostPolicy(kinds=("clarification.request",))
    outcome = Host(policy).emit(envelope(copy.deepcopy(POSITIVE)))
    assert refused_code(outcome) == "unknown_envelope_kind"
    assert isinstance(outcome, Refused)
    assert outcome.violation.details == {
        "type": "ui.a2ui-surface",
        "kinds": ["clarification.request"],
    }


def test_admission_16d_empty_catalog_refuses_non_universal_but_knows_universal() -> None:
    host = Host(HostPolicy(kinds=()))
    assert refused_code(host.emit(envelope(copy.deepcopy(POSITIVE)))) == "unknown_envelope_kind"
    universal = host.emit(
        envelope({"question": "which?"}, kind="clarification.request", schema_version=None)
    )
    assert isinstance(universal, Admitted)
    assert universal.event["type"] == "clarification.request"
    assert universal.event["payload"]["version"] == 0


def test_admission_16d_unknown_vendor_kind_is_unknown_envelope_kind() -> None:
    outcome = Host().emit(envelope({}, kind="vendor.acme.thing", schema_version=None))
    assert refused_code(outcome) == "unknown_envelope_kind"


def test_admission_16d_version_refusal_unknown_catalog_version() -> None:
    v1_host = Host(HostPolicy(schema_versions={"ui.a2ui-surface": 1}))
    bad = {"catalogVersion": "9.9.9", "surface": {"components": []}}
    assert refused_code(v1_host.emit(envelope(bad, schema_version=1))) == "unknown_schema_version"


def test_admission_16d_shape_refusals_are_envelope_invalid_on_v1() -> None:
    host = Host(LEGACY)
    iframe = copy.deepcopy(V1_SURFACE)
    iframe["surface"]["components"].append({"component": "iframe", "src": "https://evil.example"})
    evil_target = copy.deepcopy(V1_SURFACE)
    evil_target["surface"]["components"][1]["action"]["target"] = "http://evil.example"
    payloads: list[dict[str, Any]] = [iframe, evil_target, {"surface": {"components": []}}]
    for payload in payloads:
        assert refused_code(host.emit(envelope(payload, schema_version=1))) == "envelope_invalid"


# --- §16e codes registered ------------------------------------------------------------------


@pytest.mark.parametrize("code", ["unknown_envelope_kind", "unknown_schema_version"])
def test_admission_16e_catalog_codes_are_registered(code: str) -> None:
    assert code in CODES
    assert HTTP_STATUS[code] == 422


# --- the recorded event -----------------------------------------------------------------------


def test_admission_recorded_event_shape() -> None:
    env = envelope(copy.deepcopy(POSITIVE), node_id="gate", correlation_id="corr-1")
    outcome = decide(record(env), None, WARN, rules(), now=NOW)
    assert isinstance(outcome, Admitted)
    event = outcome.event
    assert list(event) == [
        "eventId",
        "runId",
        "sequence",
        "type",
        "schemaVersion",
        "timestamp",
        "nodeId",
        "causationId",
        "contentTrust",
        "payload",
    ]
    assert event["eventId"] == event_id_for(RUN, 0)
    assert event["runId"] == RUN and event["timestamp"] == NOW and event["schemaVersion"] == 1
    assert event["causationId"] == "corr-1" and event["nodeId"] == "gate"
    assert event["payload"] == {"envelope": env, "version": 2, "trust": "trusted"}
    assert event["payload"]["envelope"] is env  # nothing to redact: the very object received


def test_admission_recorded_event_validates_against_our_schema() -> None:
    import jsonschema_rs

    from app.shell.schema_files import load_schema_documents

    validator = jsonschema_rs.validator_for(load_schema_documents()["recorded-event"])
    host = Host()
    for env in (
        envelope(copy.deepcopy(POSITIVE), node_id="gate"),
        envelope(v2("s2", create_msg("s2")), schema_version=1, trust="untrusted"),
    ):
        outcome = host.emit(env)
        assert isinstance(outcome, Admitted)
        validator.validate(outcome.event)


def test_admission_event_id_is_deterministic_and_in_grammar() -> None:
    import re

    ids = {event_id_for(RUN, s) for s in (0, 1, 10**9)}
    assert len(ids) == 3
    assert all(re.fullmatch(r"[A-Za-z0-9._~-]{16,128}", i) for i in ids)
    assert event_id_for(RUN, 5) == event_id_for(RUN, 5) != event_id_for(RUN + "x", 5)
    explicit = decide(
        record(envelope(copy.deepcopy(POSITIVE))),
        None,
        WARN,
        rules(),
        now=NOW,
        event_id="evt-given-0000000001",
    )
    assert isinstance(explicit, Admitted) and explicit.event["eventId"] == "evt-given-0000000001"


def test_admission_record_keyed_to_another_run_is_refused() -> None:
    outcome = decide(
        record(envelope(copy.deepcopy(POSITIVE))),
        RunState.initial("other/run-000000000000001"),
        WARN,
        rules(),
        now=NOW,
    )
    assert refused_code(outcome) == "record_key_mismatch"


def test_admission_shape_refusal_is_validation_error_with_pointer() -> None:
    env = envelope(copy.deepcopy(POSITIVE))
    del env["correlationId"]
    outcome = decide(record(env), None, WARN, rules(), now=NOW)
    assert refused_code(outcome) == "validation_error"
    assert isinstance(outcome, Refused)
    assert outcome.violation.path.startswith("/envelope")


def test_admission_excluded_affordance_message_is_actionable() -> None:
    payload = v2(
        "s",
        create_msg("s"),
        {
            "version": "v0.9",
            "updateComponents": {
                "surfaceId": "s",
                "components": [
                    {"id": "hero", "component": "Image", "url": "https://evil.example/x.png"}
                ],
            },
        },
    )
    outcome = Host().emit(envelope(payload))
    assert isinstance(outcome, Refused)
    v = outcome.violation
    assert v.code == "envelope_invalid"
    assert v.path == "/envelope/payload/messages/1/updateComponents/components/0"
    assert "hero" in v.message and "a2ui-surface-no-network-egress" in v.message


def test_admission_policy_rejects_kinds_it_cannot_validate() -> None:
    with pytest.raises(ValueError):
        HostPolicy(kinds=("vendor.acme.thing",))
    with pytest.raises(ValueError):
        HostPolicy(schema_versions={"ui.a2ui-surface": 3})
    with pytest.raises(ValueError):
        HostPolicy(strictness="lenient")  # type: ignore[arg-type]


def test_admission_encode_event_bytes_and_depth_limit() -> None:
    from app.core.admission.decision import encode_event

    env = envelope(copy.deepcopy(POSITIVE))
    outcome = decide(record(env), None, WARN, rules(), now=NOW)
    assert isinstance(outcome, Admitted)
    encoded = encode_event(outcome)
    assert isinstance(encoded, bytes)
    assert orjson.dumps(env["payload"]) in encoded
    deep: object = "x"
    for _ in range(300):
        deep = [deep]
    sid = "s-deep"
    deep_env = envelope(v2(sid, create_msg(sid), data_msg(sid, path="/d", value=deep)))
    # The schema leaves updateDataModel.value open; the limits step bounds it
    # (app.core.admission.limits).
    limited = decide(record(deep_env), None, WARN, rules(), now=NOW)
    assert isinstance(limited, Refused)
    assert (limited.violation.code, limited.violation.rule) == ("record_limit_exceeded", "depth")
    assert limited.violation.path.startswith("/envelope/payload/messages/1/updateDataModel/value/0")
    # encode_event stays the last guard for an event orjson cannot encode.
    event: RecordedEvent = {
        **outcome.event,
        "payload": {**outcome.event["payload"], "envelope": deep_env},
    }
    refused = encode_event(Admitted(event, outcome.state))
    assert isinstance(refused, Refused)
    assert (refused.violation.code, refused.violation.rule) == ("record_limit_exceeded", "depth")
