"""The projector: per-run log -> per-subscriber topics (full frames or verified RFC 6902 deltas).

Shell module, running inside the worker beside the validator (docs/projection.md). It reads:
- the per-run log: the consumer group ``<app id>-projector`` decides the log partitions each
  worker projects and fences its offset commits, but its consumer fetches nothing (its
  partitions stay paused); the records come from the read side's tail, the process's one
  consumer of the log, through ``app.shell.worker.log_feed`` (``feed``: the projector follows
  each partition it has taken from its committed offset);
- the subscription registry (compacted, every worker reads all of it, from the beginning;
  ``projector_registry``);
- resync requests (every worker reads all of them, from ``RESYNC_LOOKBACK_SECONDS`` before it
  starts, and answers the ones for runs it owns; a request published while no worker owned its
  run is answered by the next owner once it has taken the run's partition: ``projector_resync``).

A thin driver (issue 15 item 5; the validator's split, ``app.shell.worker.validator_loop``):
every decision is ``app.core.projection.projector_batch``'s. Per batch the loop takes what the
feed holds, decodes (``projector_batch.decode``), rebuilds the runs the core names as missing
(``needed_runs``; the only I/O of the step), calls ``projector_batch.plan_batch`` once with the
cache and performs what it returns: it keeps the plan's runs and cursors in the cache, writes
each frame to its subscriber's topic (keyed ``runId/surfaceId``), commits the plan's log offsets
and evicts the runs the plan names; a batch whose runs were rebuilt across a rebalance or a take
is followed again from the positions the plan gives. A resync request and a late subscriber's
catch-up are the same split (``projector_runs.answer_resync``,
``projector_runs.plan_catch_up``). Frames are delivered at least once: the log offset is
committed after the sends, and a repeated delta fails the client's base check and brings a
resync, a repeated full frame is idempotent.

Bounded (issue 15 item 3): the projector holds surfaces only for the log partitions it owns,
and of those only the runs of a bounded LRU cache (``A2UI_STREAM_PROJECTOR_CACHE_SURFACES``
surfaces, enforced after each batch). A revoked partition's runs are dropped in the listener.
An assigned partition is paused and taken in the background (never inside the listener: a
member that does not rejoin within the rebalance timeout is dropped from the group; the
validator's rule), which only reads its committed offset: nothing is replayed up front. A run
that is not in the cache when a new event, a resync request or a subscriber's catch-up needs
it is rebuilt from its recorded events, from the read side's run store or else from the log
(``projector_rebuild``); a rebuilt run equals the one that was never evicted. Subscriber
cursors live with their run in the cache: after an eviction (as after a restart or a
rebalance) a subscriber's next frame for the surface is a full frame, which is always safe.

This module holds the loop's state, its lifecycle, the rebalance listener, the take, the batch
loop and the I/O methods (the only places that make Kafka clients or topics; the shell tests
replace them). The rest is in sibling modules whose functions take the loop:
``projector_cache`` (the runs held), ``projector_rebuild`` (runs that are not),
``projector_fanout`` (sending frames), ``projector_registry`` and ``projector_resync`` (the
two tails), ``projector_metrics`` (what it reports), over the values of ``projector_config``.
It imports ``app.core``, the shared shell modules and ``app.shell.worker``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener

from app.core.admission.policy import HostPolicy
from app.core.projection import projector_batch
from app.core.projection.projector_batch import BatchPlan, Refetch
from app.core.projection.subscriptions import Registry
from app.core.projection.surfaces import Surface, SurfaceKey
from app.core.runlog import topic_plan
from app.core.runlog.topic_plan import TopicSpec
from app.shell.worker import projector_metrics
from app.shell.worker.assignor import WarmAssignor, strategies
from app.shell.worker.kafka_io import group_consumer, read_range, until_done
from app.shell.worker.log_feed import LogFeed
from app.shell.worker.projector_cache import CachedRun, keep, uncache
from app.shell.worker.projector_config import ProjectorConfig
from app.shell.worker.projector_fanout import send_all
from app.shell.worker.projector_rebuild import rebuild_needed
from app.shell.worker.projector_registry import follow_registry
from app.shell.worker.projector_resync import answer_missed_later, follow_resyncs
from app.shell.worker.run_store import RunStore
from app.shell.worker.topics_admin import ensure_topics, load_definitions

__all__ = ["ProjectorLoop"]

log = logging.getLogger("a2ui_stream.projector")

# A log read that rebuilds runs the store cannot give reads a whole partition prefix.
LOG_READ_TIMEOUT = 300.0


@dataclass
class _Partition:
    """An owned log partition that has been taken: the next offset the loop will fold (a
    rebuild for a resync or a catch-up reads the run's events below it)."""

    position: int


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, loop: ProjectorLoop) -> None:
        self.loop = loop

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        # The lock waits for the batch in flight; then the partition's runs leave memory.
        async with self.loop.lock:
            self.loop.generation += 1
            for tp in revoked:
                self.loop.forget(tp)

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        # Never restore inside the listener (app.shell.worker.validator_loop: a restore can wait
        # seconds, and a member that does not rejoin within the rebalance timeout is dropped
        # from the group while it still believes it owns its partitions). The partitions stay
        # paused until they are taken.
        async with self.loop.lock:
            self.loop.generation += 1
            for tp in assigned:
                self.loop.take_later(tp)


class ProjectorLoop:
    def __init__(
        self,
        config: ProjectorConfig,
        policy: HostPolicy,
        store: Callable[[], RunStore | None] = lambda: None,
    ) -> None:
        self.config = config
        self.policy = policy
        # The process's one log consumer hands the projector its records (the read side's
        # tail, app.shell.worker.log_feed); the group consumer only decides and fences.
        self.feed = LogFeed()
        # The read side's store of this worker (app.shell.worker.run_index), when it is open: a
        # rebuild reads a run's events there first.
        self.store = store
        # the group's assignment: warm partitions back to their worker, as the validator's
        # (app.shell.worker.assignor); None: aiokafka's round-robin
        self.assignor: WarmAssignor | None = None
        self.lock = asyncio.Lock()
        self.partitions: dict[int, _Partition] = {}  # owned and taken: projected by this loop
        self.taking: dict[TopicPartition, asyncio.Task[None]] = {}
        # Bumped by every assignment, revocation and take (each moves fetch positions): a
        # batch gathered across one is dropped and fetched again.
        self.generation = 0
        self.runs: OrderedDict[str, CachedRun] = OrderedDict()  # least recently used first
        self.held = 0  # surfaces in ``runs``
        self.evicted = 0
        self.rebuilt: Counter[str] = Counter()  # runs rebuilt, by where their events came from
        self.registry: Registry = {}
        self.topics_ready: set[str] = set()
        # subscriber id -> its topic, once made (a fan-out looks each one up per frame)
        self.topic_names: dict[str, str] = {}
        self.frame_partitions: dict[str, int | None] = {}  # send_frame's per-topic answer
        self.sent: Counter[str] = Counter()
        self.fallbacks: Counter[str] = Counter()
        self.resyncs_answered = 0
        self.digest_checks = 0  # delta frames that carried a digest
        self.drift_resyncs = 0  # resync requests answered whose reason was a digest mismatch
        self.failed: Counter[str] = Counter()
        self.consumer: AIOKafkaConsumer | None = None
        self.producer: AIOKafkaProducer | None = None
        self.definitions = load_definitions()
        self.tasks: list[asyncio.Task[None]] = []
        # resync requests seen in the last RESYNC_LOOKBACK_SECONDS: (timestamp ms, partition,
        # offset, value), and the (partition, offset) of those this worker answered
        self.recent_resyncs: deque[tuple[int, int, int, str | None, bytes]] = deque()
        self.answered_resyncs: set[tuple[int, int]] = set()
        self.resyncs_read = asyncio.Event()  # set whenever the resync tail reaches its end
        self.resync_consumer: AIOKafkaConsumer | None = None  # the resync tail's
        self.resync_positions: dict[int, int] = {}

    @property
    def owned(self) -> set[int]:
        """The log partitions this loop projects (owned and taken)."""
        return set(self.partitions)

    def surfaces(self) -> dict[SurfaceKey, Surface]:
        """Every surface held (the cache's)."""
        return {
            key: surface
            for cached in self.runs.values()
            for key, surface in cached.run.projection.surfaces.items()
        }

    # -- I/O: the only places that make Kafka clients (the shell tests replace them) -----------

    def new_consumer(self) -> AIOKafkaConsumer:
        return group_consumer(
            self.config.bootstrap,
            self.config.group_id,
            fast_groups=self.config.fast_groups,
            assignors=strategies(self.assignor),
        )

    def new_producer(self) -> AIOKafkaProducer:
        return AIOKafkaProducer(
            bootstrap_servers=self.config.bootstrap,
            acks="all",
            linger_ms=5,
            max_request_size=9 * 1024 * 1024,
        )

    async def read_log(self, partition: int, before: int, keep: Callable[[Any], bool]) -> list[Any]:
        """The records of log partition ``partition`` below offset ``before`` that ``keep``
        keeps (read_committed)."""
        return await read_range(
            self.config.bootstrap,
            self.config.log_topic,
            partition,
            0,
            before - 1,
            timeout=LOG_READ_TIMEOUT,
            keep=keep,
        )

    async def subscriber_topic(self, subscriber_id: str) -> str:
        """The topic of subscriber ``subscriber_id``, made the first time it is sent to (and
        then known by name: ``topic_names``)."""
        name = self.topic_names.get(subscriber_id)
        if name is not None:
            return name
        spec: TopicSpec = topic_plan.subscriber_topic(
            self.definitions,
            subscriber_id,
            prefix=self.config.topic_prefix,
            replication=self.config.replication,
        )
        if spec.name not in self.topics_ready:
            await ensure_topics(self.config.bootstrap, [spec])
            self.topics_ready.add(spec.name)
        if len(self.topic_names) >= 100_000:  # subscribers come and go: bounded
            self.topic_names.clear()
        self.topic_names[subscriber_id] = spec.name
        return spec.name

    async def start(self) -> None:
        self.producer = self.new_producer()
        await self.producer.start()
        self.consumer = self.new_consumer()
        await self.consumer.start()
        self.consumer.subscribe([self.config.log_topic], listener=_Rebalance(self))

    async def stop(self) -> None:
        # The loops first, then their clients: a resync answer or a batch in flight when the
        # producer closes raised ProducerClosed and crashed the service on SIGTERM (found by
        # `a2ui-stream soak`, docs/reliability.md). Frames are at-least-once: a batch cut short
        # here is projected again from the committed offset.
        self.feed.close()  # the read side's tail never waits for a stopped projector
        for task in [*self.tasks, *self.taking.values()]:
            task.cancel()
        await asyncio.gather(*self.tasks, *self.taking.values(), return_exceptions=True)
        self.taking.clear()
        for client in (self.consumer, self.producer):
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.stop()

    # -- ownership: take, forget (the cache: projector_cache) ----------------------------------

    def forget(self, tp: TopicPartition) -> None:
        """Drop partition ``tp``: cancel its take; its runs leave the cache at once. Call with
        the lock held."""
        task = self.taking.pop(tp, None)
        if task is not None:
            task.cancel()
        self.partitions.pop(tp.partition, None)
        self.feed.unfollow(tp.partition)
        for run_id in [r for r, cached in self.runs.items() if cached.partition == tp.partition]:
            uncache(self, run_id)

    def take_later(self, tp: TopicPartition) -> None:
        """Pause ``tp`` and take it in the background (``take``). Call with the lock held."""
        assert self.consumer is not None
        self.forget(tp)
        self.consumer.pause(tp)
        self.taking[tp] = asyncio.create_task(self._take_until_done(tp))

    async def _take_until_done(self, tp: TopicPartition) -> None:
        await until_done(f"projector: taking partition {tp.partition}", lambda: self.take(tp), log)

    async def take(self, tp: TopicPartition) -> None:
        """Read ``tp``'s committed offset; if ``tp`` is still ours, project it from there (its
        runs are rebuilt when something needs them, not now) and answer the resync requests
        that waited for an owner."""
        assert self.consumer is not None
        committed = await self.consumer.committed(tp)
        if committed is None:  # never projected: from the log's start
            committed = (await self.consumer.beginning_offsets([tp]))[tp]
        async with self.lock:
            if self.taking.get(tp) is not asyncio.current_task():
                return  # revoked (or taken again) meanwhile
            del self.taking[tp]
            self.partitions[tp.partition] = _Partition(committed)
            self.generation += 1
            self.feed.follow(tp.partition, committed)  # the partition stays paused here
        log.info(
            "projector: partition %d restored up to offset %d (its runs are rebuilt when needed)",
            tp.partition,
            committed,
        )
        answer_missed_later(self, tp.partition)

    # -- loops ---------------------------------------------------------------------------------

    async def run(self, stopping: asyncio.Event) -> None:
        self.tasks = tasks = [
            asyncio.create_task(follow_registry(self, stopping)),
            asyncio.create_task(follow_resyncs(self, stopping)),
            asyncio.create_task(self._project(stopping)),
            asyncio.create_task(self._stay_member(stopping)),
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    async def _project(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            batch = await self.feed.get(timeout=0.2)
            if batch:
                # filtered against the follows just now: consistent with this generation
                await self._project_once(batch, self.generation)
            if self.feed.overflowed:
                await self.follow_again()

    async def follow_again(self) -> None:
        """Follow again, from where each stands, the partitions whose queued records the tail
        dropped (it waited ``log_feed.STALL_S`` for this loop)."""
        async with self.lock:
            for partition in sorted(self.feed.take_overflowed()):
                owned = self.partitions.get(partition)
                if owned is not None:
                    log.warning(
                        "projector: partition %d fell behind the tail: read again from %d",
                        partition,
                        owned.position,
                    )
                    self.generation += 1
                    self.feed.follow(partition, owned.position)

    async def _stay_member(self, stopping: asyncio.Event) -> None:
        """Poll the group consumer, whose partitions are all paused (it fetches nothing):
        aiokafka leaves the group of a consumer not polled for ``max_poll_interval_ms``."""
        assert self.consumer is not None
        while not stopping.is_set():
            started = asyncio.get_running_loop().time()
            await self.consumer.getmany(timeout_ms=1000, max_records=1)  # records: ignored
            if asyncio.get_running_loop().time() - started < 0.5:
                await asyncio.sleep(0.5)  # (assigned before the listener paused it)

    async def _project_once(self, batch: dict[int, list[Any]], gathered: int) -> None:
        """One batch of records (by log partition) from the feed: the runs the core names as
        missing are rebuilt (outside the lock: a log read may take seconds), then the core
        plans the batch with the lock held and the plan is performed."""
        assert self.consumer is not None
        try:
            decoded = projector_batch.decode(batch, self.partitions, self.registry)
            rebuilt = await rebuild_needed(
                self, projector_batch.needed_runs(decoded, self.runs, self.registry)
            )
            async with self.lock:
                planned = projector_batch.plan_batch(
                    decoded,
                    self.runs,
                    rebuilt=rebuilt,
                    positions={p: owned.position for p, owned in self.partitions.items()},
                    gathered=gathered,
                    generation=self.generation,
                    registry=self.registry,
                    policy=self.policy,
                    held=self.held,
                    cache_surfaces=self.config.cache_surfaces,
                )
                if isinstance(planned, Refetch):
                    # A rebalance or a take ran while this batch's runs were rebuilt:
                    # positions may have moved under it. Follow again from where each owned
                    # partition stands.
                    for partition, position in planned.positions.items():
                        self.feed.follow(partition, position)
                    return
                await self._perform(planned)
        except Exception as exc:
            log.error("projector: batch failed (%s); rewinding", type(exc).__name__)
            async with self.lock:
                for partition in batch:
                    if partition in self.partitions:
                        # its runs dropped, projected again from its offset
                        self.take_later(self._tp(partition))

    def _tp(self, partition: int) -> TopicPartition:
        return TopicPartition(self.config.log_topic, partition)

    async def _perform(self, plan: BatchPlan) -> None:
        """Keep a plan's runs, send its frames, commit its offsets, evict its idle runs (after
        the commit: a batch in flight finds the runs it looked up still there). Call with the
        lock held."""
        assert self.consumer is not None
        keep(self, plan.runs)
        for run_id, surface_id, warning in plan.warnings:
            log.warning("projection_warning run=%s surface=%s: %s", run_id, surface_id, warning)
        self.fallbacks.update(plan.fallbacks)
        await send_all(self, plan.sends, say=True)
        if plan.commits:
            await self.consumer.commit({self._tp(p): o for p, o in plan.commits.items()})
            for partition, offset in plan.commits.items():
                self.partitions[partition].position = offset
        for run_id in plan.evict:
            uncache(self, run_id)
            self.evicted += 1

    # -- what it reports (app.shell.worker.projector_metrics) ---------------------------------

    def render_metrics(self) -> list[str]:
        return projector_metrics.render_metrics(self)
