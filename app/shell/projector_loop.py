"""The projector: per-run log -> per-subscriber topics (full frames or verified RFC 6902 deltas).

Shell module, running inside the worker beside the validator (docs/projection.md). Three
consumers:
- the per-run log, in the consumer group ``<app id>-projector`` (read_committed; each worker
  projects the runs of the log partitions it owns);
- the subscription registry (compacted, every worker reads all of it, from the beginning);
- resync requests (every worker reads all of them from the moment it starts, and answers the
  ones for runs it owns).

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
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener

from app.core import frames
from app.core.policy import HostPolicy
from app.core.redaction import prepare
from app.core.subscriber import DRIFT
from app.core.subscriptions import Registry, register, subscribers_for
from app.core.surfaces import Projection, SurfaceKey, project
from app.core.topic_plan import TopicSpec, subscriber_topic
from app.shell.kafka_io import group_consumer, partitions_of, read_topic
from app.shell.topics_admin import ensure_topics, load_definitions

__all__ = ["ProjectorConfig", "ProjectorLoop"]

log = logging.getLogger("a2ui_stream.projector")


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


class ProjectorLoop:
    def __init__(self, config: ProjectorConfig, policy: HostPolicy) -> None:
        self.config = config
        self.policy = policy
        self.lock = asyncio.Lock()
        self.projection = Projection()
        self.owned: set[int] = set()
        self.partitions_of_runs: dict[str, int] = {}
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
        secrets = prepare(self.policy.secrets_for(run_id))
        planned = frames.plan(change, pairs, secrets=secrets)
        for warning in planned.warnings:
            log.warning(
                "projection_warning run=%s surface=%s: %s", run_id, change.key.surface_id, warning
            )
        for sid, cursor in planned.cursors.items():
            self.cursors[(sid, change.key)] = cursor
        self.fallbacks.update(planned.fallbacks)
        return [await self._send(send, change.key) for send in planned.sends]

    async def _send(self, send: frames.Send, key: SurfaceKey) -> asyncio.Future[Any]:
        assert self.producer is not None
        topic = await self._subscriber_topic(send.subscriber_id)
        self.sent[send.kind] += 1
        self.digest_checks += send.reason == "digest"
        future: asyncio.Future[Any] = await self.producer.send(
            topic, send.frame, key=f"{key.run_id}/{key.surface_id}".encode()
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
            secrets = prepare(self.policy.secrets_for(run_id))
            for send, cursor in frames.catch_up(surfaces, target, secrets=secrets):
                key = SurfaceKey(run_id, cursor_surface(send))
                self.cursors[(sub.subscriber_id, key)] = cursor
                futures.append(await self._send(send, key))
        for result in await asyncio.gather(*futures, return_exceptions=True):
            if isinstance(result, BaseException):
                self.failed[type(result).__name__] += 1

    async def _follow_resyncs(self, stopping: asyncio.Event) -> None:
        async for _key, value, _live in _tail(
            self.config.bootstrap, self.config.resync_topic, stopping, from_beginning=False
        ):
            if value is None:
                continue
            async with self.lock:
                await self._answer(value)

    async def _answer(self, value: bytes) -> None:
        """Issue 5 §4: exactly one full frame for a resync request of a run this worker owns."""
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
            secrets=prepare(self.policy.secrets_for(run_id)),
        )
        self.cursors[(sid, key)] = cursor
        self.resyncs_answered += 1
        self.drift_resyncs += request.get("reason") == DRIFT
        self.fallbacks["resync"] += 1
        await asyncio.gather(await self._send(send, key))

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
