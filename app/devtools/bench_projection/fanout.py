"""Part (c) of the projection bench: one update fanned out to 1, 100 and 1,000 subscribers,
planned and encoded only, or sent as the projector sends it beside the way it sent before (on
a broker).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass
from typing import Any

from app.core.projection.frames import Recipient, plan_frames
from app.core.projection.surfaces import SurfaceChange
from app.devtools.bench_projection.inputs import FANOUT, FANOUT_TOPICS

__all__ = ["fanout_on", "measure_fanout", "measure_fanout_produced"]


# --- (c) fan-out ---------------------------------------------------------------------------------


def measure_fanout(changes: list[SurfaceChange]) -> list[dict[str, Any]]:
    old_change, change = changes[-2], changes[-1]
    rows = []
    for count in FANOUT:
        for mode in ("delta", "full"):
            subs = [Recipient(f"s{i}", delta=mode == "delta") for i in range(count)]
            # every subscriber holds exactly the surface this change starts from
            held = plan_frames(old_change, [(s, None) for s in subs]).cursors
            pairs = [(s, held[s.subscriber_id]) for s in subs]
            repeats = max(5, 2000 // count)
            samples = []
            for _ in range(repeats):
                start = time.perf_counter_ns()
                result = plan_frames(change, pairs)
                samples.append((time.perf_counter_ns() - start) / 1000.0)
            kinds = {send.kind for send in result.sends}
            rows.append(
                {
                    "subscribers": count,
                    "mode": mode,
                    "frames": sorted(kinds),
                    "p50_us": round(statistics.median(samples), 1),
                    "per_subscriber_us": round(statistics.median(samples) / count, 3),
                    "bytes_per_frame": len(result.sends[0].frame),
                }
            )
    return rows


async def measure_fanout_produced(
    changes: list[SurfaceChange], bootstrap: str, topics: list[str]
) -> list[dict[str, Any]]:
    """``measure_fanout`` with the sends, both ways in turn in every repeat: the projector's
    (``frame_produce.produce_frames``, what ``projector_fanout.send_all`` calls) and the
    baseline (one awaited ``send_frame`` per frame, how the projector sent before); each until
    every frame is acknowledged."""
    from aiokafka import AIOKafkaProducer

    from app.shell.worker.frame_produce import produce_frames

    change = changes[-1]
    key = f"{change.key.run_id}/{change.key.surface_id}".encode()
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_batch_size=256 * 1024
    )
    await producer.start()
    rows = []
    partitions: dict[str, int | None] = {}  # the projector's per-topic answer
    try:
        # metadata and leaders before the clock
        await produce_frames(producer, [(t, key, b"warm-up", ()) for t in topics], partitions)
        for count in FANOUT:
            for mode in ("delta", "full"):
                sent = _Sent(producer, key, topics, partitions)
                rows += await _produced_rows(sent, changes, count, mode)
    finally:
        await producer.stop()
    return rows


@dataclass(frozen=True)
class _Sent:
    """Where the frames go: the producer, the surface's key, the subscriber topics and the
    projector's per-topic partition answers."""

    producer: Any
    key: bytes
    topics: list[str]
    partitions: dict[str, int | None]


PATHS = ("request", "send_frame")  # the projector's way; the way before, as the baseline


async def _produced_rows(
    sent: _Sent, changes: list[SurfaceChange], count: int, mode: str
) -> list[dict[str, Any]]:
    """A row per path: ``count`` subscribers in ``mode``, planned, sent and acknowledged,
    repeated with the two paths in turn."""
    from app.shell.worker.frame_produce import produce_frames
    from app.shell.worker.projector_fanout import send_frame

    old_change, change = changes[-2], changes[-1]
    producer, key, topics, parts = sent.producer, sent.key, sent.topics, sent.partitions
    subs = [Recipient(f"s{i}", delta=mode == "delta") for i in range(count)]
    where = {s.subscriber_id: topics[i % len(topics)] for i, s in enumerate(subs)}
    held = plan_frames(old_change, [(s, None) for s in subs]).cursors
    pairs = [(s, held[s.subscriber_id]) for s in subs]
    samples: dict[str, dict[str, list[float]]] = {
        path: {"plan": [], "cpu": [], "acked": []} for path in PATHS
    }
    for _ in range(max(3, 200 // count)):
        for path in PATHS:
            t0, c0 = time.perf_counter_ns(), time.process_time_ns()
            result = plan_frames(change, pairs)
            t1 = time.perf_counter_ns()
            if path == "request":
                frames = [(where[x.subscriber_id], key, x.frame, ()) for x in result.sends]
                failed = [r for r in await produce_frames(producer, frames, parts) if r]
                assert not failed, failed[:3]
            else:
                futures = [
                    await send_frame(producer, where[x.subscriber_id], x.frame, key, None, parts)
                    for x in result.sends
                ]
                await asyncio.gather(*futures)
            t3, c3 = time.perf_counter_ns(), time.process_time_ns()
            samples[path]["plan"].append((t1 - t0) / 1000.0)
            samples[path]["cpu"].append((c3 - c0) / 1000.0)
            samples[path]["acked"].append((t3 - t0) / 1e6)
    rows = []
    for path in PATHS:
        cpu_us = statistics.median(samples[path]["cpu"])
        rows.append(
            {
                "subscribers": count,
                "mode": mode,
                "path": path,
                "topics": min(count, len(topics)),
                "frames": len(result.sends),
                "plan_p50_us": round(statistics.median(samples[path]["plan"]), 1),
                "cpu_p50_us": round(cpu_us, 1),
                "cpu_per_subscriber_us": round(cpu_us / count, 3),
                "acked_p50_ms": round(statistics.median(samples[path]["acked"]), 2),
                "bytes_per_frame": len(result.sends[0].frame),
            }
        )
    return rows


async def fanout_on(bootstrap: str, changes: list[SurfaceChange]) -> list[dict[str, Any]]:
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
        return await measure_fanout_produced(changes, bootstrap, [s.name for s in specs])
    finally:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.delete_topics([s.name for s in specs])
        finally:
            await admin.close()
