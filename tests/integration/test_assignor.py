"""The validator's and the projector's group assignment (app.shell.worker.assignor) on the harness
broker: members say which worker they are and what they hold warm; the group gives each its
warm partitions back, whatever member ids the broker handed out and whoever leads."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from app.shell.cli.broker import Broker
from app.shell.worker.assignor import WarmAssignor, strategies
from app.shell.worker.kafka_io import group_consumer

pytestmark = pytest.mark.broker


async def _topic(bootstrap: str, partitions: int) -> str:
    name = f"assignor-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()
    return name


async def _assigned(consumers: list[AIOKafkaConsumer], total: int) -> list[set[int]]:
    for _ in range(300):
        got = [{tp.partition for tp in c.assignment()} for c in consumers]
        if sum(len(g) for g in got) == total and all(got):
            return got
        await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))
    raise AssertionError(f"no stable assignment: {got}")


@pytest.mark.parametrize("b_first", [True, False])
async def test_a_rejoining_worker_gets_its_warm_partitions_back(
    broker: Broker, b_first: bool
) -> None:
    topic = await _topic(broker.bootstrap, 6)
    group = f"assignor-{uuid.uuid4().hex[:8]}"
    warm = {"a": [0, 1, 2, 3, 4, 5], "b": [1, 3, 5]}

    def member(worker: str) -> AIOKafkaConsumer:
        consumer = group_consumer(
            broker.bootstrap,
            group,
            fast_groups=True,
            assignors=strategies(WarmAssignor(worker, lambda: warm[worker])),
        )
        consumer.subscribe([topic])
        return consumer

    order = ["b", "a"] if b_first else ["a", "b"]
    consumers = {w: member(w) for w in order}
    try:
        for worker in order:
            await consumers[worker].start()
        a, b = await _assigned([consumers["a"], consumers["b"]], 6)
        assert (a, b) == ({0, 2, 4}, {1, 3, 5})
    finally:
        await asyncio.gather(*(c.stop() for c in consumers.values()))


async def test_every_join_offers_the_whole_protocol_list(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aiokafka 0.14 sends one JoinGroup per configured assignor, each offering only the
    assignors before it and itself (aio-libs/aiokafka#1168): with a fallback after ours, every
    join of a member rebalanced the group again, and two workers under load never settled (CI,
    stop 22). So each JoinGroup a member sends must offer the whole list it is configured with."""
    import aiokafka.consumer.group_coordinator as coordinator

    real = coordinator.JoinGroupRequest
    offered: list[list[str]] = []

    def spy(*args: object) -> object:
        protocols = args[-1]
        assert isinstance(protocols, list)
        offered.append([name for name, _metadata in protocols])
        return real(*args)

    spy.UNKNOWN_MEMBER_ID = real.UNKNOWN_MEMBER_ID  # type: ignore[attr-defined]
    monkeypatch.setattr(coordinator, "JoinGroupRequest", spy)

    topic = await _topic(broker.bootstrap, 2)
    configured = strategies(WarmAssignor("a", lambda: [0]))
    consumer = group_consumer(
        broker.bootstrap,
        f"assignor-{uuid.uuid4().hex[:8]}",
        fast_groups=True,
        assignors=configured,
    )
    consumer.subscribe([topic])
    await consumer.start()
    try:
        assert await _assigned([consumer], 2) == [{0, 1}]
    finally:
        await consumer.stop()
    names = [a.name for a in configured]  # type: ignore[attr-defined]  # strategies() says object
    assert offered, "no JoinGroup was sent"
    assert all(o == names for o in offered), offered
