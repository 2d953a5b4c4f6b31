"""The subscription registry fold: register, replace, unsubscribe, ignore bad records."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.projection.subscriptions import (
    Subscription,
    encode_subscription,
    followed_by_anyone,
    parse_subscription,
    register,
    subscribers_for,
)


def _reg(sid: str, runs: object = "*", delta: bool = True, full_every: int = 50) -> bytes:
    return orjson.dumps(
        {"subscriberId": sid, "runs": runs, "delta": delta, "fullEvery": full_every}
    )


def test_register_replace_and_unsubscribe() -> None:
    registry, why = register({}, b"ui-1", _reg("ui-1", ["r1"]))
    assert why is None and registry["ui-1"].runs == frozenset({"r1"})
    registry, _ = register(registry, b"ui-2", _reg("ui-2", "*", delta=False))
    assert [s.subscriber_id for s in subscribers_for(registry, "r1")] == ["ui-1", "ui-2"]
    assert [s.subscriber_id for s in subscribers_for(registry, "r9")] == ["ui-2"]
    registry, _ = register(registry, b"ui-1", _reg("ui-1", ["r9"]))
    assert [s.subscriber_id for s in subscribers_for(registry, "r9")] == ["ui-1", "ui-2"]
    registry, _ = register(registry, b"ui-2", None)
    assert list(registry) == ["ui-1"]


@given(
    st.lists(st.one_of(st.none(), st.frozensets(st.sampled_from("abc"))), max_size=6),
    st.sampled_from("abcd"),
)
def test_the_fast_forms_say_what_follows_says(runs: list[frozenset[str] | None], run: str) -> None:
    """``subscribers_for`` and ``followed_by_anyone`` write ``Subscription.follows`` out
    (the fan-out's hot path): they agree with it on every registry."""
    registry = {f"s{i}": Subscription(f"s{i}", r, True, 50) for i, r in enumerate(runs)}
    following = [sub for sub in registry.values() if sub.follows(run)]
    assert subscribers_for(registry, run) == following
    assert followed_by_anyone(registry, run) is bool(following)


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (b"a", b"{", "not JSON"),
        (b"a", b"[]", "expected exactly"),
        (b"a", _reg("a b"), "subscriberId must match"),
        (b"a", _reg("a", runs=[1]), "runs must be"),
        (b"a", _reg("a", full_every=0), "fullEvery must be"),
        (b"b", _reg("a"), "the key must equal subscriberId"),
        (None, _reg("a"), "without a key"),
    ],
)
def test_bad_registrations_are_ignored_with_a_reason(
    key: bytes | None, value: bytes, reason: str
) -> None:
    registry, why = register({}, key, value)
    assert registry == {} and why is not None and reason in why


def test_encode_round_trips() -> None:
    sub = Subscription("ui-1", frozenset({"r2", "r1"}), True, 10)
    assert parse_subscription(encode_subscription(sub)) == sub
    everyone = Subscription("ui-2", None, False, 1)
    assert parse_subscription(encode_subscription(everyone)) == everyone
