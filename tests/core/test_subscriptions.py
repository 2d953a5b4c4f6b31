"""The subscription registry fold: register, replace, unsubscribe, ignore bad records."""

from __future__ import annotations

import orjson
import pytest

from app.core.projection.subscriptions import (
    Subscription,
    encode_subscription,
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
