"""Producing a pass's records (as fast as acknowledged, or at a rate), the processes' CPU and
when they are quiet, and the latency phase at a steady rate.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner

from app.devtools.bench_output import pct, process_cpu_seconds
from app.devtools.bench_pipeline.procs import OutcomeWatcher, Processes
from app.devtools.bench_pipeline.records import Options, bench_records

__all__ = [
    "QUIET_CORES",
    "QUIET_TIMEOUT",
    "measure_latency",
    "processes_cpu",
    "produce_fast",
    "until_quiet",
]


async def produce_fast(
    producer: AIOKafkaProducer,
    topic: str,
    records: Sequence[tuple[bytes, bytes, int | None, list[Any]]],
    partitions: int,
) -> tuple[float, float]:
    """Every record as whole record batches per partition (the key's partition unless one is
    given), in order: the bench's producer must not be what limits the pipeline. Returns the
    time of the first send and the time the last one was acknowledged."""
    partitioner = DefaultPartitioner()
    everyone = list(range(partitions))
    start = time.perf_counter()
    builders: dict[int, Any] = {}
    futures = []
    for key, value, partition, headers in records:
        p = partition if partition is not None else partitioner(key, everyone, everyone)
        builder = builders.get(p)
        if builder is None:
            builder = builders[p] = producer.create_batch()
        if builder.append(key=key, value=value, timestamp=None, headers=headers) is None:
            futures.append(await producer.send_batch(builder, topic, partition=p))
            builder = builders[p] = producer.create_batch()
            builder.append(key=key, value=value, timestamp=None, headers=headers)
    for p, builder in builders.items():
        futures.append(await producer.send_batch(builder, topic, partition=p))
    await asyncio.gather(*futures)
    return start, time.perf_counter()


async def _produce_at(
    producer: AIOKafkaProducer, topic: str, records: list[tuple[bytes, bytes]], rate: float
) -> dict[str, float]:
    """One record at a time at ``rate`` per second; each one's send time by where it landed."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    pending = []
    for i, (key, value) in enumerate(records):
        due = start + i / rate
        if due > loop.time():
            await asyncio.sleep(due - loop.time())
        sent = time.perf_counter()
        pending.append((sent, await producer.send(topic, value, key=key)))
    out = {}
    for sent, future in pending:
        meta = await future
        out[f"{meta.partition}:{meta.offset}"] = sent
    return out


QUIET_CORES = 0.15  # the processes' CPU, together, below which they count as quiet
QUIET_TIMEOUT = 120.0


def processes_cpu(procs: Processes) -> float:
    """The CPU seconds (user + system) the processes of ``procs`` have used so far."""
    return sum(process_cpu_seconds(proc.pid) or 0.0 for proc, _ in procs.procs)


async def until_quiet(procs: Processes, window: float = 1.0) -> tuple[float | None, float | None]:
    """Seconds until the processes used under ``QUIET_CORES`` over a ``window``: done with
    their backlog (None: not quiet within ``QUIET_TIMEOUT``; the figures after it say so); and
    their CPU seconds when that quiet window began (what the backlog cost them)."""
    pids = [proc.pid for proc, _ in procs.procs]
    if not pids or not Path("/proc/self/stat").exists():
        return None, None
    start = time.monotonic()
    while time.monotonic() - start < QUIET_TIMEOUT:
        before, t0 = processes_cpu(procs), time.monotonic()
        await asyncio.sleep(window)
        procs.check()
        if (processes_cpu(procs) - before) / (time.monotonic() - t0) < QUIET_CORES:
            return round(time.monotonic() - start, 2), before
    return None, None


async def measure_latency(
    producer: AIOKafkaProducer,
    admission: str,
    watcher: OutcomeWatcher,
    seen: int,
    opts: Options,
    procs: Processes | None,
) -> dict[str, Any]:
    """``--latency-records`` offered at ``--rate``: each one's send to its outcome seen."""
    if not opts.latency_records:
        return {}
    lat = bench_records(opts.latency_records, opts.runs, prefix="lat-")
    watching = asyncio.create_task(watcher.until(seen + len(lat), procs))
    cpu_before = processes_cpu(procs) if procs is not None else None
    sent = await _produce_at(producer, admission, lat, opts.rate)
    await watching
    delays = [(watcher.seen[s] - t) * 1000 for s, t in sent.items()]
    at_rate: dict[str, Any] = {}
    if procs is not None and cpu_before is not None:
        # until quiet again: what the offered records cost the processes, their idle CPU over
        # the phase included (the cost per envelope at this rate)
        _, cpu_quiet = await until_quiet(procs)
        if cpu_quiet is not None:
            at_rate["cpu_us_per_envelope_at_rate"] = round(
                (cpu_quiet - cpu_before) / len(lat) * 1e6, 1
            )
    return at_rate | {
        "latency_records": len(delays),
        "latency_ms_p50": round(statistics.median(delays), 2),
        "latency_ms_p99": round(pct(delays, 0.99), 2),
        "latency_ms_max": round(max(delays), 2),
    }
