"""Part (c) of the projection bench: one update fanned out to 1, 100 and 1,000 subscribers
through the projector's own step (``projector_batch.plan_batch`` over a batch of one recorded
event, the run cached with every subscriber in sync), planned only, or also sent as the
projector sends (``projector_fanout.send_all``) beside the way it sent before (on a broker).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass
from typing import Any

from app.core.admission.policy import HostPolicy
from app.core.projection.frames import DEFAULT_FULL_EVERY
from app.core.projection.projector_batch import (
    Batch,
    BatchPlan,
    Decoded,
    Kept,
    LogEntry,
    plan_batch,
)
from app.core.projection.projector_runs import rebuild_run
from app.core.projection.subscriptions import Subscription
from app.core.runlog.events import RecordedEvent
from app.devtools.bench_projection.inputs import FANOUT, FANOUT_TOPICS

__all__ = ["FanoutStep", "fanout_on", "fanout_step", "measure_fanout", "measure_fanout_produced"]

PARTITION = 0
CACHE_SURFACES = 10_000


@dataclass(frozen=True)
class FanoutStep:
    """The projector's step for the last of ``events`` with ``count`` subscribers in ``mode``
    (every one holding the surface the event starts from): ``plan()`` is
    ``projector_batch.plan_batch`` as the projector loop calls it."""

    batch: Batch
    cache: dict[str, Kept]
    registry: dict[str, Subscription]
    policy: HostPolicy
    held: int

    def plan(self) -> BatchPlan:
        plan = plan_batch(
            self.batch,
            self.cache,
            rebuilt={},
            positions={PARTITION: self.batch.partitions[PARTITION].next_offset - 1},
            gathered=0,
            generation=0,
            registry=self.registry,
            policy=self.policy,
            held=self.held,
            cache_surfaces=CACHE_SURFACES,
        )
        assert isinstance(plan, BatchPlan)
        return plan


def _batch(event: RecordedEvent, offset: int) -> Batch:
    entry = LogEntry(offset, event["runId"], event["sequence"], event)
    return Batch((PARTITION,), {PARTITION: Decoded((entry,), offset + 1)})


def fanout_step(events: list[RecordedEvent], count: int, mode: str) -> FanoutStep:
    """The step, primed: the run rebuilt from all but the last two events, the second-last
    event planned for every subscriber (their first frame: full), its run and cursors cached."""
    run_id = events[-1]["runId"]
    registry = {
        f"s{i}": Subscription(f"s{i}", None, mode == "delta", DEFAULT_FULL_EVERY)
        for i in range(count)
    }
    policy = HostPolicy()
    run = rebuild_run(run_id, events[:-2])
    offset = len(events) - 2
    primed = plan_batch(
        _batch(events[-2], offset),
        {},
        rebuilt={run_id: run},
        positions={PARTITION: offset},
        gathered=0,
        generation=0,
        registry=registry,
        policy=policy,
        held=0,
        cache_surfaces=CACHE_SURFACES,
    )
    assert isinstance(primed, BatchPlan)
    kept = primed.runs[run_id]
    return FanoutStep(
        _batch(events[-1], offset + 1), {run_id: kept}, registry, policy, kept.run.surface_count
    )


# --- (c) fan-out ---------------------------------------------------------------------------------


def measure_fanout(events: list[RecordedEvent]) -> list[dict[str, Any]]:
    """The projector's step for one update, planned and encoded only (no produce)."""
    rows = []
    for count in FANOUT:
        for mode in ("delta", "full"):
            step = fanout_step(events, count, mode)
            repeats = max(5, 2000 // count)
            samples = []
            for _ in range(repeats):
                start = time.perf_counter_ns()
                plan = step.plan()
                samples.append((time.perf_counter_ns() - start) / 1000.0)
            rows.append(
                {
                    "subscribers": count,
                    "mode": mode,
                    "frames": sorted({send.kind for send in plan.sends}),
                    "p50_us": round(statistics.median(samples), 1),
                    "per_subscriber_us": round(statistics.median(samples) / count, 3),
                    "bytes_per_frame": len(plan.sends[0].value),
                }
            )
    return rows


async def measure_fanout_produced(
    events: list[RecordedEvent], bootstrap: str, prefix: str, topics: list[str]
) -> list[dict[str, Any]]:
    """``measure_fanout`` with the sends, both ways in turn in every repeat: the projector's
    (``projector_fanout.send_all``, with a projector loop's producer, counters and subscriber
    topics) and the baseline (one awaited ``send_frame`` per frame, how the projector sent
    before); each until every frame is acknowledged. ``topics``: subscriber ``s{i}``'s topic
    (made with ``prefix``)."""
    from aiokafka import AIOKafkaProducer

    from app.shell.worker.frame_produce import produce_frames

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_batch_size=256 * 1024
    )
    await producer.start()
    rows = []
    try:
        loop = _projector(bootstrap, prefix, producer, topics)
        # metadata and leaders before the clock
        await produce_frames(
            producer, [(t, b"warm-up", b"warm-up", ()) for t in topics], loop.frame_partitions
        )
        for count in FANOUT:
            for mode in ("delta", "full"):
                rows += await _produced_rows(loop, fanout_step(events, count, mode), count, mode)
    finally:
        await producer.stop()
    return rows


def _projector(bootstrap: str, prefix: str, producer: Any, topics: list[str]) -> Any:
    """A projector loop as the worker builds it, not started: the bench's producer, its
    subscriber topics known to be made."""
    from app.shell.worker.projector_config import ProjectorConfig
    from app.shell.worker.projector_loop import ProjectorLoop

    config = ProjectorConfig(bootstrap, "log", "subscriptions", "resync", prefix, 1, "bench", 1)
    loop = ProjectorLoop(config, HostPolicy())
    loop.producer = producer
    loop.topics_ready.update(topics)
    return loop


PATHS = ("request", "send_frame")  # the projector's way; the way before, as the baseline


async def _produced_rows(
    loop: Any, step: FanoutStep, count: int, mode: str
) -> list[dict[str, Any]]:
    """A row per path: ``count`` subscribers in ``mode``, planned, sent and acknowledged,
    repeated with the two paths in turn."""
    from app.shell.worker.projector_fanout import send_all, send_frame

    samples: dict[str, dict[str, list[float]]] = {
        path: {"plan": [], "cpu": [], "acked": []} for path in PATHS
    }
    failed_before = sum(loop.failed.values())
    for _ in range(max(3, 200 // count)):
        for path in PATHS:
            t0, c0 = time.perf_counter_ns(), time.process_time_ns()
            plan = step.plan()
            t1 = time.perf_counter_ns()
            if path == "request":
                await send_all(loop, plan.sends)
            else:
                futures = [
                    await send_frame(
                        loop.producer,
                        await loop.subscriber_topic(x.subscriber_id),
                        x.value,
                        x.key,
                        list(x.headers) or None,
                        loop.frame_partitions,
                    )
                    for x in plan.sends
                ]
                await asyncio.gather(*futures)
            t3, c3 = time.perf_counter_ns(), time.process_time_ns()
            samples[path]["plan"].append((t1 - t0) / 1000.0)
            samples[path]["cpu"].append((c3 - c0) / 1000.0)
            samples[path]["acked"].append((t3 - t0) / 1e6)
    assert sum(loop.failed.values()) == failed_before, dict(loop.failed)
    rows = []
    for path in PATHS:
        cpu_us = statistics.median(samples[path]["cpu"])
        rows.append(
            {
                "subscribers": count,
                "mode": mode,
                "path": path,
                "topics": len({x.subscriber_id for x in plan.sends}),
                "frames": len(plan.sends),
                "plan_p50_us": round(statistics.median(samples[path]["plan"]), 1),
                "cpu_p50_us": round(cpu_us, 1),
                "cpu_per_subscriber_us": round(cpu_us / count, 3),
                "acked_p50_ms": round(statistics.median(samples[path]["acked"]), 2),
                "bytes_per_frame": len(plan.sends[0].value),
            }
        )
    return rows


async def fanout_on(bootstrap: str, events: list[RecordedEvent]) -> list[dict[str, Any]]:
    """``measure_fanout_produced`` on subscriber topics made for it (and deleted after)."""
    import uuid

    from aiokafka.admin import AIOKafkaAdminClient

    from app.core.runlog.topic_plan import subscriber_topic
    from app.shell.worker.topics_admin import ensure_topics, load_definitions

    definitions = load_definitions()
    prefix = f"benchfan{uuid.uuid4().hex[:8]}."
    specs = [
        subscriber_topic(definitions, f"s{i}", prefix=prefix, replication=1)
        for i in range(min(max(FANOUT), FANOUT_TOPICS))
    ]
    await ensure_topics(bootstrap, specs)
    try:
        return await measure_fanout_produced(events, bootstrap, prefix, [s.name for s in specs])
    finally:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.delete_topics([s.name for s in specs])
        finally:
            await admin.close()
