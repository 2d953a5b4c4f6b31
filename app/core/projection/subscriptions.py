"""The subscription registry (schemas/subscription.schema.json) as a pure value.

Pure: standard library and orjson. The registry topic is compacted and keyed by subscriberId;
folding its records in order (a tombstone unsubscribes) gives the current registry. A record
that does not match the schema is ignored with a reason, never raised: one bad registration
must not stop the projector for everyone else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import orjson

__all__ = [
    "Registry",
    "Subscription",
    "encode_subscription",
    "followed_by_anyone",
    "parse_subscription",
    "register",
    "subscribers_for",
]

_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
MAX_FULL_EVERY = 100_000


@dataclass(frozen=True, slots=True)
class Subscription:
    """A subscriber's registration: which runs it follows and how it takes frames."""

    subscriber_id: str
    runs: frozenset[str] | None  # None: every run ("*")
    delta: bool
    full_every: int  # ``fullEvery``: deltas between digest checks (app.core.projection.frames)

    def follows(self, run_id: str) -> bool:
        """Whether the subscriber follows run ``run_id``."""
        return self.runs is None or run_id in self.runs


Registry = Mapping[str, Subscription]


def parse_subscription(value: bytes) -> Subscription | str:
    """A registration, or the reason it is not one."""
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        return f"not JSON: {exc}"
    if not isinstance(doc, dict) or set(doc) != {"subscriberId", "runs", "delta", "fullEvery"}:
        return "expected exactly {subscriberId, runs, delta, fullEvery}"
    sid, runs, delta, full_every = doc["subscriberId"], doc["runs"], doc["delta"], doc["fullEvery"]
    if not isinstance(sid, str) or not _ID.match(sid):
        return "subscriberId must match ^[A-Za-z0-9._-]{1,128}$"
    if runs == "*":
        followed = None
    elif isinstance(runs, list) and all(isinstance(r, str) and r for r in runs):
        followed = frozenset(runs)
    else:
        return 'runs must be "*" or a list of runIds'
    if not isinstance(delta, bool):
        return "delta must be a boolean"
    if (
        not isinstance(full_every, int)
        or isinstance(full_every, bool)
        or not (1 <= full_every <= MAX_FULL_EVERY)
    ):
        return f"fullEvery must be an integer in [1, {MAX_FULL_EVERY}]"
    return Subscription(sid, followed, delta, full_every)


def encode_subscription(sub: Subscription) -> bytes:
    """The registration record of ``sub`` on the subscriptions topic."""
    runs: Any = "*" if sub.runs is None else sorted(sub.runs)
    return orjson.dumps(
        {
            "subscriberId": sub.subscriber_id,
            "runs": runs,
            "delta": sub.delta,
            "fullEvery": sub.full_every,
        }
    )


def register(
    registry: Registry, key: bytes | None, value: bytes | None
) -> tuple[Registry, str | None]:
    """Fold one registry-topic record; returns the new registry and a reason when ignored."""
    if key is None:
        return registry, "a registration without a key"
    try:
        sid = key.decode("utf-8")
    except UnicodeDecodeError:
        return registry, "a registration key that is not UTF-8"
    if value is None:  # tombstone: unsubscribe
        if sid not in registry:
            return registry, None
        return MappingProxyType({k: v for k, v in registry.items() if k != sid}), None
    parsed = parse_subscription(value)
    if isinstance(parsed, str):
        return registry, parsed
    if parsed.subscriber_id != sid:
        return registry, "the key must equal subscriberId"
    return MappingProxyType({**registry, sid: parsed}), None


def subscribers_for(registry: Registry, run_id: str) -> list[Subscription]:
    """The registrations that follow run ``run_id`` (``Subscription.follows``, written out:
    a fan-out asks it of every subscriber per surface change; measured, the method call per
    subscriber was a fifth of a 1,000-subscriber plan)."""
    return [sub for sub in registry.values() if sub.runs is None or run_id in sub.runs]


def followed_by_anyone(registry: Registry, run_id: str) -> bool:
    """Whether any registration follows run ``run_id`` (stops at the first)."""
    return any(sub.runs is None or run_id in sub.runs for sub in registry.values())
