"""Small aiokafka helpers shared by commands, tests and benchmarks: read a topic to its end.

Shell module.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

__all__ = ["read_topic"]


async def read_topic(
    bootstrap: str,
    topic: str,
    *,
    isolation: str = "read_uncommitted",
    partitions: list[int] | None = None,
    timeout: float = 30.0,
) -> list[Any]:
    """Every record of ``topic`` (or of the given partitions) from the beginning to the end
    offsets observed at the start; bounded by ``timeout`` seconds."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level=isolation
    )
    await consumer.start()
    try:
        # Ask for this topic's metadata explicitly: a consumer without a subscription does not
        # fetch it, and partitions_for_topic() would say the topic does not exist.
        consumer._client.add_topic(topic)
        await consumer._client.force_metadata_update()
        known = sorted(consumer.partitions_for_topic(topic) or [])
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
        return records
    finally:
        await consumer.stop()
