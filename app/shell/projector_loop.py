"""The projector: per-run log -> per-subscriber topics (full frames or verified RFC 6902 deltas).

Shell module, running inside the worker beside the validator (docs/projection.md). Three
consumers:
- the per-run log, in the consumer group ``<app id>-projector`` (read_committed; each worker
  projects the runs of the log partitions it owns);
- the subscription registry (compacted, every worker reads all of it, from the beginning);
- resync requests (every worker reads all of them, from ``RESYNC_LOOKBACK_SECONDS`` before it
  starts, and answers the ones for runs it owns). A request published while no worker owned
  its run (a restart, a rebalance) is answered by the next owner once it has restored the
  run's partition: it answers the requests of the last ``RESYNC_LOOKBACK_SECONDS`` for that
  partition's runs. An answer carries the request's ``a2ui-resync`` = ``partition:offset``
  header and is marked ``resync: true`` in the frame (``frames.answer_resync``), so a
  subscriber that still cannot use it holds the surface invalid instead of asking again (no
  request/answer pair repeats without a change; docs/projection.md); a request the previous
  owner answered too gets a second full frame, which is idempotent for the subscriber.

For each recorded event it calls ``app.core.surfaces.project`` and, for each surface change,
``app.core.frames.plan`` with the subscribers of that run, then writes each frame to its
subscriber's topic, keyed ``runId/surfaceId``. The materialized surfaces are rebuilt from the
log on assignment (nothing else is stored); subscriber cursors are not persisted, so after a
restart or a rebalance every subscriber's next frame for a surface is a full frame, which is
always safe. Frames are delivered at least once: the log offset is committed after the sends,
and a repeated delta fails the client's base check and brings a resync, a repeated full frame
is idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener

from app.core import frames
from app.core.policy import HostPolicy
from app.core.redaction import Secrets, prepare
from app.core.run_lifecycle import lineage_of
from app.core.subscriber import DRIFT
from app.core.subscriptions import Registry, register, subscribers_for
from app.core.surfaces import Projection, SurfaceKey, project
from app.core.topic_plan import TopicSpec, subscriber_topic
from app.shell.kafka_io import group_consumer, partitions_of, read_topic
from app.shell.topics_admin import ensure_topics, load_definitions

__all__ = ["ProjectorConfig", "ProjectorLoop"]

log = logging.getLogger("a2ui_stream.projector")

RESYNC_HEADER = "a2ui-resync"
# How far back a new owner of a partition looks for resync requests nobody answered: longer
# than a rebalance after a member's death (session timeout + join), short enough that a
# restart does not answer requests from long ago again.
RESYNC_LOOKBACK_SECONDS = 120.0


@dataclass(frozen=True)
class ProjectorConfig:
    bootstrap: str
    log_topic: str
    subscriptions_topic: str
    resync_topic: str
    topic_prefix: str
    replication: int
    group_id: str
    fast_groups: bool = False


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, loop: ProjectorLoop) -> None:
        self.loop = loop

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        async with self.loop.lock:
            for tp in revoked:
                self.loop.owned.discard(tp.partition)

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        async with self.loop.lock:
            for tp in assigned:
                await self.loop.restore(tp)
        for tp in assigned:  # the requests that waited for an owner (outside the lock)
            self.loop.answer_missed_later(tp.partition)


class ProjectorLoop:
    def __init__(self, config: ProjectorConfig, policy: HostPolicy) -> None:
        self.config = config
        self.policy = policy
        self.lock = asyncio.Lock()
        self.projection = Projection()
        self.owned: set[int] = set()
        self.partitions_of_runs: dict[str, int] = {}
        self.lineages: dict[str, tuple[str, ...]] = {}  # fork -> its ancestors (run.forked)
        self.registry: Registry = {}
        self.cursors: dict[tuple[str, SurfaceKey], frames.SubscriberCursor] = {}
        self.topics_ready: set[str] = set()
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

    async def start(self) -> None:
        self.producer = AIOKafkaProducer(
            bootstrap_servers=self.config.bootstrap,
            acks="all",
            linger_ms=5,
            max_request_size=9 * 1024 * 1024,
        )
        await self.producer.start()
        self.consumer = group_consumer(
            self.config.bootstrap, self.config.group_id, fast_groups=self.config.fast_groups
        )
        await self.consumer.start()
        self.consumer.subscribe([self.config.log_topic], listener=_Rebalance(self))

    async def stop(self) -> None:
        # The loops first, then their clients: a resync answer or a batch in flight when the
        # producer closes raised ProducerClosed and crashed the service on SIGTERM (found by
        # `a2ui-stream soak`, docs/reliability.md). Frames are at-least-once: a batch cut short
        # here is projected again from the committed offset.
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for client in (self.consumer, self.producer):
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.stop()

    # -- state ---------------------------------------------------------------------------------

    async def restore(self, tp: TopicPartition) -> None:
        """Rebuild the surfaces of partition ``tp`` from the log up to the committed offset."""
        assert self.consumer is not None
        committed = await self.consumer.committed(tp) or 0
        records = await read_topic(
            self.config.bootstrap,
            tp.topic,
            isolation="read_committed",
            partitions=[tp.partition],
            timeout=300,
        )
        state = self.projection
        for record in records:
            if record.offset >= committed:
                break
            if record.value is None:
                continue
            event = orjson.loads(record.value)
            state, _ = project(state, event)
            self.partitions_of_runs[event["runId"]] = tp.partition
        self.projection = state
        self.owned.add(tp.partition)
        log.info("projector: partition %d restored up to offset %d", tp.partition, committed)

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
            batch = await self.consumer.getmany(timeout_ms=200, max_records=2000)
            if not batch:
                continue
            async with self.lock:
                try:
                    await self._project_batch(batch)
                except Exception as exc:
                    log.error("projector: batch failed (%s); rewinding", type(exc).__name__)
                    for tp in list(self.consumer.assignment()):
                        committed = await self.consumer.committed(tp)
                        if committed is None:
                            await self.consumer.seek_to_beginning(tp)
                        else:
                            self.consumer.seek(tp, committed)

    async def _project_batch(self, batch: dict[TopicPartition, list[Any]]) -> None:
        assert self.consumer is not None
        futures: list[asyncio.Future[Any]] = []
        offsets: dict[TopicPartition, int] = {}
        for tp, records in batch.items():
            if tp.partition not in self.owned or not records:
                continue
            for record in records:
                if record.value is None:
                    continue
                event = orjson.loads(record.value)
                self.partitions_of_runs[event["runId"]] = tp.partition
                if event.get("type") == "run.forked":  # a fork frames with its ancestors' secrets
                    self.lineages[event["runId"]] = lineage_of(event["payload"])
                self.projection, changes = project(self.projection, event)
                for change in changes:
                    futures.extend(await self._fan_out(change))
            offsets[tp] = records[-1].offset + 1
        # A frame the broker refuses (e.g. over the topic's size limit) must not stall every
        # other subscriber: it is counted and dropped; that subscriber sees a sequence gap on
        # its next frame and asks for a resync (docs/projection.md).
        for result in await asyncio.gather(*futures, return_exceptions=True):
            if isinstance(result, BaseException):
                self.failed[type(result).__name__] += 1
                log.error("projector: a frame could not be written (%s)", type(result).__name__)
        if offsets:
            await self.consumer.commit(offsets)

    def _secrets(self, run_id: str) -> Secrets:
        """SR-1 for a run's frames: its secrets and those of the runs it was forked from."""
        return prepare(self.policy.secrets_for(run_id, self.lineages.get(run_id, ())))

    async def _fan_out(self, change: Any) -> list[asyncio.Future[Any]]:
        run_id = change.key.run_id
        subs = subscribers_for(self.registry, run_id)
        if not subs:
            return []
        pairs = [
            (
                frames.Subscription(s.subscriber_id, s.delta, s.full_every),
                self.cursors.get((s.subscriber_id, change.key)),
            )
            for s in subs
        ]
        secrets = self._secrets(run_id)
        planned = frames.plan(change, pairs, secrets=secrets)
        for warning in planned.warnings:
            log.warning(
                "projection_warning run=%s surface=%s: %s", run_id, change.key.surface_id, warning
            )
        for sid, cursor in planned.cursors.items():
            self.cursors[(sid, change.key)] = cursor
        self.fallbacks.update(planned.fallbacks)
        return [await self._send(send, change.key) for send in planned.sends]

    async def _send(
        self, send: frames.Send, key: SurfaceKey, headers: list[tuple[str, bytes]] | None = None
    ) -> asyncio.Future[Any]:
        assert self.producer is not None
        topic = await self._subscriber_topic(send.subscriber_id)
        self.sent[send.kind] += 1
        self.digest_checks += send.reason == "digest"
        future: asyncio.Future[Any] = await self.producer.send(
            topic, send.frame, key=f"{key.run_id}/{key.surface_id}".encode(), headers=headers
        )
        return future

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
                async with self.lock:
                    await self._catch_up(after)

    async def _catch_up(self, sub: Any) -> None:
        """A subscriber that registers (or changes) while runs it follows already have
        surfaces gets one full frame of each now (RFC 0114: the host can materialize the full
        surface for any subscriber at any time), not only at the next change."""
        by_run: dict[str, list[Any]] = {}
        for key, surface in self.projection.surfaces.items():
            owned = self.partitions_of_runs.get(key.run_id) in self.owned
            if owned and sub.follows(key.run_id):
                by_run.setdefault(key.run_id, []).append(surface)
        futures = []
        target = frames.Subscription(sub.subscriber_id, sub.delta, sub.full_every)
        for run_id, surfaces in by_run.items():
            secrets = self._secrets(run_id)
            for send, cursor in frames.catch_up(surfaces, target, secrets=secrets):
                key = SurfaceKey(run_id, cursor_surface(send))
                self.cursors[(sub.subscriber_id, key)] = cursor
                futures.append(await self._send(send, key))
        for result in await asyncio.gather(*futures, return_exceptions=True):
            if isinstance(result, BaseException):
                self.failed[type(result).__name__] += 1

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
                            async with self.lock:
                                await self._answer(record.value, source)
                for tp in tps:
                    self.resync_positions[tp.partition] = await consumer.position(tp)
                self.resyncs_read.set()
                self.resyncs_read = asyncio.Event()
        finally:
            await consumer.stop()

    def _remember(self, timestamp: int, source: tuple[int, int], value: bytes) -> None:
        recent = self.recent_resyncs
        recent.append((timestamp, source[0], source[1], _run_of_request(value), value))
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
        """After ``partition`` of the log was restored here: answer the recent resync requests
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
        async with self.lock:
            if partition not in self.owned:
                return
            for _ts, p, offset, run_id, value in list(self.recent_resyncs):
                if run_id is not None and self.partitions_of_runs.get(run_id) == partition:
                    await self._answer(value, (p, offset))

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
        request and worker; ``source`` is the request's partition and offset)."""
        if source in self.answered_resyncs:
            return
        try:
            request = orjson.loads(value)
            sid, run_id, surface_id = (
                request["subscriberId"],
                request["runId"],
                request["surfaceId"],
            )
        except (orjson.JSONDecodeError, KeyError, TypeError):
            log.warning("projector: ignored a malformed resync request")
            return
        if self.partitions_of_runs.get(run_id) not in self.owned:
            return  # another worker owns this run
        key = SurfaceKey(run_id, surface_id)
        surface = self.projection.surfaces.get(key)
        sub = self.registry.get(sid)
        if surface is None or sub is None:
            return
        send, cursor = frames.answer_resync(
            surface,
            frames.Subscription(sid, sub.delta, sub.full_every),
            self.cursors.get((sid, key)),
            secrets=self._secrets(run_id),
        )
        self.cursors[(sid, key)] = cursor
        self.answered_resyncs.add(source)
        self.resyncs_answered += 1
        self.drift_resyncs += request.get("reason") == DRIFT
        self.fallbacks["resync"] += 1
        header = [(RESYNC_HEADER, f"{source[0]}:{source[1]}".encode())]
        await asyncio.gather(await self._send(send, key, header))

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
            "# HELP a2ui_frames_failed_total Frames the broker would not take, by error.",
            "# TYPE a2ui_frames_failed_total counter",
        ]
        lines += [
            f'a2ui_frames_failed_total{{error="{e}"}} {n}' for e, n in sorted(self.failed.items())
        ]
        return lines


def cursor_surface(send: frames.Send) -> str:
    """The surfaceId a full frame is about (catch-up frames are planned per surface)."""
    return str(orjson.loads(send.frame)["surfaceId"])


def _run_of_request(value: bytes) -> str | None:
    try:
        request = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    run_id = request.get("runId") if isinstance(request, dict) else None
    return run_id if isinstance(run_id, str) else None


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
