"""The topic plan: what `topics apply` creates and what it reports as drift."""

from __future__ import annotations

import json
from pathlib import Path

from app.core.runlog.topic_plan import (
    ActualTopic,
    Drift,
    desired_topics,
    plan_topics,
    subscriber_topic,
)

DEFINITIONS = json.loads(
    (Path(__file__).resolve().parents[2] / "topics" / "topics.json").read_text()
)


def _desired(partitions: int = 6):  # type: ignore[no-untyped-def]
    return desired_topics(DEFINITIONS, prefix="a2ui.", run_partitions=partitions, replication=1)


def test_run_topics_are_co_partitioned_and_the_log_is_compacted() -> None:
    specs = {s.id: s for s in _desired(5)}
    assert {specs[i].partitions for i in ("admission", "log", "deadletter")} == {5}
    assert specs["log"].config["cleanup.policy"] == "compact"
    assert specs["subscriptions"].config["cleanup.policy"] == "compact"
    assert int(specs["deadletter"].config["retention.ms"]) >= 30 * 24 * 3600 * 1000
    assert specs["log"].name == "a2ui.runs.log"


def test_missing_topics_are_created_existing_ones_are_ok() -> None:
    desired = _desired()
    actual = {s.name: ActualTopic(s.name, s.partitions, dict(s.config)) for s in desired[1:]}
    result = plan_topics(desired, actual)
    assert [s.name for s in result.create] == [desired[0].name]
    assert result.drift == ()
    assert set(result.ok) == {s.name for s in desired[1:]}


def test_partition_and_config_drift_are_reported_not_fixed() -> None:
    desired = _desired()
    log = next(s for s in desired if s.id == "log")
    actual = {s.name: ActualTopic(s.name, s.partitions, dict(s.config)) for s in desired}
    actual[log.name] = ActualTopic(log.name, 2, {**log.config, "cleanup.policy": "delete"})
    result = plan_topics(desired, actual)
    assert result.create == ()
    assert set(result.drift) == {
        Drift(log.name, "partitions", "6", "2"),
        Drift(log.name, "cleanup.policy", "compact", "delete"),
    }


def test_unknown_configs_are_unchecked_not_drift() -> None:
    desired = _desired()
    actual = {s.name: ActualTopic(s.name, s.partitions, None) for s in desired}
    result = plan_topics(desired, actual)
    assert result.drift == () and set(result.unchecked) == {s.name for s in desired}


def test_subscriber_template() -> None:
    spec = subscriber_topic(DEFINITIONS, "ui-7", prefix="a2ui.", replication=1)
    assert spec.name == "a2ui.subscriber.ui-7" and spec.partitions == 1
