"""SR-1 redaction (openwop-a2ui.md §14): the pure function and its place in ``decide``."""

from __future__ import annotations

import copy

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.admission import Admitted, Refused, decide
from app.core.policy import HostPolicy
from app.core.redaction import prepare, redact, redact_text
from tests.core.admission_support import (
    NOW,
    POSITIVE,
    RUN,
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


def _admit(payload: dict[str, object], policy: HostPolicy, **kw: object) -> Admitted:
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


def test_redaction_secret_in_ids_keeps_state_consistent() -> None:
    """A surfaceId holding a secret is recorded redacted; the fold still finds it."""
    sid = f"s-{KEY}"
    policy = _policy(("k", KEY))
    first = _admit(v2(sid, create_msg(sid)), policy)
    again = decide(
        record(envelope(v2(sid, create_msg(sid)))), first.state, policy, rules(), now=NOW
    )
    assert isinstance(again, Refused) and again.violation.rule == "fold"
    assert KEY not in orjson.dumps(first.event).decode()
