"""Topics as data: resolve the definitions in ``topics/topics.json`` and plan what to change.

Pure: standard library only. The shell reads the file and the cluster's state, calls
``desired_topics`` and ``plan``, and performs the creations; drift is only reported, never
"fixed" behind the operator's back (changing partitions would break co-partitioning).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ActualTopic",
    "Drift",
    "TopicPlan",
    "TopicSpec",
    "desired_topics",
    "plan_topics",
    "subscriber_topic",
]


@dataclass(frozen=True)
class TopicSpec:
    """A topic as topics/ defines it: name, partitions, replication and configs."""

    id: str
    name: str
    partitions: int
    replication: int
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ActualTopic:
    """A topic as the broker describes it."""

    name: str
    partitions: int
    config: Mapping[str, str] | None  # None when the broker cannot describe configs


@dataclass(frozen=True)
class Drift:
    """Where a topic on the broker differs from its definition."""

    topic: str
    what: str  # "partitions" or a config key
    expected: str
    actual: str


@dataclass(frozen=True)
class TopicPlan:
    """What applying the definitions takes: topics to create, drift to report, topics left unchecked
    or found as defined."""

    create: tuple[TopicSpec, ...]
    drift: tuple[Drift, ...]
    unchecked: tuple[str, ...]  # topics whose configs the broker would not describe
    ok: tuple[str, ...]


def _partitions(raw: Any, run_partitions: int) -> int:
    # "run" marks the co-partitioned topics (admission, log, deadletter): they share one count.
    return run_partitions if raw == "run" else int(raw)


def desired_topics(
    definitions: Mapping[str, Any], *, prefix: str, run_partitions: int, replication: int
) -> tuple[TopicSpec, ...]:
    """The concrete topics for this deployment (templates are instantiated on demand)."""
    return tuple(
        TopicSpec(
            id=t["id"],
            name=prefix + t["name"],
            partitions=_partitions(t["partitions"], run_partitions),
            replication=replication,
            config={str(k): str(v) for k, v in t.get("config", {}).items()},
        )
        for t in definitions["topics"]
    )


def subscriber_topic(
    definitions: Mapping[str, Any], subscriber_id: str, *, prefix: str, replication: int
) -> TopicSpec:
    """The topic of subscriber ``subscriber_id``, from topics/' subscriber template."""
    template = next(t for t in definitions["templates"] if t["id"] == "subscriber")
    return TopicSpec(
        id="subscriber",
        name=prefix + template["name"].format(subscriberId=subscriber_id),
        partitions=int(template["partitions"]),
        replication=replication,
        config={str(k): str(v) for k, v in template.get("config", {}).items()},
    )


def plan_topics(desired: Sequence[TopicSpec], actual: Mapping[str, ActualTopic]) -> TopicPlan:
    """Compare the desired topics with the broker's: what to create and where they differ."""
    create: list[TopicSpec] = []
    drift: list[Drift] = []
    unchecked: list[str] = []
    ok: list[str] = []
    for spec in desired:
        have = actual.get(spec.name)
        if have is None:
            create.append(spec)
            continue
        found: list[Drift] = []
        if have.partitions != spec.partitions:
            found.append(Drift(spec.name, "partitions", str(spec.partitions), str(have.partitions)))
        if have.config is None:
            unchecked.append(spec.name)
        else:
            for key, value in spec.config.items():
                if have.config.get(key) != value:
                    found.append(Drift(spec.name, key, value, str(have.config.get(key))))
        drift.extend(found)
        if not found:
            ok.append(spec.name)
    return TopicPlan(tuple(create), tuple(drift), tuple(unchecked), tuple(ok))
