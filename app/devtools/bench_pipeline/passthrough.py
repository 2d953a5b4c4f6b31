"""Ceiling (a): a transactional pass-through (admission -> log per partition in transactions, no
decision), run as its own process (``python -m app.devtools.bench_pipeline passthrough``).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition

from app.devtools.bench_pipeline.records import MAX_BATCH, PRODUCER_CONFIG
from app.shell.settings import load_settings
from app.shell.wire import SOURCE_HEADER
from app.shell.worker.gather import gather
from app.shell.worker.kafka_io import group_consumer

__all__ = ["passthrough", "passthrough_main"]


async def _pass_batch(
    producer: AIOKafkaProducer,
    tp: TopicPartition,
    records: list[Any],
    log_topic: str,
    group: str,
    offsets: bool,
) -> None:
    """One partition's batch in one transaction, as ``validator_commit.commit_partition`` does
    it (appends awaited inside the transaction, then the offsets when ``offsets``: the
    validator's only once per commit interval, then the commit)."""
    async with producer.transaction():
        futures = []
        builder = producer.create_batch()
        for r in records:
            headers = [(SOURCE_HEADER, f"{tp.partition}:{r.offset}".encode())]
            if builder.append(key=r.key, value=r.value, timestamp=None, headers=headers) is None:
                futures.append(
                    await producer.send_batch(builder, log_topic, partition=tp.partition)
                )
                builder = producer.create_batch()
                builder.append(key=r.key, value=r.value, timestamp=None, headers=headers)
        builder.close()  # as the validator does: an open batch waits out linger_ms
        futures.append(await producer.send_batch(builder, log_topic, partition=tp.partition))
        await asyncio.gather(*futures)
        if offsets:
            await producer.send_offsets_to_transaction({tp: records[-1].offset + 1}, group)


class _PartitionProducers(ConsumerRebalanceListener):  # type: ignore[misc]
    """One transactional producer per assigned partition (starting it fences the partition's
    previous owner), stopped when the partition is revoked, never while a transaction is
    open (``lock``)."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.producers: dict[int, AIOKafkaProducer] = {}
        self.lock = asyncio.Lock()

    async def on_partitions_revoked(self, revoked: Any) -> None:
        async with self.lock:  # never while a transaction is open
            for tp in revoked:
                producer = self.producers.pop(tp.partition, None)
                if producer is not None:
                    await producer.stop()

    async def on_partitions_assigned(self, assigned: Any) -> None:
        for tp in assigned:
            if tp.partition not in self.producers:
                producer = AIOKafkaProducer(
                    bootstrap_servers=self.bootstrap,
                    transactional_id=f"{self.group}-p{tp.partition}",
                    transaction_timeout_ms=30000,
                    max_request_size=9 * 1024 * 1024,
                    **PRODUCER_CONFIG,
                )
                for attempt in range(10):  # e.g. the coordinator not yet elected
                    try:
                        await producer.start()  # fences the partition's previous owner
                        break
                    except Exception as exc:  # noqa: BLE001 - any start failure retries
                        print(f"passthrough: p{tp.partition} start: {exc!r}", flush=True)
                        await producer.stop()
                        await asyncio.sleep(0.5 * (attempt + 1))
                else:
                    raise RuntimeError(f"passthrough: no producer for {tp}")
                self.producers[tp.partition] = producer


async def passthrough(
    bootstrap: str, admission: str, log_topic: str, group: str, stopping: asyncio.Event
) -> None:
    """Admission -> log, per partition in transactions, no decision, until ``stopping``."""
    consumer = group_consumer(bootstrap, group, fast_groups=True)
    listener = _PartitionProducers(bootstrap, group)
    producers, lock = listener.producers, listener.lock
    consumer.subscribe([admission], listener=listener)
    await consumer.start()
    loop = asyncio.get_running_loop()
    # the worker's settings (the same environment): its batch time bound, and its commit
    # interval, at most which a partition's offset waits to join a transaction
    # (``validator_commit.offsets_due``)
    settings = load_settings()
    batch_s, interval_s = settings.batch_ms / 1000, settings.commit_interval_ms / 1000
    offsets_at: dict[int, float] = {}  # partition -> when a transaction last carried offsets
    gathered_at: float | None = None  # as the validator's loop gathers (``gather``)
    try:
        while not stopping.is_set():
            batch = await gather(
                consumer, max_records=MAX_BATCH, window_s=batch_s, opened=gathered_at
            )
            gathered_at = loop.time() if batch else None
            async with lock:
                for tp, records in batch.items():
                    if tp.partition not in producers:  # revoked meanwhile: not ours to move
                        with contextlib.suppress(Exception):
                            consumer.seek(tp, records[0].offset)
                now = loop.time()
                due = {
                    tp.partition
                    for tp in batch
                    if now - offsets_at.get(tp.partition, float("-inf")) >= interval_s
                }
                offsets_at.update((p, now) for p in due)
                await asyncio.gather(
                    *(
                        _pass_batch(
                            producers[tp.partition],
                            tp,
                            records,
                            log_topic,
                            group,
                            tp.partition in due,
                        )
                        for tp, records in batch.items()
                        if tp.partition in producers
                    )
                )
    finally:
        await consumer.stop()
        for producer in producers.values():
            await producer.stop()


def passthrough_main(argv: Sequence[str]) -> int:
    bootstrap, admission, log_topic, group = argv

    async def main() -> None:
        stopping = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
        await passthrough(bootstrap, admission, log_topic, group, stopping)

    asyncio.run(main())
    return 0
