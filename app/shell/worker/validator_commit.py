"""The validator's commit path: write a batch's plans, commit them, keep or drop each partition.

Shell module. A batch commits per partition, each in its own transaction (its appends, dead
letters, resumes, and the changelog records when a flush is due), the partitions in parallel.
The admission offset joins a transaction only when it also writes the changelog's checkpoint
or ``changelog_interval`` has passed since the last one did (Kafka Streams commits on its
interval the same way): the outputs carry their source offset (``a2ui-source``), so a
restore skips what was decided past a committed offset that lags (``seen``), and two of a
transaction's five round trips (AddOffsetsToTxn, TxnOffsetCommit) are saved on the others.

Without transactions (tansu, or ``A2UI_STREAM_TRANSACTIONS=off``) one plain producer writes
and the consumer commits the offsets afterwards; then the ``a2ui-source`` headers of what the
log and dead letters already hold keep "exactly one outcome per record" (docs/pipeline.md),
and a batch's changelog records are written only once its log and dead-letter appends are
acknowledged (so the changelog may lag the log, never lead it).

After a commit, ``settle`` keeps the plan (``OwnedPartition.install``) or drops the partition
(fenced: another member owns it; failed: it is taken again). A partition that failed
``validator_process.ISOLATE_AFTER_FAILURES`` times in a row is decided one record per
transaction (``process_isolated``), so one record the broker will not take cannot stall it.

Its functions take the loop, whose state they read and set. It imports ``app.core``, the
shared shell modules and its sibling modules of the validator (``validator_cache``,
``validator_faults``, ``validator_partition``); the loop's type only for annotations.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaProducer

from app.core.admission.host_commands_call import ForkSource
from app.core.admission.validator import SourceRecord
from app.core.admission.validator_batch import (
    PartitionPlan,
    PartitionState,
    Refetch,
    Send,
    plan_unrecordable,
)
from app.core.admission.validator_changelog import changelog_sends, checkpoint
from app.core.runlog.events import RecordedEvent
from app.shell.clock import now_rfc3339
from app.shell.worker.validator_cache import evict, plan_loaded
from app.shell.worker.validator_faults import fenced, the_records_fault
from app.shell.worker.validator_partition import Flush, OwnedPartition

if TYPE_CHECKING:
    from app.shell.worker.validator_loop import ValidatorLoop

__all__ = [
    "FENCED_RETAKE_SECONDS",
    "checkpoint_of",
    "commit",
    "commit_partition",
    "ends_of",
    "flush_idle",
    "flush_of",
    "has_work",
    "offsets_due",
    "process_isolated",
    "renew_producer",
    "send_batches",
    "settle",
]

log = logging.getLogger("a2ui_stream.validator")

# A fenced partition is taken again after this long if the group still gives it to us and
# nothing was rebalanced meanwhile: a member dropped from the group learns it from its next
# heartbeat (at most the session timeout, 10 s here), and its revocation cancels the retake;
# the fence then came from the broker aborting one of our own transactions for its timeout.
FENCED_RETAKE_SECONDS = 10.0


def settle(loop: ValidatorLoop, plan: PartitionPlan, failure: BaseException | None) -> None:
    """After a partition's commit: keep its plan, or drop the partition (fenced: another
    member owns it now; failed: take it again, which rebuilds its state from the log)."""
    owned = loop.partitions.get(plan.partition)
    if owned is None:
        return
    ends = loop.ends.pop(plan.partition, {})
    flush = loop.flushing.pop(plan.partition, None)
    offsets_at = loop.offsets_sent.pop(plan.partition, None)
    if failure is None:
        owned.install(plan, ends, flush, offsets_at)
        loop.failures.pop(plan.partition, None)
        for outcome, code in plan.counts:
            loop.metrics.count(outcome, code)
        evict(loop, plan.partition)
        for run_id, sequence, drift in plan.drifts:
            log.warning(
                "envelope_schema_version_drift run=%s sequence=%d from=%d",
                run_id,
                sequence,
                drift,
            )
    elif fenced(failure):
        loop.fenced += 1
        log.warning(
            "validator: partition %d was fenced (%s): another member owns it now; its "
            "state is dropped and nothing more is decided for it here",
            plan.partition,
            type(failure).__name__,
        )
        loop.drop(plan.partition, FENCED_RETAKE_SECONDS)
    else:
        failures = loop.failures[plan.partition] = loop.failures.get(plan.partition, 0) + 1
        # The type only: an exception's text may quote a producer's payload.
        log.error(
            "validator: partition %d: batch failed (%s, %d in a row); taking it again "
            "from its committed offset",
            plan.partition,
            type(failure).__name__,
            failures,
        )
        loop.drop(plan.partition, 0.0)


async def flush_idle(loop: ValidatorLoop, *, due: bool = True) -> None:
    """Flush the changelog of partitions whose batches stopped with runs unflushed, and
    commit the admission offset of those decided past their last committed one, once
    their interval has passed (``due``; else now), as Kafka Streams commits on its
    interval with or without new records. Call with the lock held."""
    if not loop.config.changelog_topic:
        return
    while True:  # not ``due``: until every flush has ended (one spreads over commits)
        now = asyncio.get_running_loop().time()
        plans = [
            PartitionPlan(p, (), owned.next_offset, {}, owned.seen, (), checkpointed=True)
            for p, owned in loop.partitions.items()
            if owned.flushing
            # at stop also a checkpoint behind the log (it names where the last flush
            # began): then the next owner reads no log tail
            or (not due and owned.pointed != (owned.log_from, owned.dead_from))
            or (owned.dirty and (not due or now - owned.flushed >= loop.config.changelog_interval))
            # decided past the offset last committed: it is committed within the interval
            or (
                owned.offset_committed < owned.next_offset and (not due or offsets_due(loop, owned))
            )
        ]
        if not plans:
            return
        if not due:
            for plan in plans:  # the interval does not hold it back (``flush_of``)
                loop.partitions[plan.partition].flushed = float("-inf")
        for plan, failure in zip(plans, await commit(loop, plans, force=True), strict=True):
            settle(loop, plan, failure)
        if due:
            return


async def commit(
    loop: ValidatorLoop, plans: Sequence[PartitionPlan], *, force: bool = False
) -> list[BaseException | None]:
    """Write and commit every plan (``force``: even one that writes and moves nothing);
    per plan, None or what failed it."""
    work = [plan for plan in plans if force or has_work(loop, plan)]
    if not work:
        return [None] * len(plans)
    if loop.transactional:
        done = await asyncio.gather(
            *(commit_partition(loop, plan) for plan in work), return_exceptions=True
        )
        failed = {plan.partition: r for plan, r in zip(work, done, strict=True) if r}
        return [failed.get(plan.partition) for plan in plans]
    assert loop.consumer is not None and loop.producer is not None
    try:
        # Without a transaction nothing is atomic: the changelog records go only once the
        # outputs they summarize are acknowledged, so a crash leaves the changelog behind
        # the log (the restore folds the tail), never ahead of it
        # (app.core.admission.validator_restore).
        outputs = [s for plan in work for s in plan.sends]
        sent = await send_batches(loop.producer, outputs)
        await asyncio.gather(*(f for _, f in sent))
        states = [s for plan in work for s in flush_of(loop, plan)]
        await asyncio.gather(*(f for _, f in await send_batches(loop.producer, states)))
        points: list[Send] = []
        for plan in work:
            loop.ends[plan.partition] = ends_of(loop, sent, plan.partition)
            points += checkpoint_of(loop, plan)
        # ... and the checkpoints last: one that landed without its run states would
        # send a restore past events those states do not hold.
        await asyncio.gather(*(f for _, f in await send_batches(loop.producer, points)))
        await loop.consumer.commit({loop.tp(p.partition): p.next_offset for p in work})
        now = asyncio.get_running_loop().time()
        loop.offsets_sent.update((plan.partition, now) for plan in work)
    except Exception as exc:
        written = {id(plan) for plan in work}
        return [exc if id(plan) in written else None for plan in plans]
    return [None] * len(plans)


def has_work(loop: ValidatorLoop, plan: PartitionPlan) -> bool:
    owned = loop.partitions.get(plan.partition)
    return bool(plan.sends) or owned is None or plan.next_offset > owned.next_offset


async def commit_partition(loop: ValidatorLoop, plan: PartitionPlan) -> None:
    owned = loop.partitions[plan.partition]
    producer = owned.producer
    assert producer is not None
    async with producer.transaction():
        # Wait for every append INSIDE the transaction, before the offsets join it:
        # measured with aiokafka 0.14, a batch the broker refuses (e.g.
        # MessageSizeTooLarge) fails only its own future while commit_transaction still
        # commits the offsets, which would lose that record's outcome. An exception here
        # aborts the transaction instead.
        # The run states and the checkpoint beside the outputs: one round of appends (the
        # checkpoint once sent after their acknowledgment cost a round trip per flush).
        flush = flush_of(loop, plan)  # (before the checkpoint: it reads the flush)
        points = checkpoint_of(loop, plan)
        sends = [*plan.sends, *flush, *points]
        sent = await send_batches(producer, sends)
        await asyncio.gather(*(f for _, f in sent))
        loop.ends[plan.partition] = ends_of(loop, sent, plan.partition)
        if points or offsets_due(loop, owned):
            loop.offsets_sent[plan.partition] = asyncio.get_running_loop().time()
            await producer.send_offsets_to_transaction(
                {loop.tp(plan.partition): plan.next_offset}, loop.config.group_id
            )


def offsets_due(loop: ValidatorLoop, owned: OwnedPartition) -> bool:
    """Whether a transaction of ``owned`` must carry its admission offset although it
    writes no checkpoint: always without a changelog (a restore then replays from the
    committed offset, and everything past it is ``seen``), else once
    ``changelog_interval`` has passed since the last one that did."""
    if not loop.config.changelog_topic:
        return True
    interval = loop.config.changelog_interval
    return asyncio.get_running_loop().time() - owned.offsets_at >= interval


def flush_of(loop: ValidatorLoop, plan: PartitionPlan) -> list[Send]:
    """The run states ``plan``'s commit flushes to the changelog (the runs changed since
    the last flush, oldest first, at most ``changelog_flush_runs`` and about
    ``changelog_flush_bytes``), when a flush is due
    (``changelog_interval``) or under way; else nothing."""
    owned = loop.partitions.get(plan.partition)
    topic = loop.config.changelog_topic
    if not topic or owned is None or not plan.checkpointed:
        return []
    now = asyncio.get_running_loop().time()
    if owned.flushing:
        began_from, todo = owned.cycle_from, owned.cycle
    elif now - owned.flushed < loop.config.changelog_interval:
        return []
    else:  # a flush begins: the runs dirty now (oldest changes first), ends before this plan
        began_from, todo = (
            (owned.log_from, owned.dead_from),
            tuple({**owned.dirty, **plan.runs}),
        )
    sends: list[Send] = []
    size, written = 0, 0
    for run_id in itertools.islice(todo, max(1, loop.config.changelog_flush_runs)):
        written += 1
        run = plan.runs.get(run_id) or owned.dirty.get(run_id) or owned.runs.get(run_id)
        if run is None:
            continue  # not held any more (cannot happen today): nothing to write
        sends += changelog_sends(topic, plan.partition, {run_id: run})
        size += len(sends[-1].value or b"")
        if size >= loop.config.changelog_flush_bytes:
            break
    loop.flushing[plan.partition] = Flush(now, began_from, todo[:written], todo[written:])
    return sends


def checkpoint_of(loop: ValidatorLoop, plan: PartitionPlan) -> list[Send]:
    """The checkpoint of a plan whose commit ends a flush, or nothing: ``plan``'s next
    offset, and the log and dead-letter ends from when the flush began (``Flush``). It
    needs no acknowledgment of the plan's appends, so in a transaction it goes with them."""
    owned = loop.partitions.get(plan.partition)
    flush = loop.flushing.get(plan.partition)
    if flush is None or not flush.complete or owned is None:
        return []
    began = PartitionState(owned.runs, owned.next_offset, owned.seen, *flush.began_from)
    return [checkpoint(loop.config.changelog_topic, began, plan, {})]


def ends_of(
    loop: ValidatorLoop,
    sent: list[tuple[tuple[str, int, int], asyncio.Future[Any]]],
    partition: int,
) -> dict[str, int]:
    """The offset past the last record batch appended to ``partition`` of the log and of
    the dead letters (their futures are done)."""
    names = {loop.config.log_topic: "log", loop.config.deadletter_topic: "deadletter"}
    ends: dict[str, int] = {}
    for (topic, number, count), future in sent:
        name = names.get(topic)
        offset = getattr(future.result(), "offset", None)
        if name is not None and number == partition and isinstance(offset, int):
            ends[name] = max(ends.get(name, 0), offset + count)
    return ends


async def process_isolated(
    loop: ValidatorLoop,
    partition: int,
    records: list[SourceRecord],
    sources: dict[ForkSource, list[RecordedEvent] | None],
) -> None:
    """After repeated failures: one record per transaction, so one record the broker will
    not take (e.g. a recorded event over the topic's size limit) cannot stall its
    partition. Such a record becomes a ``record_unrecordable`` dead letter
    (``plan_unrecordable``)."""
    for record in records:
        owned = loop.partitions.get(partition)
        if owned is None:
            return  # fenced or failed meanwhile: it is being taken again
        planned = plan_loaded(
            loop, {partition: [record]}, {partition: owned}, sources.get, gathered=0, generation=0
        )
        assert not isinstance(planned, Refetch)
        [plan] = planned
        [failure] = await commit(loop, [plan])
        if failure is not None and the_records_fault(failure) and not fenced(failure):
            log.error(
                "validator: record %d:%d cannot be recorded (%s); dead-lettering it "
                "without its bytes",
                partition,
                record.offset,
                type(failure).__name__,
            )
            try:
                await renew_producer(loop, partition, owned)
            except Exception as exc:
                settle(loop, plan, exc)
                return
            plan = plan_unrecordable(
                record,
                type(failure).__name__,
                owned.view(),
                loop.policy,
                now_rfc3339(),
                loop.topics,
            )
            [failure] = await commit(loop, [plan])
        settle(loop, plan, failure)


async def renew_producer(loop: ValidatorLoop, partition: int, owned: OwnedPartition) -> None:
    """A fresh producer for a partition we own after its transaction was refused (what
    aiokafka's producer holds after that is not worth trusting): its start fences only our
    own previous one."""
    if owned.producer is None:
        return  # without transactions the one plain producer carries on
    loop.close_later(owned.producer)
    owned.producer = None
    producer = loop.new_producer(loop.config.partition_transactional_id(partition))
    try:
        await asyncio.wait_for(producer.start(), 60)
    except BaseException:
        loop.close_later(producer)
        raise
    owned.producer = producer


async def send_batches(
    producer: AIOKafkaProducer, sends: Sequence[Send]
) -> list[tuple[tuple[str, int, int], asyncio.Future[Any]]]:
    """Produce ``sends`` as whole record batches per topic-partition, in order: a batch
    per partition costs one accumulator round instead of one per record (measured: the
    per-record ``send`` was a third of the validator's CPU). Each batch's future, by
    (topic, partition, records in the batch)."""
    builders: dict[tuple[str, int], Any] = {}
    futures: list[tuple[tuple[str, int, int], asyncio.Future[Any]]] = []
    for send in sends:
        where = (send.topic, send.partition)
        headers = list(send.headers)  # the record builder (a C extension) takes a list
        builder = builders.get(where)
        if builder is None:
            builder = builders[where] = producer.create_batch()
        if (
            builder.append(key=send.key, value=send.value, timestamp=None, headers=headers) is None
        ):  # (full: append closed it)
            futures.append(
                (
                    (*where, builder.record_count()),
                    await producer.send_batch(builder, send.topic, partition=send.partition),
                )
            )
            builder = builders[where] = producer.create_batch()
            if (
                builder.append(key=send.key, value=send.value, timestamp=None, headers=headers)
                is None
            ):
                size = len(send.value or b"")
                raise ValueError(f"a record of {size} bytes exceeds the batch size")
    for (topic, partition), builder in builders.items():
        if builder.record_count():
            # Closed: a batch still open waits out the producer's linger_ms before it
            # goes (aiokafka's MessageBatch.remaining_linger), and every record of this
            # round is in it already (measured: a 3-record transaction 10 ms at p50 with
            # the batch open, 2-4 ms closed).
            builder.close()
            futures.append(
                (
                    (topic, partition, builder.record_count()),
                    await producer.send_batch(builder, topic, partition=partition),
                )
            )
    return futures
