"""Ceiling (a): a transactional pass-through (admission -> log per partition in transactions, no
decision), run as its own process (``python -m app.devtools.bench_pipeline passthrough``).

Two producer designs (``mode``):

- ``partition`` (ceiling a, the validator's today): one transactional producer per assigned
  partition, whose start fences the partition's previous owner (EOS-v1, Kafka Streams'
  ``exactly_once``); a batch is one transaction per partition, in parallel; the offsets join
  a partition's transaction once per commit interval;
- ``worker`` (ceiling a2, issue 15's alternative): one transactional producer per process, a
  batch one transaction over all its partitions, and every transaction carrying its offsets,
  fenced by the group generation (``app.shell.worker.txn_offsets``, KIP-447; Kafka Streams'
  ``exactly_once_v2``). Every transaction must carry them: a transaction without offsets is
  not fenced, so a zombie could still commit its appends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition

from app.devtools.bench_pipeline.records import MAX_BATCH, PRODUCER_CONFIG
from app.shell.settings import load_settings
from app.shell.wire import SOURCE_HEADER
from app.shell.worker.gather import gather
from app.shell.worker.kafka_io import group_consumer
from app.shell.worker.txn_offsets import fence_offsets, member_of

__all__ = ["MODES", "passthrough", "passthrough_main"]

MODES = ("partition", "worker")


def _append(producer: AIOKafkaProducer, tp: TopicPartition, records: list[Any]) -> list[Any]:
    """``records`` as closed batches (an open one waits out linger_ms), not yet sent."""
    builders = []
    builder = producer.create_batch()
    for r in records:
        headers = [(SOURCE_HEADER, f"{tp.partition}:{r.offset}".encode())]
        if builder.append(key=r.key, value=r.value, timestamp=None, headers=headers) is None:
            builders.append(builder)
            builder = producer.create_batch()
            builder.append(key=r.key, value=r.value, timestamp=None, headers=headers)
    builder.close()
    return [*builders, builder]


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
        futures = [
            await producer.send_batch(b, log_topic, partition=tp.partition)
            for b in _append(producer, tp, records)
        ]
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


async def _batches(consumer: Any, stopping: asyncio.Event) -> AsyncIterator[dict[Any, list[Any]]]:
    """The consumer's batches until ``stopping``, gathered as the validator's loop gathers
    them (``gather``: the worker's batch window from its settings, the same environment,
    counted from where the last batch was gathered); empty ones are not yielded."""
    loop = asyncio.get_running_loop()
    batch_s = load_settings().batch_ms / 1000
    gathered_at: float | None = None
    while not stopping.is_set():
        batch = await gather(consumer, max_records=MAX_BATCH, window_s=batch_s, opened=gathered_at)
        gathered_at = loop.time() if batch else None
        if batch:
            yield batch


async def _pass_all(
    producer: AIOKafkaProducer, batch: dict[Any, list[Any]], log_topic: str, group: str
) -> None:
    """A batch of every partition in one transaction: the appends, acknowledged, then the
    batch's offsets (fenced by the group generation: ``fence_offsets``), then the commit."""
    async with producer.transaction():
        futures = [
            await producer.send_batch(b, log_topic, partition=tp.partition)
            for tp, records in batch.items()
            for b in _append(producer, tp, records)
        ]
        await asyncio.gather(*futures)
        # After the appends' acknowledgment, as the validator orders it: sent beside them,
        # the AddOffsetsToTxn made the broker's check of the appends' partitions answer "not
        # now" (NOT_ENOUGH_REPLICAS while the transaction's state changes, KIP-890's
        # verification), which aiokafka retries after 100 ms (measured: p99 of 300
        # transactions 108 ms beside, 38 ms after).
        offsets = {tp: records[-1].offset + 1 for tp, records in batch.items()}
        await producer.send_offsets_to_transaction(offsets, group)


class _Quiesce(ConsumerRebalanceListener):  # type: ignore[misc]
    """No rebalance callback runs while a transaction is open (``lock``)."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()

    async def on_partitions_revoked(self, revoked: Any) -> None:
        async with self.lock:
            pass

    async def on_partitions_assigned(self, assigned: Any) -> None:
        pass


async def _worker_passthrough(
    bootstrap: str, admission: str, log_topic: str, group: str, stopping: asyncio.Event
) -> None:
    """Admission -> log, one transaction per batch over all its partitions, each carrying the
    batch's offsets with the member's generation, until ``stopping``."""
    consumer = group_consumer(bootstrap, group, fast_groups=True)
    listener = _Quiesce()
    consumer.subscribe([admission], listener=listener)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=f"{group}-w{os.getpid()}",
        transaction_timeout_ms=30000,
        max_request_size=9 * 1024 * 1024,
        **PRODUCER_CONFIG,
    )
    await producer.start()
    fence_offsets(producer, member_of(consumer))
    await consumer.start()
    try:
        async for batch in _batches(consumer, stopping):
            async with listener.lock:
                try:
                    await _pass_all(producer, batch, log_topic, group)
                except Exception as exc:  # noqa: BLE001 - fenced or failed: those records again
                    print(f"passthrough: batch aborted: {exc!r}", flush=True)
                    for tp, records in batch.items():
                        if tp in consumer.assignment():
                            consumer.seek(tp, records[0].offset)
    finally:
        await consumer.stop()
        await producer.stop()


async def passthrough(
    bootstrap: str,
    admission: str,
    log_topic: str,
    group: str,
    stopping: asyncio.Event,
    mode: str = "partition",
) -> None:
    """Admission -> log in transactions, no decision, until ``stopping``: one producer per
    partition (``mode`` partition) or one per process (worker)."""
    run = _worker_passthrough if mode == "worker" else _partition_passthrough
    await run(bootstrap, admission, log_topic, group, stopping)


async def _partition_passthrough(
    bootstrap: str, admission: str, log_topic: str, group: str, stopping: asyncio.Event
) -> None:
    """Admission -> log, per partition in transactions, until ``stopping``."""
    consumer = group_consumer(bootstrap, group, fast_groups=True)
    listener = _PartitionProducers(bootstrap, group)
    producers, lock = listener.producers, listener.lock
    consumer.subscribe([admission], listener=listener)
    await consumer.start()
    loop = asyncio.get_running_loop()
    # the worker's commit interval (the same environment), at most which a partition's offset
    # waits to join a transaction (``validator_commit.offsets_due``)
    interval_s = load_settings().commit_interval_ms / 1000
    offsets_at: dict[int, float] = {}  # partition -> when a transaction last carried offsets
    try:
        async for batch in _batches(consumer, stopping):
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
    bootstrap, admission, log_topic, group, *rest = argv
    mode = rest[0] if rest else "partition"

    async def main() -> None:
        stopping = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
        await passthrough(bootstrap, admission, log_topic, group, stopping, mode)

    asyncio.run(main())
    return 0
