"""The projector: per-run log -> per-subscriber topics (full frames or verified RFC 6902 deltas).

Shell module, running inside the worker beside the validator (docs/projection.md). Three
consumers:
- the per-run log, in the consumer group ``<app id>-projector`` (read_committed; each worker
  projects the runs of the log partitions it owns);
- the subscription registry (compacted, every worker reads all of it, from the beginning);
- resync requests (every worker reads all of them, from ``RESYNC_LOOKBACK_SECONDS`` before it
  starts, and answers the ones for runs it owns). A request published while no worker owned
  its run (a restart, a rebalance) is answered by the next owner once it has taken the
  run's partition: it answers the requests of the last ``RESYNC_LOOKBACK_SECONDS`` for that
  partition's runs. An answer carries the request's ``a2ui-resync`` = ``partition:offset``
  header and is marked ``resync: true`` in the frame (``frames.answer_resync``), so a
  subscriber that still cannot use it holds the surface invalid instead of asking again (no
  request/answer pair repeats without a change; docs/projection.md); a request the previous
  owner answered too gets a second full frame, which is idempotent for the subscriber.

A thin driver (issue 15 item 5; the validator's split, ``app.shell.worker.validator_loop``): every
decision is ``app.core.projector_batch``'s. Per batch the loop fetches, decodes
(``projector_batch.decode``), rebuilds the runs the core names as missing (``needed_runs``; the
only I/O of the step), calls ``projector_batch.plan_batch`` once with the cache and performs
what it returns: it keeps the plan's runs and cursors in the cache, writes each frame to its
subscriber's topic (keyed ``runId/surfaceId``), commits the plan's log offsets and evicts the
runs the plan names; a batch gathered across a rebalance or a take is fetched again from the
positions the plan gives. A resync request and a late subscriber's catch-up are the same split
(``projector_runs.answer_resync``, ``projector_runs.plan_catch_up``). Frames are delivered at
least once: the log offset is committed after the sends, and a repeated delta fails the
client's base check and brings a resync, a repeated full frame is idempotent.

Bounded (issue 15 item 3): the projector holds surfaces only for the log partitions it owns,
and of those only the runs of a bounded LRU cache (``A2UI_STREAM_PROJECTOR_CACHE_SURFACES``
surfaces, enforced after each batch). A revoked partition's runs are dropped in the listener.
An assigned partition is paused and taken in the background (never inside the listener: a
member that does not rejoin within the rebalance timeout is dropped from the group; the
validator's rule), which only reads its committed offset: nothing is replayed up front. A run
that is not in the cache when a new event, a resync request or a subscriber's catch-up needs
it is rebuilt from its recorded events (``app.core.projector_runs.rebuild_run``), read from the
read side's run store when that holds them (``app.shell.worker.run_store``, the same worker's
RocksDB) and otherwise from the log partition, one read per partition per batch. A rebuilt run
equals the one that was never evicted (the same fold over the same recorded events). Subscriber
cursors live with their run in the cache: after an eviction (as after a restart or a
rebalance) a subscriber's next frame for the surface is a full frame, which is always safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener

from app.core import frames, projector_batch, projector_runs
from app.core.keys import partition_for_run, run_of_log_key
from app.core.policy import HostPolicy
from app.core.projector_batch import BatchPlan, Need, Refetch
from app.core.projector_runs import (
    CursorKey,
    FrameRecord,
    RunSurfaces,
    complete_prefix,
    rebuild_run,
)
from app.core.subscriptions import Registry, register
from app.core.surfaces import Surface, SurfaceKey
from app.core.topic_plan import TopicSpec, subscriber_topic
from app.shell.worker.assignor import WarmAssignor, strategies
from app.shell.worker.kafka_io import group_consumer, partitions_of, read_range, until_done
from app.shell.worker.run_store import RunStore
from app.shell.worker.topics_admin import ensure_topics, load_definitions

__all__ = ["DEFAULT_CACHE_SURFACES", "ProjectorConfig", "ProjectorLoop"]

log = logging.getLogger("a2ui_stream.projector")

# How far back a new owner of a partition looks for resync requests nobody answered: longer
# than a rebalance after a member's death (session timeout + join), short enough that a
# restart does not answer requests from long ago again.
RESYNC_LOOKBACK_SECONDS = 120.0
DEFAULT_CACHE_SURFACES = 2_000
# A log read that rebuilds runs the store cannot give reads a whole partition prefix.
LOG_READ_TIMEOUT = 300.0


@dataclass(frozen=True)
class ProjectorConfig:
    bootstrap: str
    log_topic: str
    subscriptions_topic: str
    resync_topic: str
    topic_prefix: str
    replication: int
    group_id: str
    partitions: int  # of the log (co-partitioned with admission: partition_for_run)
    fast_groups: bool = False
    cache_surfaces: int = DEFAULT_CACHE_SURFACES


@dataclass
class _Cached:
    """One run in the cache (``projector_runs.Cached``): its partition, its state, and what
    each subscriber holds of its surfaces (the cursors go with the run: an evicted run's next
    frames are full)."""

    partition: int
    run: RunSurfaces
    cursors: dict[CursorKey, frames.SubscriberCursor] = field(default_factory=dict)


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
        self.runs: OrderedDict[str, _Cached] = OrderedDict()  # least recently used first
        self.held = 0  # surfaces in ``runs``
        self.evicted = 0
        self.rebuilt: Counter[str] = Counter()  # runs rebuilt, by where their events came from
        self.registry: Registry = {}
        self.topics_ready: set[str] = set()
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

    def _new_consumer(self) -> AIOKafkaConsumer:
        return group_consumer(
            self.config.bootstrap,
            self.config.group_id,
            fast_groups=self.config.fast_groups,
            assignors=strategies(self.assignor),
        )

    def _new_producer(self) -> AIOKafkaProducer:
        return AIOKafkaProducer(
            bootstrap_servers=self.config.bootstrap,
            acks="all",
            linger_ms=5,
            max_request_size=9 * 1024 * 1024,
        )

    async def _read_log(
        self, partition: int, before: int, keep: Callable[[Any], bool]
    ) -> list[Any]:
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

    async def start(self) -> None:
        self.producer = self._new_producer()
        await self.producer.start()
        self.consumer = self._new_consumer()
        await self.consumer.start()
        self.consumer.subscribe([self.config.log_topic], listener=_Rebalance(self))

    async def stop(self) -> None:
        # The loops first, then their clients: a resync answer or a batch in flight when the
        # producer closes raised ProducerClosed and crashed the service on SIGTERM (found by
        # `a2ui-stream soak`, docs/reliability.md). Frames are at-least-once: a batch cut short
        # here is projected again from the committed offset.
        for task in [*self.tasks, *self.taking.values()]:
            task.cancel()
        await asyncio.gather(*self.tasks, *self.taking.values(), return_exceptions=True)
        self.taking.clear()
        for client in (self.consumer, self.producer):
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.stop()

    # -- ownership: take, forget ---------------------------------------------------------------

    def forget(self, tp: TopicPartition) -> None:
        """Drop partition ``tp``: cancel its take; its runs leave the cache at once. Call with
        the lock held."""
        task = self.taking.pop(tp, None)
        if task is not None:
            task.cancel()
        self.partitions.pop(tp.partition, None)
        for run_id in [r for r, cached in self.runs.items() if cached.partition == tp.partition]:
            self._uncache(run_id)

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
        async with self.lock:
            if self.taking.get(tp) is not asyncio.current_task():
                return  # revoked (or taken again) meanwhile
            del self.taking[tp]
            if committed is None:
                await self.consumer.seek_to_beginning(tp)
            else:
                self.consumer.seek(tp, committed)
            self.partitions[tp.partition] = _Partition(committed or 0)
            self.generation += 1
            self.consumer.resume(tp)
        log.info(
            "projector: partition %d restored up to offset %d (its runs are rebuilt when needed)",
            tp.partition,
            committed or 0,
        )
        self.answer_missed_later(tp.partition)

    # -- the cache -----------------------------------------------------------------------------

    def _cache(self, partition: int, run: RunSurfaces) -> _Cached:
        cached = self.runs[run.run_id] = _Cached(partition, run)
        self.held += run.surface_count
        return cached

    def _uncache(self, run_id: str) -> None:
        cached = self.runs.pop(run_id, None)
        if cached is not None:
            self.held -= cached.run.surface_count

    def _keep(self, runs: Mapping[str, projector_batch.Kept]) -> None:
        """A plan's runs into the cache, each moved to its most recent end (in the plan's
        order: that of last use)."""
        for run_id, kept in runs.items():
            cached = self.runs.get(run_id)
            if cached is None:
                cached = self._cache(kept.partition, kept.run)
            else:
                self.held += kept.run.surface_count - cached.run.surface_count
                cached.run = kept.run
                self.runs.move_to_end(run_id)
            cached.cursors.update(kept.cursors)

    # -- rebuilding runs -----------------------------------------------------------------------

    def _stored(
        self, partition: int, wanted: dict[str, int | None], before: dict[str, int]
    ) -> dict[str, list[dict[str, Any]]]:
        """The recorded events of the ``wanted`` runs of ``partition`` below their offset in
        ``before``, for those the run store can give completely: it has read the partition
        that far (its checkpoint), or it holds events ``0 .. n - 1`` of a run whose next
        event is ``n`` (``wanted``'s value, when known)."""
        store = self.store()
        if store is None:
            return {}
        found: dict[str, list[dict[str, Any]]] = {}
        try:
            checkpoint = store.checkpoint(partition)
            for run_id, sequence in wanted.items():
                limit = before[run_id]
                events = [e for e in store.events(partition, run_id) if e.offset < limit]
                covered = checkpoint is not None and checkpoint[0] >= limit
                if covered or (
                    sequence is not None and complete_prefix([e.sequence for e in events], sequence)
                ):
                    found[run_id] = [orjson.loads(e.data) for e in events]
        except Exception as exc:  # closed at stop, or damaged: the log still has them
            log.warning("projector: run store unreadable (%s)", type(exc).__name__)
            return {}
        return found

    def _stored_runs(self, partition: int, before: int) -> list[str] | None:
        """Every run of ``partition`` with events below ``before``, if the store can say."""
        store = self.store()
        if store is None:
            return None
        try:
            checkpoint = store.checkpoint(partition)
            if checkpoint is None or checkpoint[0] < before:
                return None
            return [summary.run_id for summary in store.summaries(partition)]
        except Exception as exc:
            log.warning("projector: run store unreadable (%s)", type(exc).__name__)
            return None

    async def _logged(
        self, partition: int, wanted: Callable[[str], bool], before: dict[str, int] | int
    ) -> dict[str, list[dict[str, Any]]]:
        """The recorded events of the runs ``wanted`` keeps, read from the log partition
        below ``before`` (per run, or one offset for all)."""
        limit = before if isinstance(before, int) else max(before.values(), default=0)
        if limit <= 0:
            return {}

        def keep(record: Any) -> bool:
            return record.value is not None and wanted(run_of_log_key(record.key))

        found: dict[str, list[dict[str, Any]]] = {}
        for record in await self._read_log(partition, limit, keep):
            run_id = run_of_log_key(record.key)
            if isinstance(before, int) or record.offset < before[run_id]:
                found.setdefault(run_id, []).append(orjson.loads(record.value))
        return found

    async def _rebuild_needed(self, needs: dict[str, Need]) -> dict[str, RunSurfaces]:
        """The runs a batch folds that are not cached, as they were before the batch: from
        the store, else from the log (one read per partition)."""
        found: dict[str, list[dict[str, Any]]] = {}
        for partition in sorted({need.partition for need in needs.values()}):
            mine = {r: n for r, n in needs.items() if n.partition == partition}
            before = {r: n.offset for r, n in mine.items()}
            stored = self._stored(partition, {r: n.sequence for r, n in mine.items()}, before)
            self.rebuilt["store"] += len(stored)
            found.update(stored)
            missing = {r: o for r, o in before.items() if r not in stored}
            if missing:
                logged = await self._logged(partition, missing.__contains__, missing)
                self.rebuilt["log"] += len(missing)
                found.update({r: logged.get(r, []) for r in missing})
        return {run_id: rebuild_run(run_id, events) for run_id, events in found.items()}

    async def _with_runs(
        self,
        partition: int,
        wanted: Callable[[str], bool],
        named: frozenset[str] | None,
        action: Callable[[dict[str, RunSurfaces]], Any],
    ) -> None:
        """Call ``action`` with the lock held and the ``wanted`` runs of owned ``partition``
        that are not cached, rebuilt as of the partition's position (the cached ones are
        current in ``self.runs``). ``named``: the runs, when known (else every run the
        partition holds). A log read runs outside the lock; if the partition moved on
        meanwhile it is done again, and after three tries with the lock held (rare: a busy
        partition the store does not hold)."""
        for attempt in range(4):
            last = attempt == 3
            async with self.lock:
                owned = self.partitions.get(partition)
                if owned is None:
                    return
                position = owned.position
                stored = self._stored_all(partition, wanted, named, position)
                if stored is not None:
                    await action(stored)
                    return
                if last:
                    logged = await self._logged(partition, wanted, position)
                    await action(self._rebuilt_uncached(logged, "log"))
                    return
            logged = await self._logged(partition, wanted, position)
            async with self.lock:
                owned = self.partitions.get(partition)
                if owned is None:
                    return
                if owned.position == position:
                    await action(self._rebuilt_uncached(logged, "log"))
                    return

    def _stored_all(
        self,
        partition: int,
        wanted: Callable[[str], bool],
        named: frozenset[str] | None,
        position: int,
    ) -> dict[str, RunSurfaces] | None:
        """``_with_runs``'s store path (synchronous, so consistent with the cache), or None
        when the store has not read the partition to ``position``."""
        run_ids = self._stored_runs(partition, position)
        if run_ids is None:
            return None
        if named is not None:
            run_ids = list(named)
        uncached: dict[str, int | None] = {
            r: None for r in run_ids if wanted(r) and r not in self.runs
        }
        events = self._stored(partition, uncached, dict.fromkeys(uncached, position))
        if len(events) != len(uncached):
            return None
        return self._rebuilt_uncached(events, "store")

    def _rebuilt_uncached(
        self, events: dict[str, list[dict[str, Any]]], source: str
    ) -> dict[str, RunSurfaces]:
        rebuilt = {r: rebuild_run(r, e) for r, e in events.items() if r not in self.runs}
        self.rebuilt[source] += len(rebuilt)
        return rebuilt

    # -- loops ---------------------------------------------------------------------------------

    async def run(self, stopping: asyncio.Event) -> None:
        self.tasks = tasks = [
            asyncio.create_task(self._follow_registry(stopping)),
            asyncio.create_task(self._follow_resyncs(stopping)),
            asyncio.create_task(self._project(stopping)),
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    async def _project(self, stopping: asyncio.Event) -> None:
        assert self.consumer is not None
        while not stopping.is_set():
            gathered = self.generation
            batch = await self.consumer.getmany(timeout_ms=200, max_records=2000)
            if batch:
                await self._project_once(batch, gathered)

    async def _project_once(self, batch: dict[TopicPartition, list[Any]], gathered: int) -> None:
        """One fetched batch: the runs the core names as missing are rebuilt (outside the
        lock: a log read may take seconds), then the core plans the batch with the lock held
        and the plan is performed."""
        assert self.consumer is not None
        try:
            decoded = projector_batch.decode(
                {tp.partition: records for tp, records in batch.items()},
                self.partitions,
                self.registry,
            )
            rebuilt = await self._rebuild_needed(
                projector_batch.needed_runs(decoded, self.runs, self.registry)
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
                    # A rebalance or a take ran while this batch was gathered (the listener
                    # runs beside getmany): positions may have moved under it. Fetch again
                    # from where each owned partition stands.
                    for partition, position in planned.positions.items():
                        self.consumer.seek(self._tp(partition), position)
                    return
                await self._perform(planned)
        except Exception as exc:
            log.error("projector: batch failed (%s); rewinding", type(exc).__name__)
            async with self.lock:
                for tp in batch:
                    if tp.partition in self.partitions:
                        self.take_later(tp)  # its runs dropped, projected again from its offset

    def _tp(self, partition: int) -> TopicPartition:
        return TopicPartition(self.config.log_topic, partition)

    async def _perform(self, plan: BatchPlan) -> None:
        """Keep a plan's runs, send its frames, commit its offsets, evict its idle runs (after
        the commit: a batch in flight finds the runs it looked up still there). Call with the
        lock held."""
        assert self.consumer is not None
        self._keep(plan.runs)
        for run_id, surface_id, warning in plan.warnings:
            log.warning("projection_warning run=%s surface=%s: %s", run_id, surface_id, warning)
        self.fallbacks.update(plan.fallbacks)
        await self._send_all(plan.sends, say=True)
        if plan.commits:
            await self.consumer.commit({self._tp(p): o for p, o in plan.commits.items()})
            for partition, offset in plan.commits.items():
                self.partitions[partition].position = offset
        for run_id in plan.evict:
            self._uncache(run_id)
            self.evicted += 1

    async def _send(self, record: FrameRecord) -> asyncio.Future[Any]:
        assert self.producer is not None
        topic = await self._subscriber_topic(record.subscriber_id)
        self.sent[record.kind] += 1
        self.digest_checks += record.reason == "digest"
        return await send_frame(
            self.producer,
            topic,
            record.value,
            record.key,
            list(record.headers) or None,
            self.frame_partitions,
        )

    async def _send_all(self, records: Iterable[FrameRecord], *, say: bool = False) -> None:
        """Send ``records`` and wait for the broker. A frame the broker refuses (e.g. over the
        topic's size limit) must not stall every other subscriber: it is counted (and logged
        when ``say``) and dropped; that subscriber sees a sequence gap on its next frame and
        asks for a resync (docs/projection.md)."""
        futures = [await self._send(record) for record in records]
        for result in await asyncio.gather(*futures, return_exceptions=True):
            if isinstance(result, BaseException):
                self.failed[type(result).__name__] += 1
                if say:
                    log.error("projector: a frame could not be written (%s)", type(result).__name__)

    async def _subscriber_topic(self, subscriber_id: str) -> str:
        spec: TopicSpec = subscriber_topic(
            self.definitions,
            subscriber_id,
            prefix=self.config.topic_prefix,
            replication=self.config.replication,
        )
        if spec.name not in self.topics_ready:
            await ensure_topics(self.config.bootstrap, [spec])
            self.topics_ready.add(spec.name)
        return spec.name

    async def _follow_registry(self, stopping: asyncio.Event) -> None:
        async for key, value, live in _tail(
            self.config.bootstrap, self.config.subscriptions_topic, stopping, from_beginning=True
        ):
            sid = key.decode("utf-8", "replace") if key is not None else ""
            before = self.registry.get(sid)
            self.registry, why = register(self.registry, key, value)
            if why is not None:
                log.warning("projector: ignored a registration: %s", why)
            after = self.registry.get(sid)
            if live and after is not None and after != before:
                await self._catch_up(after)

    async def _catch_up(self, sub: Any) -> None:
        """A subscriber that registers (or changes) while runs it follows already have
        surfaces gets one full frame of each now (``projector_runs.plan_catch_up``), not only
        at the next change. Runs that are not cached are rebuilt for it and not kept (a
        subscriber of every run would otherwise fill the cache with idle runs); their next
        frame is a full one."""
        named = frozenset(sub.runs) if sub.runs is not None else None
        for partition in sorted(self.partitions):

            async def send_all(rebuilt: dict[str, RunSurfaces], partition: int = partition) -> None:
                planned = projector_runs.plan_catch_up(
                    sub, partition, self.runs, rebuilt, self.policy
                )
                for run_id, cursors in planned.cursors.items():
                    self.runs[run_id].cursors.update(cursors)
                await self._send_all(planned.sends)

            await self._with_runs(partition, sub.follows, named, send_all)

    async def _follow_resyncs(self, stopping: asyncio.Event) -> None:
        """Tail the resync topic from RESYNC_LOOKBACK_SECONDS ago: requests that were already
        there are only remembered (for a partition this worker is given later); new ones are
        answered at once when their run is owned here."""
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.config.bootstrap,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="latest",
        )
        await consumer.start()
        try:
            tps = await partitions_of(consumer, self.config.resync_topic)
            consumer.assign(tps)
            lookback_ms = int(RESYNC_LOOKBACK_SECONDS * 1000)
            since = int(time.time() * 1000) - lookback_ms
            try:
                starts = await consumer.offsets_for_times({tp: since for tp in tps}) if tps else {}
            except Exception as exc:  # a broker without timestamp lookups: from the end
                log.warning("projector: resync lookback unavailable (%s)", type(exc).__name__)
                starts = {}
            for tp in tps:
                found = starts.get(tp)
                if found is None:
                    await consumer.seek_to_end(tp)
                else:
                    consumer.seek(tp, found.offset)
            ends = await consumer.end_offsets(tps) if tps else {}
            self.resync_consumer = consumer
            while not stopping.is_set():
                batch = await consumer.getmany(timeout_ms=200)
                for tp, records in batch.items():
                    for record in records:
                        if record.value is None:
                            continue
                        source = (tp.partition, record.offset)
                        self._remember(record.timestamp, source, record.value)
                        if record.offset >= ends.get(tp, 0):
                            await self._answer(record.value, source)
                for tp in tps:
                    self.resync_positions[tp.partition] = await consumer.position(tp)
                self.resyncs_read.set()
                self.resyncs_read = asyncio.Event()
        finally:
            await consumer.stop()

    def _remember(self, timestamp: int, source: tuple[int, int], value: bytes) -> None:
        recent = self.recent_resyncs
        run_id = projector_runs.run_of_request(value)
        recent.append((timestamp, source[0], source[1], run_id, value))
        horizon = timestamp - int(RESYNC_LOOKBACK_SECONDS * 1000)
        while recent and recent[0][0] < horizon:
            _ts, partition, offset, _run, _value = recent.popleft()
            self.answered_resyncs.discard((partition, offset))

    def answer_missed_later(self, partition: int) -> None:
        self.tasks = [t for t in self.tasks if not t.done()]
        self.tasks.append(asyncio.create_task(self._answer_missed_quietly(partition)))

    async def _answer_missed_quietly(self, partition: int) -> None:
        try:
            await self._answer_missed(partition)
        except Exception as exc:  # the broker is away: the live tail still answers new ones
            log.warning("projector: missed resync requests not re-checked (%s)", type(exc).__name__)

    async def _answer_missed(self, partition: int) -> None:
        """After ``partition`` of the log was taken here: answer the recent resync requests
        for its runs, which may have been published while no worker owned them. Waits (at
        most a minute) until the resync tail has read up to the topic's end as of now."""
        deadline = asyncio.get_running_loop().time() + 60
        while self.resync_consumer is None:  # the tail has not started yet
            if not await self._next_tail_read(deadline):
                log.warning("projector: resync tail not started; missed requests not re-checked")
                return
        consumer = self.resync_consumer
        found = await consumer.end_offsets(list(consumer.assignment()))
        ends = {tp.partition: end for tp, end in found.items()}
        while any(self.resync_positions.get(p, -1) < end for p, end in ends.items() if end > 0):
            if not await self._next_tail_read(deadline):
                log.warning("projector: resync tail behind; missed requests not re-checked")
                return
        for _ts, p, offset, run_id, value in list(self.recent_resyncs):
            if run_id is not None and self._partition_of(run_id) == partition:
                await self._answer(value, (p, offset))

    def _partition_of(self, run_id: str) -> int:
        return partition_for_run(run_id, self.config.partitions)

    async def _next_tail_read(self, deadline: float) -> bool:
        """Wait for the resync tail's next pass (or ``deadline``, in loop time); False once the
        deadline has passed."""
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            return False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.resyncs_read.wait(), remaining)
        return True

    async def _answer(self, value: bytes, source: tuple[int, int]) -> None:
        """Issue 5 §4: one full frame for a resync request of a run this worker owns (once per
        request and worker; ``source`` is the request's partition and offset;
        ``projector_runs.answer_resync``). A run that is not cached is rebuilt for it (and
        kept: its subscriber is active)."""
        if source in self.answered_resyncs:
            return
        request = projector_runs.parse_resync(value, self.config.partitions)
        if request is None:
            log.warning("projector: ignored a malformed resync request")
            return
        if request.partition not in self.partitions:
            return  # another worker owns this run (or it is being taken: answered after)
        run_id = request.run_id

        async def answer(rebuilt: dict[str, RunSurfaces]) -> None:
            # Checked again with the lock held: the live tail and a new owner's look back may
            # both reach one request.
            if source in self.answered_resyncs:
                return
            planned = projector_runs.answer_resync(
                request,
                source,
                cached=self.runs.get(run_id),
                rebuilt=rebuilt,
                registry=self.registry,
                policy=self.policy,
            )
            if planned is None:
                return  # the run has no recorded event
            if planned.cache is not None:
                self._cache(request.partition, planned.cache)
            self.runs[run_id].cursors.update(planned.cursors)
            if planned.record is None:
                return
            self.answered_resyncs.add(source)
            self.resyncs_answered += 1
            self.drift_resyncs += planned.drift
            self.fallbacks["resync"] += 1
            await asyncio.gather(await self._send(planned.record))

        await self._with_runs(request.partition, {run_id}.__contains__, frozenset({run_id}), answer)

    def render_metrics(self) -> list[str]:
        lines = [
            "# HELP a2ui_frames_sent_total Frames written to subscriber topics, by kind.",
            "# TYPE a2ui_frames_sent_total counter",
        ]
        lines += [f'a2ui_frames_sent_total{{kind="{k}"}} {n}' for k, n in sorted(self.sent.items())]
        lines += [
            "# HELP a2ui_delta_fallbacks_total Full frames sent to delta subscribers, by reason.",
            "# TYPE a2ui_delta_fallbacks_total counter",
        ]
        lines += [
            f'a2ui_delta_fallbacks_total{{reason="{r}"}} {n}'
            for r, n in sorted(self.fallbacks.items())
        ]
        lines += [
            "# HELP a2ui_resyncs_answered_total Resync requests answered with one full frame.",
            "# TYPE a2ui_resyncs_answered_total counter",
            f"a2ui_resyncs_answered_total {self.resyncs_answered}",
            "# HELP a2ui_digest_checks_total Delta frames sent with a digest check (fullEvery).",
            "# TYPE a2ui_digest_checks_total counter",
            f"a2ui_digest_checks_total {self.digest_checks}",
            "# HELP a2ui_drift_resyncs_total Resyncs answered after a failed digest check.",
            "# TYPE a2ui_drift_resyncs_total counter",
            f"a2ui_drift_resyncs_total {self.drift_resyncs}",
            "# HELP a2ui_projector_runs Runs whose surfaces the projector holds (its cache).",
            "# TYPE a2ui_projector_runs gauge",
            f"a2ui_projector_runs {len(self.runs)}",
            "# HELP a2ui_projector_evictions_total Idle runs evicted from the projector's cache.",
            "# TYPE a2ui_projector_evictions_total counter",
            f"a2ui_projector_evictions_total {self.evicted}",
            "# HELP a2ui_projector_rebuilds_total Runs rebuilt from their recorded events, by "
            "where they were read.",
            "# TYPE a2ui_projector_rebuilds_total counter",
            *(
                f'a2ui_projector_rebuilds_total{{source="{s}"}} {self.rebuilt[s]}'
                for s in ("store", "log")
            ),
            "# HELP a2ui_frames_failed_total Frames the broker would not take, by error.",
            "# TYPE a2ui_frames_failed_total counter",
        ]
        lines += [
            f'a2ui_frames_failed_total{{error="{e}"}} {n}' for e, n in sorted(self.failed.items())
        ]
        return lines


async def send_frame(
    producer: Any,
    topic: str,
    value: bytes,
    key: bytes,
    headers: list[tuple[str, bytes]] | None,
    partitions: dict[str, int | None],
) -> asyncio.Future[Any]:
    """One frame to a subscriber topic, keyed ``runId/surfaceId`` (the future of its
    acknowledgement). A topic of one partition (the subscriber template's) is sent to
    partition 0 outright: aiokafka's default partitioner hashes every key in Python to find
    the only partition there is (murmur2: 5.2 µs a frame, measured, of a send's 12-36 µs).
    ``partitions``: the answer per topic, asked of the producer's metadata once; a topic of
    more partitions keeps the key's partition (None)."""
    if topic not in partitions:
        found = await producer.partitions_for(topic)
        partitions[topic] = 0 if len(found) == 1 else None
    future: asyncio.Future[Any] = await producer.send(
        topic, value, key=key, headers=headers, partition=partitions[topic]
    )
    return future


async def _tail(  # type: ignore[no-untyped-def]
    bootstrap: str, topic: str, stopping: asyncio.Event, *, from_beginning: bool
):
    """Yield ``(key, value, live)`` for every record of ``topic`` (all partitions, no group);
    ``live`` is false for records that were already there when the tail started."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest" if from_beginning else "latest",
    )
    await consumer.start()
    try:
        tps = await partitions_of(consumer, topic)
        consumer.assign(tps)
        if from_beginning:
            await consumer.seek_to_beginning(*tps)
        else:
            await consumer.seek_to_end(*tps)
        # Measured: asking for the end offsets BEFORE seeking lost the records already on the
        # topic (the position reset raced the seek), so the ends are read after it.
        ends = await consumer.end_offsets(tps) if tps else {}
        while not stopping.is_set():
            batch = await consumer.getmany(timeout_ms=200)
            for tp, records in batch.items():
                for record in records:
                    yield record.key, record.value, record.offset >= ends.get(tp, 0)
    finally:
        await consumer.stop()
