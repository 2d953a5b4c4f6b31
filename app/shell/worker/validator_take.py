"""Taking an admission partition: fence its previous owner, restore its run states, install them.

Shell module, the validator's ownership path (``app.shell.worker.validator_loop`` runs ``take``
in the background for each partition it is assigned, never inside the rebalance listener).

Ownership is fenced per partition (EOS-v1, as Kafka Streams' ``exactly_once``): admission
partition p has its own transactional producer, ``<app id>-validator-p<p>``, started when p
is assigned. Its ``InitProducerId`` bumps the epoch of that id, which fences the producer of
whoever owned p before (a member dropped from the group while it stood still, a GC pause, a
stalled VM) and aborts its open transaction. Only then is p's state restored (from the
run-state changelog and the log tail past its checkpoint, or by replaying the log and dead
letters when the changelog cannot say: app.core.admission.validator_restore) and its committed
offset read, so what the new owner decides starts exactly where the last commit the broker accepted
left off; whatever the old owner tries afterwards is refused (``ProducerFenced``), and it
drops the partition. aiokafka 0.14's ``send_offsets_to_transaction`` sends TxnOffsetCommit v0,
without the group generation that KIP-447 fencing would need, so the transactional id is what
fences.

Its functions take the loop, whose state they read and set; the reads go through the loop's
I/O methods (``ValidatorLoop.read_changelog`` and the others, which the shell tests replace).
It imports ``app.core`` and its sibling modules of the validator (``validator_cache``,
``validator_commit``, ``validator_partition``); the loop's type only for annotations.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaProducer, TopicPartition

from app.core.admission.validator_batch import Send
from app.core.admission.validator_restore import (
    Restored,
    Snapshot,
    catch_up,
    decoded,
    read_changelog,
    restore_from_snapshot,
    restore_partition,
    tail_runs,
)
from app.core.runlog.run_snapshot import CHECKPOINT_KEY, Checkpoint
from app.shell.worker.validator_cache import evict
from app.shell.worker.validator_commit import send_batches
from app.shell.worker.validator_partition import OwnedPartition

if TYPE_CHECKING:
    from app.shell.worker.validator_loop import ValidatorLoop

__all__ = ["end_of", "restore", "take", "write"]

log = logging.getLogger("a2ui_stream.validator")


async def take(loop: ValidatorLoop, tp: TopicPartition) -> None:
    """Start ``tp``'s transactional producer (which fences its previous owner and aborts
    that one's open transaction), then rebuild ``tp``'s state (``restore``) and bring the
    changelog up to it; if ``tp`` is still ours, install the state, move the fetch position
    to where deciding starts and resume the partition.

    The reads wait until no transaction is pending on them and only then is the committed
    offset fetched, and the consumer is moved to it: after a broker restart the markers of
    our last acknowledged transaction arrive seconds late, and the consumer's own position
    came from a committed offset fetched before them (found by `a2ui-stream soak`,
    broker-restart, docs/reliability.md). Outputs past a committed offset that is still
    stale are ``seen`` and skipped (and the changelog's checkpoint, read in the same
    stable way, is never stale)."""
    assert loop.consumer is not None
    producer: AIOKafkaProducer | None = None
    try:
        if loop.transactional:
            producer = loop.new_producer(loop.config.partition_transactional_id(tp.partition))
            await asyncio.wait_for(producer.start(), 60)
        restored, before, way, committed = await restore(loop, tp)
        writes: tuple[Send, ...] = ()
        if loop.config.changelog_topic:
            writes = catch_up(loop.config.changelog_topic, tp.partition, before, restored)
        # A start past the committed offset (the checkpoint's: a commit that failed after
        # its writes, without transactions) is committed too, or nothing would move it.
        offset = restored.start if restored.start > committed else None
        await write(loop, tp, producer, writes, offset)
        if loop.store is not None:  # the runs restored still encoded: out of memory
            loop.store.drop(tp.partition)
            loop.store.put_many(tp.partition, restored.raw.items())
        async with loop.lock:
            if loop.taking.get(tp) is not asyncio.current_task():
                return  # revoked (or taken again) meanwhile
            del loop.taking[tp]
            loop.partitions[tp.partition] = OwnedPartition(
                restored, producer, asyncio.get_running_loop().time()
            )
            loop.partitions[tp.partition].evicted.update(restored.raw)
            producer = None  # the partition's now
            evict(loop, tp.partition)
            loop.generation += 1
            loop.consumer.seek(tp, restored.start)
            loop.consumer.resume(tp)
    finally:
        loop.close_later(producer)
    log.info(
        # (" restored: " is what the fault scenarios count: app/devtools/fault_scenarios.py)
        "validator: partition %d restored: %d runs (by %s), %d outcomes past offset %d",
        tp.partition,
        len(restored.runs) + len(restored.raw),
        way,
        len(restored.seen),
        restored.start,
    )


async def restore(
    loop: ValidatorLoop, tp: TopicPartition
) -> tuple[Restored, Snapshot | None, str, int]:
    """``tp``'s state: from the changelog and the log tail past its checkpoint, or, when the
    changelog cannot say (absent, empty, unreadable, or not this log's), by replaying the
    whole log and dead-letter partitions (app.core.admission.validator_restore). Also: the changelog
    as read, which way it went, and the committed offset."""
    assert loop.consumer is not None
    partition = tp.partition
    count = loop.restored_records
    snapshot = None
    lazy = loop.store is not None  # decode only the runs the tail continues
    if loop.config.changelog_topic and partition not in loop.replay_next:
        records = await loop.read_changelog(partition)
        count["changelog"] += len(records)
        snapshot = read_changelog(partition, records, decode=not lazy)
    loop.replay_next.discard(partition)
    if snapshot is not None and snapshot.checkpoint is not None:
        found, snapshot, committed = await _from_checkpoint(
            loop, tp, snapshot, snapshot.checkpoint, lazy=lazy
        )
        if found is not None:
            loop.restores["changelog"] += 1
            return found, snapshot, "changelog", committed
        log.warning(
            "validator: partition %d: the run-state changelog does not match the log; "
            "replaying the log",
            partition,
        )
    log_records, dead = await loop.read_outputs(partition)
    count["log"] += len(log_records)
    count["deadletter"] += len(dead)
    committed = await loop.consumer.committed(tp) or 0
    restored = restore_partition(
        partition,
        committed,
        log_records,
        dead,
        log_end=end_of(log_records),
        dead_end=end_of(dead),
    )
    loop.restores["replay"] += 1
    return restored, snapshot, "replay", committed


async def _from_checkpoint(
    loop: ValidatorLoop,
    tp: TopicPartition,
    snapshot: Snapshot,
    point: Checkpoint,
    *,
    lazy: bool,
) -> tuple[Restored | None, Snapshot | None, int]:
    """``tp``'s state from the changelog as read (``snapshot``, whose checkpoint is ``point``)
    and the log tail past that checkpoint, or None when they do not match; also the snapshot
    as decoded (``lazy``: only the runs the tail continues were left encoded) and the
    committed offset."""
    assert loop.consumer is not None
    partition = tp.partition
    count = loop.restored_records
    log_tail, dead_tail, log_end, dead_end = await loop.read_tail(
        partition, point.log_from, point.dead_from
    )
    count["log"] += len(log_tail)
    count["deadletter"] += len(dead_tail)
    decoded_snapshot: Snapshot | None = snapshot
    if lazy:
        decoded_snapshot = decoded(snapshot, tail_runs(log_tail))
    committed = await loop.consumer.committed(tp) or 0
    restored = None
    if decoded_snapshot is not None:
        restored = restore_from_snapshot(
            partition,
            committed,
            decoded_snapshot,
            log_tail,
            dead_tail,
            log_end=log_end,
            dead_end=dead_end,
        )
    return restored, decoded_snapshot, committed


async def write(
    loop: ValidatorLoop,
    tp: TopicPartition,
    producer: AIOKafkaProducer | None,
    sends: Sequence[Send],
    offset: int | None,
) -> None:
    """Write ``sends`` (a restore's changelog catch-up) and commit ``offset`` (unless None):
    in a transaction of the partition's own producer, or with the plain one."""
    if not sends and offset is None:
        return
    # The checkpoint last, once the run states are acknowledged (without a transaction a
    # checkpoint without them would make the changelog look whole).
    states = [s for s in sends if s.key != CHECKPOINT_KEY]
    points = [s for s in sends if s.key == CHECKPOINT_KEY]
    if producer is not None:
        async with producer.transaction():
            for part in (states, points):
                await asyncio.gather(*(f for _, f in await send_batches(producer, part)))
            if offset is not None:
                await producer.send_offsets_to_transaction({tp: offset}, loop.config.group_id)
        return
    assert loop.producer is not None and loop.consumer is not None
    for part in (states, points):
        await asyncio.gather(*(f for _, f in await send_batches(loop.producer, part)))
    if offset is not None:
        await loop.consumer.commit({tp: offset})


def end_of(records: Sequence[Any]) -> int:
    """The offset past the last record read (a lower bound of the partition's end)."""
    return records[-1].offset + 1 if records else 0
