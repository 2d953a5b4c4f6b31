"""The validator: admission topic -> per-run log or dead-letter topic, exactly once, each
admission partition fenced by its own transactional producer.

Shell module, a thin driver (the Kafka Streams split between a task's processing and its
driver). It runs inside the Faust worker (started by ``app.shell.worker.faust_app``) with its own
aiokafka consumer and producers, for two measured reasons (docs/pipeline.md): Faust's
per-event stream machinery caps a worker near 6k events/s (../shared/spec/kafka.md), and one
Kafka transaction must span the log append, the dead letter and the admission offset. Per
batch it fetches, calls ``app.core.validator_batch.plan_batch`` once, writes what that returns
and commits; every decision (which records, what goes where, which offset) is the core's.

Ownership is fenced per partition (EOS-v1, as Kafka Streams' ``exactly_once``): admission
partition p has its own transactional producer, ``<app id>-validator-p<p>``, started when p
is assigned. Its ``InitProducerId`` bumps the epoch of that id, which fences the producer of
whoever owned p before (a member dropped from the group while it stood still, a GC pause, a
stalled VM) and aborts its open transaction. Only then is p's state restored (from the
run-state changelog and the log tail past its checkpoint, or by replaying the log and dead
letters when the changelog cannot say: app.core.validator_restore) and its committed offset
read, so what the new owner decides starts exactly
where the last commit the broker accepted left off; whatever the old owner tries afterwards
is refused (``ProducerFenced``), and it drops the partition. aiokafka 0.14's
``send_offsets_to_transaction`` sends TxnOffsetCommit v0, without the group generation that
KIP-447 fencing would need, so the transactional id is what fences.

A batch commits per partition, each in its own transaction (its appends, dead letters,
resumes, and the changelog records when a flush is due), the partitions in parallel. The
admission offset joins a transaction only when it also writes the changelog's checkpoint or
``changelog_interval`` has passed since the last one did (Kafka Streams commits on its
interval the same way): the outputs carry their source offset (``a2ui-source``), so a
restore skips what was decided past a committed offset that lags (``seen``), and two of a
transaction's five round trips (AddOffsetsToTxn, TxnOffsetCommit) are saved on the others.

Without transactions (tansu, or ``A2UI_STREAM_TRANSACTIONS=off``) one plain producer writes
and the consumer commits the offsets afterwards; then the ``a2ui-source`` headers of what the
log and dead letters already hold keep "exactly one outcome per record" (docs/pipeline.md),
and a batch's changelog records are written only once its log and dead-letter appends are
acknowledged (so the changelog may lag the log, never lead it).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import (
    CorruptRecordException,
    InvalidProducerEpoch,
    MessageSizeTooLargeError,
    ProducerFenced,
    RecordListTooLargeError,
    RecordTooLargeError,
)

from app.core.host_commands import ForkSource
from app.core.payload_rules import PayloadRules
from app.core.policy import HostPolicy
from app.core.run_snapshot import CHECKPOINT_KEY, decode_state, encode_state
from app.core.run_state import RunState
from app.core.validator import SourceRecord
from app.core.validator_batch import (
    Load,
    PartitionPlan,
    PartitionState,
    Refetch,
    Send,
    Topics,
    advanced,
    changelog_sends,
    checkpoint,
    fork_events,
    fork_sources,
    plan_batch,
    plan_unrecordable,
)
from app.core.validator_restore import (
    Restored,
    Snapshot,
    catch_up,
    decoded,
    read_changelog,
    restore_from_snapshot,
    restore_partition,
    tail_runs,
)
from app.shell.clock import now_rfc3339
from app.shell.worker.assignor import WarmAssignor, strategies
from app.shell.worker.kafka_io import group_consumer, read_range, read_tail, read_topic, until_done
from app.shell.worker.metrics import Metrics
from app.shell.worker.ownership import NO_OWNERSHIP, generation_of
from app.shell.worker.validator_store import ValidatorStore

__all__ = ["ValidatorConfig", "ValidatorLoop"]

log = logging.getLogger("a2ui_stream.validator")

ISOLATE_AFTER_FAILURES = 3
# How long a restore waits for the transactions pending on its log and dead-letter partitions
# to complete (their markers); past it, it reads what is visible, as before. The previous
# owner's open transaction is aborted by our producer's start, so this waits only for markers
# of transactions that were committing (seconds after a broker restart).
STABLE_SECONDS = 10.0
# A fenced partition is taken again after this long if the group still gives it to us and
# nothing was rebalanced meanwhile: a member dropped from the group learns it from its next
# heartbeat (at most the session timeout, 10 s here), and its revocation cancels the retake;
# the fence then came from the broker aborting one of our own transactions for its timeout.
FENCED_RETAKE_SECONDS = 10.0
TRANSACTION_TIMEOUT_MS = 30000


@dataclass(frozen=True)
class ValidatorConfig:
    bootstrap: str
    admission_topic: str
    log_topic: str
    deadletter_topic: str
    partitions: int
    group_id: str
    # The worker's own transactional id: only probed at start (does the broker grant
    # transactions?), which also fences a worker of an earlier version that wrote with it.
    transactional_id: str
    transactions: str = "auto"  # "auto" | "on" | "off"
    max_record_bytes: int = 1_048_576
    resumes_topic: str = ""
    fast_groups: bool = False
    max_batch: int = 5000
    batch_ms: int = 10
    changelog_topic: str = ""  # the run-state changelog; "" restores by replay only
    # Seconds between two changelog flushes of a partition (Kafka Streams' commit interval):
    # each flush writes every run changed since the last one once, so a long run's state is
    # not encoded again for every small batch (measured: with a flush per batch, 1,000
    # envelopes/s of 50 long runs took the p50 latency from 46-63 ms to 409-702 ms). A restore
    # folds the log tail written since the last flush. 0: every batch.
    changelog_interval: float = 1.0
    # Run states one batch writes at most, and their encoded bytes (at least one state): a
    # flush of more is spread over the next batches, so one batch never encodes every live
    # run. A long run's state holds every correlationId it recorded (~120 bytes each): 8 runs
    # of 400 envelopes were ~300 KB (up to 1.4 MB) in one batch, encoded and acknowledged
    # while the whole loop waited (measured: a flushing commit took 212 ms at p90 against
    # 37 ms for the others; docs/pipeline.md "Performance").
    changelog_flush_runs: int = 32
    changelog_flush_bytes: int = 64 * 1024
    # Run states kept in memory, across the owned partitions (issue 15: a worker's memory
    # follows its live work, not its history); the others wait in a local store under
    # ``state_dir`` (app.shell.worker.validator_store) until a record for them comes. 0 or no
    # ``state_dir``: every state in memory.
    cache_runs: int = 0
    state_dir: str = ""

    def partition_transactional_id(self, partition: int) -> str:
        """``<app id>-validator-p<partition>``: the same on every worker of the group, so the
        partition's next owner fences its previous one (the group id is ``<app id>-validator``)."""
        return f"{self.group_id}-p{partition}"


class _Owned:
    """One owned, restored admission partition: its run-state store, where deciding resumes,
    and (with transactions) the producer that fences it."""

    __slots__ = (
        "dead_from",
        "dirty",
        "evicted",
        "failures",
        "flushed",
        "flushing",
        "cycle",
        "cycle_from",
        "pointed",
        "log_from",
        "next_offset",
        "offsets_at",
        "offset_committed",
        "producer",
        "runs",
        "seen",
    )

    def __init__(
        self, restored: Restored, producer: AIOKafkaProducer | None, flushed: float
    ) -> None:
        self.runs = restored.runs
        self.dirty: dict[str, RunState] = {}  # changed since the last changelog flush
        self.flushed = flushed  # when the last flush began (loop time)
        self.flushing = False  # a flush spread over batches is under way
        self.cycle: tuple[str, ...] = ()  # ... and the runs it has still to write
        self.cycle_from = (0, 0)  # ... and the log and dead-letter ends when it began
        self.pointed: tuple[int, int] | None = None  # the ends our last checkpoint named
        self.next_offset = restored.start
        # The admission offset last committed (a transaction's or the restore's) and when.
        self.offset_committed = restored.start
        self.offsets_at = flushed
        self.seen = restored.seen
        self.log_from, self.dead_from = restored.log_from, restored.dead_from
        self.producer = producer
        self.evicted: set[str] = set()  # states in the local store only (ValidatorStore)

    @property
    def held(self) -> int:
        """Run states this partition holds, in memory and in the local store."""
        return len(self.runs) + len(self.evicted)

    def view(self) -> PartitionState:
        return PartitionState(
            self.runs, self.next_offset, self.seen, self.log_from, self.dead_from, self.evicted
        )

    def evictable(self, excess: int) -> list[str]:
        """Up to ``excess`` runs to take out of memory, least recently changed first: only
        runs whose state the changelog holds as memory does (not changed since the last
        flush, not in a flush under way)."""
        found: list[str] = []
        if excess <= 0:
            return found
        pending = set(self.cycle)
        for run_id in self.runs:
            if run_id in self.dirty or run_id in pending:
                continue
            found.append(run_id)
            if len(found) >= excess:
                break
        return found

    def install(
        self,
        plan: PartitionPlan,
        ends: dict[str, int],
        flush: _Flush | None,
        offsets_at: float | None,
    ) -> None:
        """The plan is committed: its run states are ours now. ``ends``: the offset past the
        last record batch it appended, per topic (a batch's base offset and its records: a
        lower bound, transaction markers take offsets too): the outputs of every later record
        are past it (unless some are written already: ``seen``). ``offsets_at``: when its
        commit included the admission offset (None: it did not)."""
        self.log_from, self.dead_from = advanced(self.view(), plan, ends)
        if offsets_at is not None:
            self.offset_committed, self.offsets_at = plan.next_offset, offsets_at
        self.dirty.update(plan.runs)
        if flush is not None:
            for run_id in flush.runs:  # written as the plan left them
                self.dirty.pop(run_id, None)
            if not self.flushing:
                self.flushed = flush.began
            self.flushing = bool(flush.rest)
            self.cycle, self.cycle_from = flush.rest, flush.began_from
            if flush.complete:
                self.pointed = flush.began_from
        for run_id, state in plan.runs.items():  # most recently changed last (``evictable``)
            self.runs.pop(run_id, None)
            self.runs[run_id] = state
        self.next_offset = plan.next_offset
        self.seen = plan.seen


@dataclass(frozen=True)
class _Flush:
    """What a commit flushes to the changelog. A flush writes the runs dirty when it began
    (a fixed set: runs that change meanwhile wait for the next flush, so a flush spread over
    batches ends however busy the runs are), and its checkpoint names the log and dead-letter
    ends from when it began (``began_from``): the tail a restore folds then covers every
    change since, whether the state written holds it already (skipped) or not.
    ``runs``: written by this commit; ``rest``: still to write (none: the checkpoint goes)."""

    began: float
    began_from: tuple[int, int]
    runs: tuple[str, ...]
    rest: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return not self.rest


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, loop: ValidatorLoop) -> None:
        self.loop = loop

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        # The lock waits for the batch in flight (its transactions commit or fail), so a
        # partition is never revoked while its transaction is open; then its state and its
        # producer go.
        async with self.loop.lock:
            self.loop.generation += 1
            for tp in revoked:
                self.loop.forget(tp)
            # issue 15 item 2: the read side follows (app.shell.worker.ownership; never blocks)
            self.loop.ownership.revoked(
                [tp.partition for tp in revoked], generation_of(self.loop.consumer)
            )

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        # Never restore inside the listener: a restore can wait seconds, and a member that does
        # not rejoin within the rebalance timeout is dropped from the group while it still
        # believes it owns its partitions (found by `a2ui-stream soak`, rebalance-kill). The
        # partitions stay paused until their producer is started and their state installed.
        async with self.loop.lock:
            self.loop.generation += 1
            for tp in assigned:
                self.loop.take_later(tp)
            # issue 15 item 2: the read side follows (app.shell.worker.ownership; never blocks)
            self.loop.ownership.assigned(
                [tp.partition for tp in assigned], generation_of(self.loop.consumer)
            )


class ValidatorLoop:
    def __init__(
        self, config: ValidatorConfig, policy: HostPolicy, rules: PayloadRules, metrics: Metrics
    ) -> None:
        self.config = config
        self.policy = policy
        self.rules = rules
        self.metrics = metrics
        self.topics = Topics(
            config.log_topic,
            config.deadletter_topic,
            config.resumes_topic,
            config.partitions,
            config.max_record_bytes,
            config.changelog_topic,
        )
        self.lock = asyncio.Lock()
        self.partitions: dict[int, _Owned] = {}  # owned and restored: decided by this loop
        self.consumer: AIOKafkaConsumer | None = None
        self.producer: AIOKafkaProducer | None = None  # the plain one, without transactions
        self.transactional = False
        self.ready = asyncio.Event()
        # Bumped by every assignment, revocation and install (each moves fetch positions): a
        # batch gathered across one is dropped and fetched again (app.core.validator_batch).
        self.generation = 0
        # partitions being taken (producer started, state restored) in the background
        self.taking: dict[TopicPartition, asyncio.Task[None]] = {}
        self.failures: dict[int, int] = {}  # failed commits in a row, per partition
        self.fenced = 0
        self.closing: set[asyncio.Task[None]] = set()  # producers being stopped
        self.ownership = NO_OWNERSHIP  # issue 15 item 2: the worker's (app.shell.worker.faust_app)
        # the group's assignment: warm partitions back to their worker (app.shell.worker.assignor);
        # None: aiokafka's round-robin
        self.assignor: WarmAssignor | None = None
        # Restores so far, by way ("changelog" | "replay"), and the records they read, by topic
        # ("changelog" | "log" | "deadletter"): a2ui_validator_restore* metrics, the shell tests.
        self.restores: dict[str, int] = {"changelog": 0, "replay": 0}
        self.restored_records: dict[str, int] = {"changelog": 0, "log": 0, "deadletter": 0}
        # Ends of the record batches a commit appended, per partition, until it is installed,
        # and when the commits that flush the changelog began.
        self.ends: dict[int, dict[str, int]] = {}
        self.flushing: dict[int, _Flush] = {}
        # partition -> when its commit under way sent the admission offset (``_offsets_due``)
        self.offsets_sent: dict[int, float] = {}
        # Run states out of memory (config.cache_runs), and how often they were moved.
        self.store: ValidatorStore | None = None
        self.evictions = 0
        # Batches decided and the partition commits (transactions) they took: the per-batch
        # round trips are most of a small batch's cost (a2ui_validator_batches_total).
        self.batches = 0
        self.commits = 0
        self.loads = 0
        self.replay_next: set[int] = set()  # a stored state did not decode: replay the log
        metrics.extra.append(self.render_metrics)

    # -- I/O: the only places that make Kafka clients (the shell tests replace them) -----------

    def _new_consumer(self) -> AIOKafkaConsumer:
        return group_consumer(
            self.config.bootstrap,
            self.config.group_id,
            fast_groups=self.config.fast_groups,
            assignors=strategies(self.assignor),
        )

    def _new_producer(self, transactional_id: str | None) -> AIOKafkaProducer:
        common: dict[str, Any] = {
            "bootstrap_servers": self.config.bootstrap,
            "acks": "all",
            "linger_ms": 5,
            "max_batch_size": 256 * 1024,
            # The log and dead-letter topics take records up to 8 MiB (topics/topics.json).
            "max_request_size": 9 * 1024 * 1024,
        }
        if transactional_id is None:
            return AIOKafkaProducer(**common)
        return AIOKafkaProducer(
            transactional_id=transactional_id,
            transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
            **common,
        )

    async def _read_outputs(self, partition: int) -> tuple[list[Any], list[Any]]:
        """Partition ``partition`` of the log and of the dead letters, read with
        ``read_committed`` until no transaction is pending there (bounded)."""
        log_records, dead = await asyncio.gather(
            *(
                read_topic(
                    self.config.bootstrap,
                    topic,
                    isolation="read_committed",
                    partitions=[partition],
                    timeout=300,
                    stable=STABLE_SECONDS,
                )
                for topic in (self.config.log_topic, self.config.deadletter_topic)
            )
        )
        return log_records, dead

    async def _read_changelog(self, partition: int) -> list[Any]:
        """Partition ``partition`` of the run-state changelog, whole (compacted: about one
        record per live run), read as ``_read_outputs`` reads."""
        return await read_topic(
            self.config.bootstrap,
            self.config.changelog_topic,
            isolation="read_committed",
            partitions=[partition],
            timeout=300,
            stable=STABLE_SECONDS,
        )

    async def _read_tail(
        self, partition: int, log_from: int, dead_from: int
    ) -> tuple[list[Any], list[Any], int, int]:
        """The log and dead-letter records of ``partition`` from those offsets on, and the two
        partitions' end offsets."""
        (log_records, log_end), (dead, dead_end) = await asyncio.gather(
            *(
                read_tail(
                    self.config.bootstrap,
                    topic,
                    partition,
                    start,
                    timeout=300,
                    stable=STABLE_SECONDS,
                )
                for topic, start in (
                    (self.config.log_topic, log_from),
                    (self.config.deadletter_topic, dead_from),
                )
            )
        )
        return log_records, dead, log_end, dead_end

    async def _read_source(self, source: ForkSource) -> list[dict[str, Any]] | None:
        try:
            records = await read_range(
                self.config.bootstrap,
                self.config.log_topic,
                source.partition,
                source.first_offset,
                source.last_offset,
            )
        except (TimeoutError, OSError, ValueError) as exc:
            log.warning("validator: fork source unreadable (%s)", type(exc).__name__)
            return None
        return fork_events(source, records)

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        if self.config.cache_runs > 0 and self.config.state_dir:
            self.store = ValidatorStore.open(Path(self.config.state_dir))
        self.transactional = await self._probe_transactions()
        if not self.transactional:
            self.producer = self._new_producer(None)
            await self.producer.start()
        self.consumer = self._new_consumer()
        await self.consumer.start()
        self.consumer.subscribe([self.config.admission_topic], listener=_Rebalance(self))

    async def _probe_transactions(self) -> bool:
        """Whether the broker grants transactions: start (and stop) a transactional producer
        with the worker's own id."""
        if self.config.transactions == "off":
            return False
        probe = self._new_producer(self.config.transactional_id)
        try:
            await asyncio.wait_for(probe.start(), 30)
        except Exception as exc:
            if self.config.transactions == "on":
                raise
            log.warning(
                "validator: the broker refused transactions (%s); exactly-once then rests "
                "on source-offset idempotency (docs/pipeline.md)",
                type(exc).__name__,
            )
            return False
        finally:
            with contextlib.suppress(Exception):
                await probe.stop()
        # (A worker id of the form p<n> would name partition n's producer here and fence it
        # once: a retake 10 s later, never a second outcome.)
        log.info(
            "validator: transactional producer per admission partition (%s-p<n>)",
            self.config.group_id,
        )
        return True

    async def stop(self) -> None:
        for task in list(self.taking.values()):
            task.cancel()
        await asyncio.gather(*self.taking.values(), return_exceptions=True)
        self.taking.clear()
        # The changelog once more (as Kafka Streams commits on close), so that the next owner
        # reads no log tail; best effort: without it that owner folds the tail.
        with contextlib.suppress(Exception):
            async with self.lock:
                await asyncio.wait_for(self._flush_idle(due=False), 10)
        for task in list(self.taking.values()):  # a flush that failed takes its partition again
            task.cancel()
        await asyncio.gather(*self.taking.values(), return_exceptions=True)
        self.taking.clear()
        if self.consumer is not None:
            with contextlib.suppress(Exception):
                await self.consumer.stop()
        producers = [owned.producer for owned in self.partitions.values()] + [self.producer]
        self.partitions.clear()
        for producer in producers:
            if producer is not None:
                with contextlib.suppress(Exception):
                    await producer.stop()
        await asyncio.gather(*self.closing, return_exceptions=True)
        if self.store is not None:
            self.store.close()
            self.store = None

    # -- ownership: take, forget, fenced -------------------------------------------------------

    def _tp(self, partition: int) -> TopicPartition:
        return TopicPartition(self.config.admission_topic, partition)

    def _close_later(self, producer: AIOKafkaProducer | None) -> None:
        if producer is None:
            return

        async def close() -> None:
            with contextlib.suppress(Exception):
                await producer.stop()

        task = asyncio.create_task(close())
        self.closing.add(task)
        task.add_done_callback(self.closing.discard)

    def forget(self, tp: TopicPartition) -> None:
        """Drop partition ``tp``: cancel its take, its state and its producer go. Call with
        the lock held."""
        task = self.taking.pop(tp, None)
        if task is not None:
            task.cancel()
        owned = self.partitions.pop(tp.partition, None)
        if owned is not None:
            self._close_later(owned.producer)
            if self.store is not None and owned.evicted:
                self.store.drop(tp.partition)

    def take_later(self, tp: TopicPartition, *, after: float = 0.0) -> None:
        """Pause ``tp`` and take it in the background (``take``), ``after`` seconds from now;
        it is fetched again once its state is installed. Call with the lock held."""
        assert self.consumer is not None
        self.forget(tp)
        self.consumer.pause(tp)
        self.taking[tp] = asyncio.create_task(self._take_until_done(tp, after))

    async def _take_until_done(self, tp: TopicPartition, after: float) -> None:
        if after:
            await asyncio.sleep(after)
        await until_done(f"validator: taking partition {tp.partition}", lambda: self.take(tp), log)

    async def take(self, tp: TopicPartition) -> None:
        """Start ``tp``'s transactional producer (which fences its previous owner and aborts
        that one's open transaction), then rebuild ``tp``'s state (``_restore``) and bring the
        changelog up to it; if ``tp`` is still ours, install the state, move the fetch position
        to where deciding starts and resume the partition.

        The reads wait until no transaction is pending on them and only then is the committed
        offset fetched, and the consumer is moved to it: after a broker restart the markers of
        our last acknowledged transaction arrive seconds late, and the consumer's own position
        came from a committed offset fetched before them (found by `a2ui-stream soak`,
        broker-restart, docs/reliability.md). Outputs past a committed offset that is still
        stale are ``seen`` and skipped (and the changelog's checkpoint, read in the same
        stable way, is never stale)."""
        assert self.consumer is not None
        producer: AIOKafkaProducer | None = None
        try:
            if self.transactional:
                producer = self._new_producer(self.config.partition_transactional_id(tp.partition))
                await asyncio.wait_for(producer.start(), 60)
            restored, before, way, committed = await self._restore(tp)
            writes: tuple[Send, ...] = ()
            if self.config.changelog_topic:
                writes = catch_up(self.config.changelog_topic, tp.partition, before, restored)
            # A start past the committed offset (the checkpoint's: a commit that failed after
            # its writes, without transactions) is committed too, or nothing would move it.
            offset = restored.start if restored.start > committed else None
            await self._write(tp, producer, writes, offset)
            if self.store is not None:  # the runs restored still encoded: out of memory
                self.store.drop(tp.partition)
                self.store.put_many(tp.partition, restored.raw.items())
            async with self.lock:
                if self.taking.get(tp) is not asyncio.current_task():
                    return  # revoked (or taken again) meanwhile
                del self.taking[tp]
                self.partitions[tp.partition] = _Owned(
                    restored, producer, asyncio.get_running_loop().time()
                )
                self.partitions[tp.partition].evicted.update(restored.raw)
                producer = None  # the partition's now
                self._evict(tp.partition)
                self.generation += 1
                self.consumer.seek(tp, restored.start)
                self.consumer.resume(tp)
        finally:
            self._close_later(producer)
        log.info(
            # (" restored: " is what the fault scenarios count: app/devtools/fault_scenarios.py)
            "validator: partition %d restored: %d runs (by %s), %d outcomes past offset %d",
            tp.partition,
            len(restored.runs) + len(restored.raw),
            way,
            len(restored.seen),
            restored.start,
        )

    async def _restore(self, tp: TopicPartition) -> tuple[Restored, Snapshot | None, str, int]:
        """``tp``'s state: from the changelog and the log tail past its checkpoint, or, when the
        changelog cannot say (absent, empty, unreadable, or not this log's), by replaying the
        whole log and dead-letter partitions (app.core.validator_restore). Also: the changelog
        as read, which way it went, and the committed offset."""
        assert self.consumer is not None
        partition = tp.partition
        count = self.restored_records
        snapshot = None
        lazy = self.store is not None  # decode only the runs the tail continues
        if self.config.changelog_topic and partition not in self.replay_next:
            records = await self._read_changelog(partition)
            count["changelog"] += len(records)
            snapshot = read_changelog(partition, records, decode=not lazy)
        self.replay_next.discard(partition)
        if snapshot is not None and snapshot.checkpoint is not None:
            point = snapshot.checkpoint
            log_tail, dead_tail, log_end, dead_end = await self._read_tail(
                partition, point.log_from, point.dead_from
            )
            count["log"] += len(log_tail)
            count["deadletter"] += len(dead_tail)
            if lazy:
                snapshot = decoded(snapshot, tail_runs(log_tail))
            committed = await self.consumer.committed(tp) or 0
            restored = None
            if snapshot is not None:
                restored = restore_from_snapshot(
                    partition,
                    committed,
                    snapshot,
                    log_tail,
                    dead_tail,
                    log_end=log_end,
                    dead_end=dead_end,
                )
            if restored is not None:
                self.restores["changelog"] += 1
                return restored, snapshot, "changelog", committed
            log.warning(
                "validator: partition %d: the run-state changelog does not match the log; "
                "replaying the log",
                partition,
            )
        log_records, dead = await self._read_outputs(partition)
        count["log"] += len(log_records)
        count["deadletter"] += len(dead)
        committed = await self.consumer.committed(tp) or 0
        restored = restore_partition(
            partition,
            committed,
            log_records,
            dead,
            log_end=_end(log_records),
            dead_end=_end(dead),
        )
        self.restores["replay"] += 1
        return restored, snapshot, "replay", committed

    async def _write(
        self,
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
                    await asyncio.gather(*(f for _, f in await self._send_batches(producer, part)))
                if offset is not None:
                    await producer.send_offsets_to_transaction({tp: offset}, self.config.group_id)
            return
        assert self.producer is not None and self.consumer is not None
        for part in (states, points):
            await asyncio.gather(*(f for _, f in await self._send_batches(self.producer, part)))
        if offset is not None:
            await self.consumer.commit({tp: offset})

    def _drop(self, partition: int, retake_after: float) -> None:
        """Stop deciding for ``partition``: its state and producer go, it is paused, and taken
        again (a fresh producer and a restore) ``retake_after`` seconds from now unless a
        rebalance decides otherwise first. Call with the lock held."""
        self.take_later(self._tp(partition), after=retake_after)

    # -- the loop -----------------------------------------------------------------------------

    async def run(self, stopping: asyncio.Event) -> None:
        assert self.consumer is not None
        # The run states are many small long-lived objects; CPython's default GC thresholds
        # re-scan them every few hundred allocations (measured: a third of the decision time
        # on a 20k-record run). Collect young objects far less often.
        gc.set_threshold(100_000, 50, 50)
        self.ready.set()
        while not stopping.is_set():
            gathered = self.generation
            batch = await self._gather_batch()
            if not batch:
                async with self.lock:
                    await self._flush_idle()
                continue
            async with self.lock:
                try:
                    await self._process(batch, gathered)
                except Exception as exc:
                    # Every expected failure is handled per partition; this is the net under a
                    # bug or a client surprise: a crash would leave every partition undecided.
                    log.error(
                        "validator: batch failed (%s); taking its partitions again",
                        type(exc).__name__,
                    )
                    for tp in batch:
                        if tp.partition in self.partitions:
                            self._drop(tp.partition, 0.0)

    async def _gather_batch(self) -> dict[TopicPartition, list[Any]]:
        """Up to ``max_batch`` records, collected for at most ``batch_ms``. One round of
        transactions (or one produce-then-commit round trip) per batch: the round trip, not the
        CPU, bounds a small batch, so batches are as large as the latency budget allows."""
        assert self.consumer is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.batch_ms / 1000
        batch: dict[TopicPartition, list[Any]] = {}
        count = 0
        while count < self.config.max_batch:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            got = await self.consumer.getmany(
                timeout_ms=max(1, int(remaining * 1000)),
                max_records=self.config.max_batch - count,
            )
            if not got:
                break
            for tp, records in got.items():
                batch.setdefault(tp, []).extend(records)
                count += len(records)
        return batch

    async def _process(self, fetched: dict[TopicPartition, list[Any]], gathered: int) -> None:
        """One batch: the core plans it, the plans are written and committed. Call with the
        lock held."""
        batch = {
            tp.partition: [
                SourceRecord(
                    tp.topic, tp.partition, r.offset, r.key, r.value, tuple(r.headers or ())
                )
                for r in records
            ]
            for tp, records in fetched.items()
        }
        isolated = {
            p: records
            for p, records in batch.items()
            if self.failures.get(p, 0) >= ISOLATE_AFTER_FAILURES and p in self.partitions
        }
        sources = {
            s: await self._read_source(s) for s in fork_sources(batch, self.topics.max_bytes)
        }
        decided = {p: records for p, records in batch.items() if p not in isolated}
        self._load_keyed(decided)
        while True:
            planned = plan_batch(
                decided,
                {p: owned.view() for p, owned in self.partitions.items()},
                gathered=gathered,
                generation=self.generation,
                policy=self.policy,
                rules=self.rules,
                now=now_rfc3339(),
                topics=self.topics,
                fetched=sources.get,
            )
            if not isinstance(planned, Load):
                break
            self._load(planned)
        if isinstance(planned, Refetch):
            # A rebalance ran while this batch was gathered: the listener runs beside getmany,
            # so the batch may hold records fetched before a restore moved the positions, and
            # again after it (found by CI: test_crash_safety_under_sigkill decided such records
            # twice). Fetch it again.
            log.info("validator: dropping a batch gathered across a rebalance")
            assert self.consumer is not None
            for partition, position in planned.positions.items():
                self.consumer.seek(self._tp(partition), position)
            return
        results = await self._commit(planned)
        self.batches += 1
        self.commits += len(planned)
        for plan, failure in zip(planned, results, strict=True):
            self._settle(plan, failure)
        for partition, records in isolated.items():
            await self._process_isolated(partition, records, sources)

    # -- run states out of memory (config.cache_runs) -----------------------------------------

    def _load_keyed(self, batch: dict[int, list[SourceRecord]]) -> None:
        """Put back into memory the evicted runs the records' keys name (a record's key is its
        runId, or intake refuses it before any state is read); ``plan_batch`` answers
        ``Load`` for any other."""
        for partition, records in batch.items():
            owned = self.partitions.get(partition)
            if owned is None or not owned.evicted:
                continue
            wanted: set[str] = set()
            for record in records:
                if record.key is None:
                    continue
                try:
                    run_id = record.key.decode()
                except UnicodeDecodeError:
                    continue
                if run_id in owned.evicted:
                    wanted.add(run_id)
            if wanted:
                self._load(Load({partition: frozenset(wanted)}))

    def _load(self, load: Load) -> None:
        """The evicted states ``load`` names, from the local store back into memory."""
        assert self.store is not None
        for partition, run_ids in load.runs.items():
            owned = self.partitions[partition]
            for run_id in run_ids:
                raw = self.store.get(partition, run_id)
                state = None if raw is None else decode_state(run_id, raw)
                if state is None:  # not a state this version reads: the log is replayed
                    self.replay_next.add(partition)
                    raise RuntimeError(
                        f"validator: an evicted run state of partition {partition} is unreadable"
                    )
                owned.evicted.discard(run_id)
                owned.runs[run_id] = state
                self.loads += 1

    def _evict(self, partition: int) -> None:
        """Keep at most this partition's share of ``cache_runs`` states in memory: the least
        recently changed clean ones go to the local store, encoded as the changelog holds
        them."""
        owned = self.partitions.get(partition)
        if self.store is None or owned is None:
            return
        share = max(1, -(-self.config.cache_runs // max(1, len(self.partitions))))
        victims = owned.evictable(len(owned.runs) - share)
        if not victims:
            return
        self.store.put_many(
            partition, [(run_id, encode_state(owned.runs[run_id])) for run_id in victims]
        )
        for run_id in victims:
            del owned.runs[run_id]
            owned.evicted.add(run_id)
        self.evictions += len(victims)

    def _settle(self, plan: PartitionPlan, failure: BaseException | None) -> None:
        """After a partition's commit: keep its plan, or drop the partition (fenced: another
        member owns it now; failed: take it again, which rebuilds its state from the log)."""
        owned = self.partitions.get(plan.partition)
        if owned is None:
            return
        ends = self.ends.pop(plan.partition, {})
        flush = self.flushing.pop(plan.partition, None)
        offsets_at = self.offsets_sent.pop(plan.partition, None)
        if failure is None:
            owned.install(plan, ends, flush, offsets_at)
            self.failures.pop(plan.partition, None)
            for outcome, code in plan.counts:
                self.metrics.count(outcome, code)
            self._evict(plan.partition)
            for run_id, sequence, drift in plan.drifts:
                log.warning(
                    "envelope_schema_version_drift run=%s sequence=%d from=%d",
                    run_id,
                    sequence,
                    drift,
                )
        elif _fenced(failure):
            self.fenced += 1
            log.warning(
                "validator: partition %d was fenced (%s): another member owns it now; its "
                "state is dropped and nothing more is decided for it here",
                plan.partition,
                type(failure).__name__,
            )
            self._drop(plan.partition, FENCED_RETAKE_SECONDS)
        else:
            failures = self.failures[plan.partition] = self.failures.get(plan.partition, 0) + 1
            # The type only: an exception's text may quote a producer's payload.
            log.error(
                "validator: partition %d: batch failed (%s, %d in a row); taking it again "
                "from its committed offset",
                plan.partition,
                type(failure).__name__,
                failures,
            )
            self._drop(plan.partition, 0.0)

    async def _flush_idle(self, *, due: bool = True) -> None:
        """Flush the changelog of partitions whose batches stopped with runs unflushed, and
        commit the admission offset of those decided past their last committed one, once
        their interval has passed (``due``; else now), as Kafka Streams commits on its
        interval with or without new records. Call with the lock held."""
        if not self.config.changelog_topic:
            return
        while True:  # not ``due``: until every flush has ended (one spreads over commits)
            now = asyncio.get_running_loop().time()
            plans = [
                PartitionPlan(p, (), owned.next_offset, {}, owned.seen, (), checkpointed=True)
                for p, owned in self.partitions.items()
                if owned.flushing
                # at stop also a checkpoint behind the log (it names where the last flush
                # began): then the next owner reads no log tail
                or (not due and owned.pointed != (owned.log_from, owned.dead_from))
                or (
                    owned.dirty
                    and (not due or now - owned.flushed >= self.config.changelog_interval)
                )
                # decided past the offset last committed: it is committed within the interval
                or (
                    owned.offset_committed < owned.next_offset
                    and (not due or self._offsets_due(owned))
                )
            ]
            if not plans:
                return
            if not due:
                for plan in plans:  # the interval does not hold it back (``_flush_of``)
                    self.partitions[plan.partition].flushed = float("-inf")
            for plan, failure in zip(plans, await self._commit(plans, force=True), strict=True):
                self._settle(plan, failure)
            if due:
                return

    async def _commit(
        self, plans: Sequence[PartitionPlan], *, force: bool = False
    ) -> list[BaseException | None]:
        """Write and commit every plan (``force``: even one that writes and moves nothing);
        per plan, None or what failed it."""
        work = [plan for plan in plans if force or self._has_work(plan)]
        if not work:
            return [None] * len(plans)
        if self.transactional:
            done = await asyncio.gather(
                *(self._commit_partition(plan) for plan in work), return_exceptions=True
            )
            failed = {plan.partition: r for plan, r in zip(work, done, strict=True) if r}
            return [failed.get(plan.partition) for plan in plans]
        assert self.consumer is not None and self.producer is not None
        try:
            # Without a transaction nothing is atomic: the changelog records go only once the
            # outputs they summarize are acknowledged, so a crash leaves the changelog behind
            # the log (the restore folds the tail), never ahead of it (app.core.validator_restore).
            outputs = [s for plan in work for s in plan.sends]
            sent = await self._send_batches(self.producer, outputs)
            await asyncio.gather(*(f for _, f in sent))
            states = [s for plan in work for s in self._flush_of(plan)]
            await asyncio.gather(*(f for _, f in await self._send_batches(self.producer, states)))
            points: list[Send] = []
            for plan in work:
                self.ends[plan.partition] = self._ends_of(sent, plan.partition)
                points += self._checkpoint(plan)
            # ... and the checkpoints last: one that landed without its run states would
            # send a restore past events those states do not hold.
            await asyncio.gather(*(f for _, f in await self._send_batches(self.producer, points)))
            await self.consumer.commit({self._tp(p.partition): p.next_offset for p in work})
            now = asyncio.get_running_loop().time()
            self.offsets_sent.update((plan.partition, now) for plan in work)
        except Exception as exc:
            written = {id(plan) for plan in work}
            return [exc if id(plan) in written else None for plan in plans]
        return [None] * len(plans)

    def _has_work(self, plan: PartitionPlan) -> bool:
        owned = self.partitions.get(plan.partition)
        return bool(plan.sends) or owned is None or plan.next_offset > owned.next_offset

    async def _commit_partition(self, plan: PartitionPlan) -> None:
        owned = self.partitions[plan.partition]
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
            flush = self._flush_of(plan)  # (before the checkpoint: it reads the flush)
            points = self._checkpoint(plan)
            sends = [*plan.sends, *flush, *points]
            sent = await self._send_batches(producer, sends)
            await asyncio.gather(*(f for _, f in sent))
            self.ends[plan.partition] = self._ends_of(sent, plan.partition)
            if points or self._offsets_due(owned):
                self.offsets_sent[plan.partition] = asyncio.get_running_loop().time()
                await producer.send_offsets_to_transaction(
                    {self._tp(plan.partition): plan.next_offset}, self.config.group_id
                )

    def _offsets_due(self, owned: _Owned) -> bool:
        """Whether a transaction of ``owned`` must carry its admission offset although it
        writes no checkpoint: always without a changelog (a restore then replays from the
        committed offset, and everything past it is ``seen``), else once
        ``changelog_interval`` has passed since the last one that did."""
        if not self.config.changelog_topic:
            return True
        interval = self.config.changelog_interval
        return asyncio.get_running_loop().time() - owned.offsets_at >= interval

    def _flush_of(self, plan: PartitionPlan) -> list[Send]:
        """The run states ``plan``'s commit flushes to the changelog (the runs changed since
        the last flush, oldest first, at most ``changelog_flush_runs`` and about
        ``changelog_flush_bytes``), when a flush is due
        (``changelog_interval``) or under way; else nothing."""
        owned = self.partitions.get(plan.partition)
        topic = self.config.changelog_topic
        if not topic or owned is None or not plan.checkpointed:
            return []
        now = asyncio.get_running_loop().time()
        if owned.flushing:
            began_from, todo = owned.cycle_from, owned.cycle
        elif now - owned.flushed < self.config.changelog_interval:
            return []
        else:  # a flush begins: the runs dirty now (oldest changes first), ends before this plan
            began_from, todo = (
                (owned.log_from, owned.dead_from),
                tuple({**owned.dirty, **plan.runs}),
            )
        sends: list[Send] = []
        size, written = 0, 0
        for run_id in itertools.islice(todo, max(1, self.config.changelog_flush_runs)):
            written += 1
            run = plan.runs.get(run_id) or owned.dirty.get(run_id) or owned.runs.get(run_id)
            if run is None:
                continue  # not held any more (cannot happen today): nothing to write
            sends += changelog_sends(topic, plan.partition, {run_id: run})
            size += len(sends[-1].value or b"")
            if size >= self.config.changelog_flush_bytes:
                break
        self.flushing[plan.partition] = _Flush(now, began_from, todo[:written], todo[written:])
        return sends

    def _checkpoint(self, plan: PartitionPlan) -> list[Send]:
        """The checkpoint of a plan whose commit ends a flush, or nothing: ``plan``'s next
        offset, and the log and dead-letter ends from when the flush began (``_Flush``). It
        needs no acknowledgment of the plan's appends, so in a transaction it goes with them."""
        owned = self.partitions.get(plan.partition)
        flush = self.flushing.get(plan.partition)
        if flush is None or not flush.complete or owned is None:
            return []
        began = PartitionState(owned.runs, owned.next_offset, owned.seen, *flush.began_from)
        return [checkpoint(self.config.changelog_topic, began, plan, {})]

    def _ends_of(
        self, sent: list[tuple[tuple[str, int, int], asyncio.Future[Any]]], partition: int
    ) -> dict[str, int]:
        """The offset past the last record batch appended to ``partition`` of the log and of
        the dead letters (their futures are done)."""
        names = {self.config.log_topic: "log", self.config.deadletter_topic: "deadletter"}
        ends: dict[str, int] = {}
        for (topic, number, count), future in sent:
            name = names.get(topic)
            offset = getattr(future.result(), "offset", None)
            if name is not None and number == partition and isinstance(offset, int):
                ends[name] = max(ends.get(name, 0), offset + count)
        return ends

    async def _process_isolated(
        self,
        partition: int,
        records: list[SourceRecord],
        sources: dict[ForkSource, list[dict[str, Any]] | None],
    ) -> None:
        """After repeated failures: one record per transaction, so one record the broker will
        not take (e.g. a recorded event over the topic's size limit) cannot stall its
        partition. Such a record becomes a ``record_unrecordable`` dead letter
        (``plan_unrecordable``)."""
        for record in records:
            owned = self.partitions.get(partition)
            if owned is None:
                return  # fenced or failed meanwhile: it is being taken again
            self._load_keyed({partition: [record]})
            while True:
                planned = plan_batch(
                    {partition: [record]},
                    {partition: owned.view()},
                    gathered=0,
                    generation=0,
                    policy=self.policy,
                    rules=self.rules,
                    now=now_rfc3339(),
                    topics=self.topics,
                    fetched=sources.get,
                )
                if not isinstance(planned, Load):
                    break
                self._load(planned)
            assert not isinstance(planned, Refetch)
            [plan] = planned
            [failure] = await self._commit([plan])
            if failure is not None and _the_records_fault(failure) and not _fenced(failure):
                log.error(
                    "validator: record %d:%d cannot be recorded (%s); dead-lettering it "
                    "without its bytes",
                    partition,
                    record.offset,
                    type(failure).__name__,
                )
                try:
                    await self._renew_producer(partition, owned)
                except Exception as exc:
                    self._settle(plan, exc)
                    return
                plan = plan_unrecordable(
                    record,
                    type(failure).__name__,
                    owned.view(),
                    self.policy,
                    now_rfc3339(),
                    self.topics,
                )
                [failure] = await self._commit([plan])
            self._settle(plan, failure)

    async def _renew_producer(self, partition: int, owned: _Owned) -> None:
        """A fresh producer for a partition we own after its transaction was refused (what
        aiokafka's producer holds after that is not worth trusting): its start fences only our
        own previous one."""
        if owned.producer is None:
            return  # without transactions the one plain producer carries on
        self._close_later(owned.producer)
        owned.producer = None
        producer = self._new_producer(self.config.partition_transactional_id(partition))
        try:
            await asyncio.wait_for(producer.start(), 60)
        except BaseException:
            self._close_later(producer)
            raise
        owned.producer = producer

    async def _send_batches(
        self, producer: AIOKafkaProducer, sends: Sequence[Send]
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
                builder.append(key=send.key, value=send.value, timestamp=None, headers=headers)
                is None
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

    # -- what it reports ----------------------------------------------------------------------

    def lag(self) -> dict[int, int]:
        """Records not yet processed, per owned and restored admission partition (high
        watermark minus the next offset to decide)."""
        consumer = self.consumer
        if consumer is None:
            return {}
        lags: dict[int, int] = {}
        for tp in consumer.assignment():
            high = consumer.highwater(tp)
            owned = self.partitions.get(tp.partition)
            if high is not None and owned is not None:
                lags[tp.partition] = max(0, high - owned.next_offset)
        return lags

    def render_metrics(self) -> list[str]:
        return [
            "# HELP a2ui_validator_restores_total Partition restores, by way: from the run-state "
            "changelog, or by replaying the log.",
            "# TYPE a2ui_validator_restores_total counter",
            *(f'a2ui_validator_restores_total{{way="{k}"}} {v}' for k, v in self.restores.items()),
            "# HELP a2ui_validator_restore_records_total Records read by restores, by topic.",
            "# TYPE a2ui_validator_restore_records_total counter",
            *(
                f'a2ui_validator_restore_records_total{{topic="{k}"}} {v}'
                for k, v in self.restored_records.items()
            ),
            "# HELP a2ui_validator_fenced_total Commits refused because another member had "
            "taken the partition over (its producer was fenced).",
            "# TYPE a2ui_validator_fenced_total counter",
            f"a2ui_validator_fenced_total {self.fenced}",
            "# HELP a2ui_validator_run_states_in_memory Run states held in memory, of all held "
            "(A2UI_STREAM_VALIDATOR_CACHE_RUNS bounds it; the rest wait in the local store).",
            "# TYPE a2ui_validator_run_states_in_memory gauge",
            "a2ui_validator_run_states_in_memory "
            f"{sum(len(owned.runs) for owned in self.partitions.values())}",
            "# HELP a2ui_validator_run_state_moves_total Run states moved out of memory to "
            "the local store (evicted) and back (loaded).",
            "# TYPE a2ui_validator_run_state_moves_total counter",
            f'a2ui_validator_run_state_moves_total{{way="evicted"}} {self.evictions}',
            f'a2ui_validator_run_state_moves_total{{way="loaded"}} {self.loads}',
            "# HELP a2ui_validator_batches_total Record batches decided.",
            "# TYPE a2ui_validator_batches_total counter",
            f"a2ui_validator_batches_total {self.batches}",
            "# HELP a2ui_validator_commits_total Partition commits of those batches (one "
            "transaction each, or one produce-then-commit without transactions).",
            "# TYPE a2ui_validator_commits_total counter",
            f"a2ui_validator_commits_total {self.commits}",
            "# HELP a2ui_validator_partitions Admission partitions this validator decides for.",
            "# TYPE a2ui_validator_partitions gauge",
            f"a2ui_validator_partitions {len(self.partitions)}",
        ]


# What the broker refuses because of the record itself. Anything else (a connection lost, a
# timeout, a coordinator moving) says nothing about the record: dead-lettering it as
# unrecordable then would give a good record the wrong outcome.
_RECORD_FAULTS = (
    MessageSizeTooLargeError,
    RecordTooLargeError,
    RecordListTooLargeError,
    CorruptRecordException,
    ValueError,  # _send_batches: larger than a whole record batch
)


def _caused_by(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kinds):
            return True
        seen = seen.__cause__
    return False


def _the_records_fault(exc: BaseException) -> bool:
    return _caused_by(exc, _RECORD_FAULTS)


def _fenced(exc: BaseException) -> bool:
    """Another producer with the partition's transactional id started after ours (aiokafka
    raises ProducerFenced for the broker's INVALID_PRODUCER_EPOCH)."""
    return _caused_by(exc, (ProducerFenced, InvalidProducerEpoch))


def _end(records: Sequence[Any]) -> int:
    """The offset past the last record read (a lower bound of the partition's end)."""
    return records[-1].offset + 1 if records else 0
