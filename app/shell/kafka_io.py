"""Small aiokafka helpers shared by commands, tests and benchmarks: read a topic to its end.

Shell module.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

__all__ = ["MAX_FETCH_BYTES", "group_consumer", "partitions_of", "read_range", "read_topic"]

# The log, dead-letter and subscriber topics take records up to 8 MiB (topics/topics.json).
MAX_FETCH_BYTES = 8 * 1024 * 1024


def group_consumer(bootstrap: str, group_id: str, *, fast_groups: bool) -> AIOKafkaConsumer:
    """A (not yet started) consumer-group member as the validator and the projector use it:
    manual commits, ``read_committed``, from the earliest offset when the group has none; with
    ``fast_groups`` the short timeouts that make a join take seconds (laptops and tests)."""
    timeouts: dict[str, Any] = (
        {"session_timeout_ms": 10000, "heartbeat_interval_ms": 1000, "rebalance_timeout_ms": 10000}
        if fast_groups
        else {}
    )
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        max_partition_fetch_bytes=MAX_FETCH_BYTES,
        **timeouts,
    )


async def partitions_of(consumer: AIOKafkaConsumer, topic: str) -> list[TopicPartition]:
    """Every partition of ``topic``. A consumer without a subscription does not fetch the
    topic's metadata by itself, and ``partitions_for_topic()`` would say it does not exist."""
    consumer._client.add_topic(topic)  # noqa: SLF001
    await consumer._client.force_metadata_update()  # noqa: SLF001
    return [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]


async def read_topic(
    bootstrap: str,
    topic: str,
    *,
    isolation: str = "read_uncommitted",
    partitions: list[int] | None = None,
    timeout: float = 30.0,
    stable: float = 0.0,
) -> list[Any]:
    """Every record of ``topic`` (or of the given partitions) from the beginning to the end
    offsets observed at the start; bounded by ``timeout`` seconds.

    ``stable`` (with ``read_committed``): then keep reading, for up to that many seconds,
    until each partition's last stable offset has reached its high watermark, i.e. every
    transaction that wrote there has completed. A transaction whose commit was acknowledged
    has its markers written afterwards (seconds later while a broker recovers), and until
    then its records are invisible here: a reader that must not miss its own committed
    transactions waits for them."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level=isolation
    )
    await consumer.start()
    try:
        known = [tp.partition for tp in await partitions_of(consumer, topic)]
        if not known:
            return []
        tps = [TopicPartition(topic, p) for p in (partitions if partitions is not None else known)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        records: list[Any] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            positions = [await consumer.position(tp) for tp in tps]
            if all(pos >= ends[tp] for pos, tp in zip(positions, tps, strict=True)):
                break
            batch = await consumer.getmany(timeout_ms=500)
            for tp_records in batch.values():
                records.extend(tp_records)
        else:
            raise TimeoutError(f"reading {topic} did not reach its end within {timeout:.0f}s")
        settle = loop.time() + stable
        while stable and loop.time() < settle and not await _stable(consumer, tps):
            batch = await consumer.getmany(timeout_ms=200)
            for tp_records in batch.values():
                records.extend(tp_records)
        return records
    finally:
        await consumer.stop()


async def _stable(consumer: AIOKafkaConsumer, tps: list[TopicPartition]) -> bool:
    """Every partition read up to its last stable offset, which has reached the high watermark
    (both are known only after a fetch response for the partition)."""
    for tp in tps:
        lso, high = consumer.last_stable_offset(tp), consumer.highwater(tp)
        if lso is not None and lso < 0:
            continue  # a broker without transactions (tansu) reports none: nothing pends
        if lso is None or high is None or lso < high or await consumer.position(tp) < lso:
            return False
    return True


async def read_range(
    bootstrap: str,
    topic: str,
    partition: int,
    first: int,
    last: int,
    *,
    timeout: float = 30.0,
) -> list[Any]:
    """The committed records of one partition with offsets ``first..last`` (inclusive), read
    with ``read_committed`` (aborted and compacted-away offsets are simply absent)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed",
        max_partition_fetch_bytes=MAX_FETCH_BYTES,
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        stop = min(last + 1, end)
        consumer.seek(tp, first)
        records: list[Any] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while await consumer.position(tp) < stop:
            if loop.time() > deadline:
                raise TimeoutError(f"reading {topic}[{partition}] {first}..{last} timed out")
            batch = await consumer.getmany(tp, timeout_ms=500)
            records.extend(r for r in batch.get(tp, ()) if first <= r.offset <= last)
        return records
    finally:
        await consumer.stop()
