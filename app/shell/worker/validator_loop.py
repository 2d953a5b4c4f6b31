"""The validator: admission topic -> per-run log or dead-letter topic, exactly once, each
admission partition fenced by its own transactional producer.

Shell module, a thin driver (the Kafka Streams split between a task's processing and its
driver). It runs inside the Faust worker (started by ``app.shell.worker.faust_app``) with its own
aiokafka consumer and producers, for two measured reasons (docs/pipeline.md): Faust's
per-event stream machinery caps a worker near 6k events/s (../shared/spec/kafka.md), and one
Kafka transaction must span the log append, the dead letter and the admission offset. Per
batch it fetches, calls ``app.core.admission.validator_batch.plan_batch`` once, writes what that
returns and commits; every decision (which records, what goes where, which offset) is the core's.

This module holds the loop's state, its lifecycle, the rebalance listener, the loop itself and
the I/O methods (the only places that make Kafka clients; the shell tests replace them). The
rest is in sibling modules whose functions take the loop: ``validator_process`` (gather a
batch, have the core plan it), ``validator_take`` (fence a partition's previous owner, restore
its state, install it), ``validator_commit`` (write and commit a batch's plans, keep or drop
each partition), ``validator_cache`` (run states out of memory),
``validator_metrics`` (what it reports), over the values of ``validator_partition`` and the
exception classifiers of ``validator_faults``. It imports ``app.core``, the shared shell
modules and ``app.shell.worker``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener

from app.core.admission.host_commands_call import ForkSource
from app.core.admission.payload_rules import PayloadRules
from app.core.admission.policy import HostPolicy
from app.core.admission.validator_batch import Topics
from app.core.admission.validator_forks import fork_events
from app.core.runlog.events import RecordedEvent
from app.shell.worker import validator_metrics
from app.shell.worker.assignor import WarmAssignor, strategies
from app.shell.worker.kafka_io import group_consumer, read_range, read_tail, read_topic, until_done
from app.shell.worker.metrics import Metrics
from app.shell.worker.ownership import NO_OWNERSHIP, generation_of
from app.shell.worker.validator_commit import flush_idle
from app.shell.worker.validator_config import ValidatorConfig
from app.shell.worker.validator_partition import Flush, OwnedPartition
from app.shell.worker.validator_process import gather_batch, process_batch
from app.shell.worker.validator_store import ValidatorStore
from app.shell.worker.validator_take import take

__all__ = ["ValidatorLoop"]

log = logging.getLogger("a2ui_stream.validator")

# How long a restore waits for the transactions pending on its log and dead-letter partitions
# to complete (their markers); past it, it reads what is visible, as before. The previous
# owner's open transaction is aborted by our producer's start, so this waits only for markers
# of transactions that were committing (seconds after a broker restart).
STABLE_SECONDS = 10.0
TRANSACTION_TIMEOUT_MS = 30000


def topics_of(config: ValidatorConfig) -> Topics:
    """The topics and limits the core's planning reads, from the loop's configuration."""
    return Topics(
        config.log_topic,
        config.deadletter_topic,
        config.resumes_topic,
        config.partitions,
        config.max_record_bytes,
        config.changelog_topic,
    )


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
        self.topics = topics_of(config)
        self.lock = asyncio.Lock()
        self.partitions: dict[int, OwnedPartition] = {}  # owned and restored: decided by this loop
        self.consumer: AIOKafkaConsumer | None = None
        self.producer: AIOKafkaProducer | None = None  # the plain one, without transactions
        self.transactional = False
        self.ready = asyncio.Event()
        # Bumped by every assignment, revocation and install (each moves fetch positions): a
        # batch gathered across one is fetched again (app.core.admission.validator_batch).
        self.generation = 0
        self.gathered_at: float | None = None  # the last batch's gather (gather.gather)
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
        self.flushing: dict[int, Flush] = {}
        # partition -> when its commit under way sent the admission offset (``offsets_due``)
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

    def new_consumer(self) -> AIOKafkaConsumer:
        return group_consumer(
            self.config.bootstrap,
            self.config.group_id,
            fast_groups=self.config.fast_groups,
            assignors=strategies(self.assignor),
        )

    def new_producer(self, transactional_id: str | None) -> AIOKafkaProducer:
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

    async def read_outputs(self, partition: int) -> tuple[list[Any], list[Any]]:
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

    async def read_changelog(self, partition: int) -> list[Any]:
        """Partition ``partition`` of the run-state changelog, whole (compacted: about one
        record per live run), read as ``read_outputs`` reads."""
        return await read_topic(
            self.config.bootstrap,
            self.config.changelog_topic,
            isolation="read_committed",
            partitions=[partition],
            timeout=300,
            stable=STABLE_SECONDS,
        )

    async def read_tail(
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

    async def read_source(self, source: ForkSource) -> list[RecordedEvent] | None:
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
            self.producer = self.new_producer(None)
            await self.producer.start()
        self.consumer = self.new_consumer()
        await self.consumer.start()
        self.consumer.subscribe([self.config.admission_topic], listener=_Rebalance(self))

    async def _probe_transactions(self) -> bool:
        """Whether the broker grants transactions: start (and stop) a transactional producer
        with the worker's own id."""
        if self.config.transactions == "off":
            return False
        probe = self.new_producer(self.config.transactional_id)
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

    # -- ownership: take later, forget, drop (the take itself: validator_take) ----------------

    def tp(self, partition: int) -> TopicPartition:
        return TopicPartition(self.config.admission_topic, partition)

    def close_later(self, producer: AIOKafkaProducer | None) -> None:
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
            self.close_later(owned.producer)
            if self.store is not None and owned.evicted:
                self.store.drop(tp.partition)

    def take_later(self, tp: TopicPartition, *, after: float = 0.0) -> None:
        """Pause ``tp`` and take it in the background (``validator_take.take``), ``after``
        seconds from now; it is fetched again once its state is installed. Call with the lock
        held."""
        assert self.consumer is not None
        self.forget(tp)
        self.consumer.pause(tp)
        self.taking[tp] = asyncio.create_task(self._take_until_done(tp, after))

    async def _take_until_done(self, tp: TopicPartition, after: float) -> None:
        if after:
            await asyncio.sleep(after)
        await until_done(f"validator: taking partition {tp.partition}", lambda: take(self, tp), log)

    def drop(self, partition: int, retake_after: float) -> None:
        """Stop deciding for ``partition``: its state and producer go, it is paused, and taken
        again (a fresh producer and a restore) ``retake_after`` seconds from now unless a
        rebalance decides otherwise first. Call with the lock held."""
        self.take_later(self.tp(partition), after=retake_after)

    async def _flush_idle(self, *, due: bool = True) -> None:
        """``validator_commit.flush_idle`` (the shell tests replace it: a crash flushes nothing).
        Call with the lock held."""
        await flush_idle(self, due=due)

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
            batch = await gather_batch(self)
            if not batch:
                async with self.lock:
                    await self._flush_idle()
                continue
            async with self.lock:
                try:
                    await process_batch(self, batch, gathered)
                except Exception as exc:
                    # Every expected failure is handled per partition; this is the net under a
                    # bug or a client surprise: a crash would leave every partition undecided.
                    log.error(
                        "validator: batch failed (%s); taking its partitions again",
                        type(exc).__name__,
                    )
                    for tp in batch:
                        if tp.partition in self.partitions:
                            self.drop(tp.partition, 0.0)

    def lag(self) -> dict[int, int]:
        """Records not yet processed, per owned and restored admission partition."""
        return validator_metrics.lag(self)

    def render_metrics(self) -> list[str]:
        return validator_metrics.render_metrics(self)
