"""Group-fenced transactional offset commits (``app.shell.worker.txn_offsets``, KIP-447), against
the broker the harness started: a member's offsets commit with its own generation and member
id; a stale generation or another member's id is refused, the transaction aborted with what it
wrote, and the group's committed offset stays. On tansu (no transactions) these skip by name.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from app.core.runlog.topic_plan import TopicSpec
from app.shell.cli.broker import Broker
from app.shell.worker.kafka_io import group_consumer, read_topic
from app.shell.worker.topics_admin import ensure_topics
from app.shell.worker.txn_offsets import CommitFenced, Member, fence_offsets, member_of

pytestmark = [pytest.mark.broker, pytest.mark.needs_transactions]


@asynccontextmanager
async def _member(bootstrap: str, group: str, topic: str) -> AsyncIterator[AIOKafkaConsumer]:
    """A started consumer, the one member of ``group``, holding every partition of ``topic``."""
    consumer = group_consumer(bootstrap, group, fast_groups=True)
    consumer.subscribe([topic])
    await consumer.start()
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while not consumer.assignment() and loop.time() < deadline:
            await consumer.getmany(timeout_ms=200)
        assert consumer.assignment(), "the group never assigned the topic"
        yield consumer
    finally:
        await consumer.stop()


async def _commit(
    bootstrap: str, transactional_id: str, member: Member, group: str, out: str, offset: int
) -> None:
    """One transaction: a record to ``out``, then ``group``'s offset for admission partition 0."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
    await producer.start()
    try:
        fence_offsets(producer, member)
        async with producer.transaction():
            await (await producer.send(out, b"written", partition=0))
            await producer.send_offsets_to_transaction(
                {TopicPartition(f"{out}-in", 0): offset}, group
            )
    finally:
        await producer.stop()


async def _committed(
    consumer: AIOKafkaConsumer, tp: TopicPartition, expected: int, within_s: float = 30.0
) -> int | None:
    """The group's committed offset once it reads ``expected``, or what it reads after
    ``within_s`` (a transaction's offsets read as before it until its markers are written)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while True:
        got = await consumer.committed(tp)
        if got == expected or loop.time() >= deadline:
            return got
        await asyncio.sleep(0.05)


async def test_offsets_carry_the_generation_and_a_stale_member_is_fenced(
    broker: Broker, unique: str
) -> None:
    topic, out, group = f"t{unique}.out-in", f"t{unique}.out", f"g{unique}"
    await ensure_topics(
        broker.bootstrap,
        [TopicSpec("in", topic, 1, 1, {}), TopicSpec("out", out, 1, 1, {})],
    )
    tp = TopicPartition(topic, 0)
    async with _member(broker.bootstrap, group, topic) as consumer:
        member = member_of(consumer)
        generation, member_id = member()
        assert generation > 0 and member_id

        await _commit(broker.bootstrap, f"tx{unique}", member, group, out, 5)
        assert await _committed(consumer, tp, 5) == 5

        stale: list[Member] = [
            lambda: (generation - 1, member_id),  # a member the group has moved past
            lambda: (generation, f"{member_id}-not"),  # another member's commit
        ]
        for offset, wrong in enumerate(stale, start=6):
            with pytest.raises(CommitFenced):
                await _commit(broker.bootstrap, f"tx{unique}", wrong, group, out, offset)
            assert await _committed(consumer, tp, offset, within_s=1.0) == 5
        await _commit(broker.bootstrap, f"tx{unique}", member, group, out, 8)  # still the owner
        assert await _committed(consumer, tp, 8) == 8
    written = await read_topic(broker.bootstrap, out, isolation="read_committed")
    # the two commits' records; the fenced transactions' were aborted
    assert [r.value for r in written] == [b"written", b"written"]
