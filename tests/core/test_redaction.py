"""SR-1 redaction (openwop-a2ui.md §14): the pure function and its place in ``decide``."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.admission.decision import Admitted, Refused, decide
from app.core.admission.policy import SURFACE_KIND, HostPolicy
from app.core.admission.redaction import prepare, redact, redact_text
from app.core.runlog.run_state import RunState
from tests.core.admission_support import (
    NOW,
    POSITIVE,
    RUN,
    V1_SURFACE,
    components_msg,
    create_msg,
    data_msg,
    envelope,
    record,
    rules,
    v2,
)

KEY = "sk_live_0123456789abcdef"


def _policy(*secrets: tuple[str, str]) -> HostPolicy:
    return HostPolicy(secrets={RUN: tuple(secrets)})


@pytest.mark.parametrize(
    ("text", "secrets", "expected"),
    [
        ("token sk_live_0123456789abcdef end", [("k", KEY)], "token [REDACTED:k] end"),
        ("two abcdefgh and abcdefgh", [("a", "abcdefgh")], "two [REDACTED:a] and [REDACTED:a]"),
        ("short 1234567 stays", [("s", "1234567")], "short 1234567 stays"),
        # longest first: the long secret contains the short one
        (
            "pw=hunter22hunter22!",
            [("short", "hunter22"), ("long", "hunter22hunter22")],
            "pw=[REDACTED:long]!",
        ),
        # overlapping occurrences of two secrets merge: nothing of either survives
        ("xxABCDEFGHIJKLMNOPxx", [("a", "ABCDEFGHIJ"), ("b", "GHIJKLMNOP")], "xx[REDACTED:a]xx"),
        ("no secret here", [("k", KEY)], "no secret here"),
        ("aaxZcharsss", [("r", "x.chars+")], "aaxZcharsss"),  # substring, not a regex
        ("a x.chars*[ b", [("r", "x.chars*[")], "a [REDACTED:r] b"),
    ],
)
def test_redaction_text_table(text: str, secrets: list[tuple[str, str]], expected: str) -> None:
    assert redact_text(text, prepare(secrets)) == expected


def test_redaction_prepare_orders_longest_first_and_drops_short_and_repeated() -> None:
    prepared = prepare([("a", "12345678"), ("b", "1234"), ("c", "123456789012"), ("d", "12345678")])
    assert [(value, sid) for value, sid, _ in prepared] == [
        ("123456789012", "c"),
        ("12345678", "a"),
    ]


def test_redaction_walks_keys_values_nested_and_preserves_order() -> None:
    secrets = prepare([("k", KEY)])
    value = {"z": [1, {"deep": [f"x{KEY}"]}], KEY: True, "a": None, "n": 1.5}
    out = redact(value, secrets)
    assert list(out) == ["z", "[REDACTED:k]", "a", "n"]
    assert out["z"][1]["deep"] == ["x[REDACTED:k]"]
    assert value[KEY] is True  # the input is not mutated
    assert KEY.encode() not in orjson.dumps(out)


def test_redaction_returns_the_same_object_when_nothing_matches() -> None:
    value = copy.deepcopy(POSITIVE)
    assert redact(value, prepare([("k", KEY)])) is value
    assert redact(value, ()) is value


def test_redaction_secret_needing_json_escape_is_still_found() -> None:
    secret = 'quote"back\\slash'
    out = redact({"t": f"<{secret}>"}, prepare([("q", secret)]))
    assert out == {"t": "<[REDACTED:q]>"}


def test_redaction_is_iterative_on_deep_values() -> None:
    deep: object = KEY
    for _ in range(5000):
        deep = [deep]
    out = redact(deep, prepare([("k", KEY)]))
    for _ in range(5000):
        assert isinstance(out, list)
        out = out[0]
    assert out == "[REDACTED:k]"


_SECRETISH = st.text(alphabet="abcsk_live0123456789ef", max_size=40)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _SECRETISH,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_SECRETISH, inner, max_size=4),
        max_leaves=20,
    )
)
def test_redaction_no_secret_survives(value: object) -> None:
    secrets = prepare([("k", "sk_live_0123"), ("e", "0123456789ef")])
    blob = orjson.dumps(redact(value, secrets))
    assert b"sk_live_0123" not in blob and b"0123456789ef" not in blob


# --- SR-1 inside decide ------------------------------------------------------------------------


def _admit(payload: dict[str, object], policy: HostPolicy, **kw: Any) -> Admitted:
    outcome = decide(record(envelope(payload, **kw)), None, policy, rules(), now=NOW)
    assert isinstance(outcome, Admitted), outcome
    return outcome


def test_redaction_secret_in_reasoning() -> None:
    payload = {"reasoning": f"I used {KEY} to look it up", **v2("s", create_msg("s"))}
    event = _admit(payload, _policy(("byok-1", KEY))).event
    assert (
        event["payload"]["envelope"]["payload"]["reasoning"]
        == "I used [REDACTED:byok-1] to look it up"
    )
    assert list(event["payload"]["envelope"]["payload"]) == list(payload)
    assert KEY.encode() not in orjson.dumps(event)


def test_redaction_secret_in_data_model_value() -> None:
    payload = v2("s", create_msg("s"), data_msg("s", path="/token", value={"api": KEY}))
    event = _admit(payload, _policy(("byok-1", KEY))).event
    body = event["payload"]["envelope"]["payload"]["messages"][1]["updateDataModel"]
    assert body["value"] == {"api": "[REDACTED:byok-1]"}


def test_redaction_secret_in_component_text() -> None:
    msg = components_msg("s")
    msg["updateComponents"]["components"][1]["text"] = f"Key: {KEY}"
    event = _admit(v2("s", create_msg("s"), msg), _policy(("byok-1", KEY))).event
    comp = event["payload"]["envelope"]["payload"]["messages"][1]["updateComponents"]["components"][
        1
    ]
    assert comp == {
        "id": "h",
        "component": "Text",
        "text": "Key: [REDACTED:byok-1]",
        "variant": "h2",
    }


def test_redaction_short_secret_untouched_and_envelope_byte_equal() -> None:
    payload = {"reasoning": "pin 1234567 here", **v2("s", create_msg("s"))}
    env = envelope(payload)
    outcome = decide(record(env), None, _policy(("pin", "1234567")), rules(), now=NOW)
    assert isinstance(outcome, Admitted)
    assert orjson.dumps(outcome.event["payload"]["envelope"]) == orjson.dumps(env)


def test_redaction_other_runs_secrets_do_not_apply() -> None:
    payload = {"reasoning": KEY, **v2("s", create_msg("s"))}
    policy = HostPolicy(secrets={"another/run-0000000000000001": (("k", KEY),)})
    assert _admit(payload, policy).event["payload"]["envelope"]["payload"]["reasoning"] == KEY


def test_redaction_refusal_message_does_not_leak_the_secret() -> None:
    sid = f"s-{KEY}"
    outcome = decide(
        record(envelope(v2(sid, components_msg(sid)))), None, _policy(("k", KEY)), rules(), now=NOW
    )
    assert isinstance(outcome, Refused)
    assert KEY not in orjson.dumps(outcome.violation.to_dict()).decode()


# --- identifiers: refused, never redacted (issue 14 item 2) ------------------------------------

SECRET_RUN = f"tenant-a/run-{KEY}"


def _with_id(where: str) -> dict[str, object]:
    """An admission record whose identifier ``where`` holds the secret."""
    sid = "s"
    payload = v2(sid, create_msg(sid), components_msg(sid))
    env = envelope(payload)
    components = payload["messages"][1]["updateComponents"]["components"]
    run_id = RUN
    if where == "runId":
        run_id = SECRET_RUN
    elif where in ("correlationId", "envelopeId"):
        env[where] = f"c-{KEY}"
    elif where == "nodeId":
        env["nodeId"] = f"n-{KEY}"
    elif where == "surfaceId":
        stamped = f"s-{KEY}"
        payload["surfaceId"] = stamped
        for message in payload["messages"]:
            next(iter(message[k] for k in message if k != "version"))["surfaceId"] = stamped
    elif where == "component-id":
        components[2]["id"] = f"f{KEY}"
        components[0]["children"][1] = f"f{KEY}"
    elif where == "children":
        components[0]["children"][0] = f"h{KEY}"
    elif where == "child":
        components[4]["child"] = f"l{KEY}"
    return record(env, run_id)


@pytest.mark.parametrize(
    ("where", "path"),
    [
        ("runId", "/runId"),
        ("correlationId", "/envelope/correlationId"),
        ("envelopeId", "/envelope/envelopeId"),
        ("nodeId", "/envelope/nodeId"),
        ("surfaceId", "/envelope/payload/surfaceId"),
        ("component-id", "/envelope/payload/messages/1/updateComponents/components/0/children/1"),
        ("children", "/envelope/payload/messages/1/updateComponents/components/0/children/0"),
        ("child", "/envelope/payload/messages/1/updateComponents/components/4/child"),
    ],
)
def test_identifier_holding_a_secret_is_refused_never_redacted(where: str, path: str) -> None:
    rec = _with_id(where)
    policy = HostPolicy(secrets={RUN: (("k", KEY),), SECRET_RUN: (("k", KEY),)})
    before = RunState.initial(rec["runId"])  # type: ignore[arg-type]
    outcome = decide(rec, before, policy, rules(), now=NOW)
    assert isinstance(outcome, Refused), outcome
    violation = outcome.violation
    assert (violation.code, violation.rule, violation.path) == (
        "envelope_invalid",
        "identifier-secret",
        path,
    )
    assert "'k'" in violation.message and path in violation.message
    assert KEY not in orjson.dumps(violation.to_dict()).decode()


def test_a_v1_component_id_holding_a_secret_is_refused() -> None:
    payload = copy.deepcopy(V1_SURFACE)
    payload["surface"]["components"][1]["id"] = f"name{KEY}"
    policy = HostPolicy(schema_versions={SURFACE_KIND: 1}, secrets={RUN: (("k", KEY),)})
    outcome = decide(record(envelope(payload, schema_version=1)), None, policy, rules(), now=NOW)
    assert isinstance(outcome, Refused)
    assert outcome.violation.rule == "identifier-secret"
    assert outcome.violation.path == "/envelope/payload/surface/components/1/id"


def test_a_secret_whose_marker_outgrows_a_max_length_is_refused() -> None:
    """Text of 4,096 characters (the profile's limit) holding eight-character secrets: each
    marker [REDACTED:a-long-secret-id] is longer than its secret, so the redacted text would
    break the maxLength the record was admitted under."""
    msg = components_msg("s")
    msg["updateComponents"]["components"][1]["text"] = ("abcdefgh" * 512)[:4096]
    outcome = decide(
        record(envelope(v2("s", create_msg("s"), msg))),
        None,
        _policy(("a-long-secret-id", "abcdefgh")),
        rules(),
        now=NOW,
    )
    assert isinstance(outcome, Refused), outcome
    violation = outcome.violation
    assert (violation.code, violation.rule) == ("envelope_invalid", "redaction-invalid")
    assert violation.path == "/envelope/payload/messages/1/updateComponents/components/1/text"
    assert "abcdefgh" not in orjson.dumps(violation.to_dict()).decode()


_PLACES = st.sampled_from(
    ["runId", "correlationId", "envelopeId", "nodeId", "surfaceId", "component-id", "children"]
    + ["child", "text", "label", "reasoning", "data-key", "data-value", "context", "none"]
)


@given(where=_PLACES, secret_id=st.sampled_from(["k", "byok-registered-0001"]))
def test_every_recorded_event_is_valid_under_the_profile_it_was_admitted_by(
    where: str, secret_id: str
) -> None:
    """The law (issue 14 item 2): whatever a secret touches, a record is admitted valid (its
    redacted form passes the record schema, its branch and the limits again) or refused."""
    if where in ("text", "label", "reasoning", "data-key", "data-value", "context", "none"):
        payload = v2("s", create_msg("s"), components_msg("s"), data_msg("s", value={}))
        components = payload["messages"][1]["updateComponents"]["components"]
        if where == "text":
            components[1]["text"] = f"t {KEY}"
        elif where == "label":
            components[2]["label"] = KEY
        elif where == "reasoning":
            payload["reasoning"] = KEY
        elif where == "data-key":
            payload["messages"][2]["updateDataModel"]["value"] = {KEY: 1}
        elif where == "data-value":
            payload["messages"][2]["updateDataModel"]["value"] = {"k": [KEY]}
        elif where == "context":
            components[4]["action"]["event"]["context"] = {"n": [f"{KEY}!"], KEY: 2}
        rec: dict[str, object] = record(envelope(payload))
    else:
        rec = _with_id(where)
    policy = HostPolicy(secrets={RUN: ((secret_id, KEY),), SECRET_RUN: ((secret_id, KEY),)})
    outcome = decide(rec, None, policy, rules(), now=NOW)
    if isinstance(outcome, Refused):
        assert KEY not in orjson.dumps(outcome.violation.to_dict()).decode()
        return
    assert isinstance(outcome, Admitted)
    event = outcome.event
    assert KEY not in orjson.dumps(event).decode()
    recorded = event["payload"]["envelope"]
    assert rules().check_record({"runId": event["runId"], "envelope": recorded}) is None
    assert rules().check_v2(recorded["payload"]) is None
