"""Apply ``topics/topics.json`` to a cluster: create what is missing, report drift.

Shell module (aiokafka admin). The decisions are ``app.core.runlog.topic_plan.plan_topics``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from app.core.runlog.topic_plan import (
    ActualTopic,
    TopicPlan,
    TopicSpec,
    desired_topics,
    plan_topics,
)
from app.shell.settings import Settings

__all__ = [
    "TOPICS_FILE",
    "apply_topics",
    "desired_for",
    "ensure_topics",
    "leader_topic",
    "load_definitions",
]

TOPICS_FILE = Path(__file__).resolve().parents[3] / "topics" / "topics.json"


def load_definitions(path: Path = TOPICS_FILE) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(path.read_bytes())
    return data


def desired_for(
    settings: Settings, definitions: Mapping[str, Any] | None = None
) -> tuple[TopicSpec, ...]:
    return desired_topics(
        definitions or load_definitions(),
        prefix=settings.topic_prefix,
        run_partitions=settings.partitions,
        replication=settings.replication,
    )


def leader_topic(settings: Settings) -> TopicSpec:
    """Faust's leader-election topic for this app id (faust.assignor.LeaderAssignor: one
    partition, Faust's own record format). Not ours, so not in topics/topics.json; the worker
    creates it because Faust may not (topic_allow_declare=False), and without it Faust's
    consumer logs "Topic ...-__assignor-__leader not found" at ERROR at every start."""
    return TopicSpec(
        "faust-leader", f"{settings.app_id}-__assignor-__leader", 1, settings.replication
    )


async def _describe(admin: AIOKafkaAdminClient, names: Sequence[str]) -> dict[str, ActualTopic]:
    existing = set(await admin.list_topics())
    present = [n for n in names if n in existing]
    if not present:
        return {}
    described = await admin.describe_topics(present)
    partitions = {d["topic"]: len(d["partitions"]) for d in described}
    configs: dict[str, dict[str, str] | None] = {n: None for n in present}
    try:
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, n) for n in present]
        )
        for response in responses:
            for resource in response.resources:
                # (error_code, error_message, resource_type, resource_name, config_entries)
                if resource[0] == 0:
                    configs[resource[3]] = {entry[0]: entry[1] for entry in resource[4]}
    except Exception:  # e.g. tansu: the broker cannot describe configs; reported as unchecked
        pass
    return {n: ActualTopic(n, partitions.get(n, 0), configs[n]) for n in present}


async def ensure_topics(bootstrap: str, specs: Sequence[TopicSpec]) -> TopicPlan:
    """Create the missing topics among ``specs`` and return the plan (with any drift)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        await admin.start()  # inside: a start that fails is closed too
        result = plan_topics(specs, await _describe(admin, [s.name for s in specs]))
        if result.create:
            await admin.create_topics(
                [
                    NewTopic(s.name, s.partitions, s.replication, topic_configs=dict(s.config))
                    for s in result.create
                ],
                timeout_ms=30000,
            )
            await _wait_visible(admin, [s.name for s in result.create])
        return result
    finally:
        with contextlib.suppress(Exception):
            await admin.close()


async def _wait_visible(admin: AIOKafkaAdminClient, names: Sequence[str]) -> None:
    """Wait (bounded: 150 × 0.1 s) until every partition of the new topics has a leader, so the
    first produce does not meet NotLeaderForPartition."""
    for _ in range(150):
        if set(names) <= set(await admin.list_topics()):
            described = await admin.describe_topics(list(names))
            if all(
                d.get("error_code", 0) == 0
                and d["partitions"]
                and all(p.get("leader", -1) >= 0 for p in d["partitions"])
                for d in described
            ):
                return
        await asyncio.sleep(0.1)


def apply_topics(bootstrap: str, settings: Settings) -> TopicPlan:
    return asyncio.run(ensure_topics(bootstrap, desired_for(settings)))
