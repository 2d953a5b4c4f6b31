"""One pass of each kind: the pipeline (workers with the given roles), the pass-through, the
projector alone on a validator pass's log, and the raw produce+consume ceiling.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from app.devtools.bench_pipeline.procs import (
    OutcomeWatcher,
    Processes,
    group_committed,
    group_stable,
    wait_until,
)
from app.devtools.bench_pipeline.producing import (
    measure_latency,
    processes_cpu,
    produce_fast,
    until_quiet,
)
from app.devtools.bench_pipeline.records import (
    PRODUCER_CONFIG,
    Options,
    bench_records,
    probe_records,
)
from app.shell.cli.broker import Broker, free_port
from app.shell.settings import Settings

__all__ = [
    "PassSetup",
    "live_pass",
    "produce",
    "profiled",
    "projector_pass",
    "raw_pass",
    "worker_env",
]


@dataclass
class PassSetup:
    kind: str
    settings: Settings
    topics: dict[str, str]
    tmp: Path
    procs: Processes


def worker_env(
    broker: Broker | str, settings: Settings, tmp: Path, roles: str = "validator", n: int = 0
) -> dict[str, str]:
    """A worker process's environment (bench sse uses it too, with the validator role)."""
    return {
        **os.environ,
        "KAFKA_BOOTSTRAP": broker if isinstance(broker, str) else broker.bootstrap,
        "A2UI_STREAM_TOPIC_PREFIX": settings.topic_prefix,
        "A2UI_STREAM_PARTITIONS": str(settings.partitions),
        "A2UI_STREAM_APP_ID": settings.app_id,
        "A2UI_STREAM_FAST_GROUPS": "1",
        "A2UI_STREAM_WORKER_ID": f"bench{n}",
        "A2UI_STREAM_WEB_PORT": str(free_port()),
        "A2UI_STREAM_DATA_DIR": str(tmp / f"data{n}"),
        "A2UI_STREAM_LOG_LEVEL": "warning",
        "A2UI_STREAM_ROLES": roles,
    }


async def produce(
    bootstrap: str, topic: str, records: list[tuple[bytes, bytes]], rate: float | None = None
) -> None:
    """``records`` one send each (at ``rate`` per second if given), all acknowledged (bench
    sse)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **PRODUCER_CONFIG)
    await producer.start()
    try:
        loop = asyncio.get_running_loop()
        start = loop.time()
        futures = []
        for i, (key, value) in enumerate(records):
            if rate is not None:
                due = start + i / rate
                if due > loop.time():
                    await asyncio.sleep(due - loop.time())
            futures.append(await producer.send(topic, value, key=key))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def _ready(bench: PassSetup, bootstrap: str, groups: list[str], workers: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        for group in groups:
            await wait_until(
                f"group {group} stable with {workers} members",
                lambda g=group: group_stable(admin, g, workers),  # type: ignore[misc]
                bench.procs,
            )
    finally:
        await admin.close()


def profiled(command: list[str], name: str) -> list[str]:
    """``python COMMAND``, run under the CPU-time sampler (``app.devtools.cpu_profile``) when
    ``A2UI_STREAM_PROFILE_DIR`` names a directory: each process writes
    ``<dir>/<name>-<pid of the bench>-<n>.folded`` and ``.txt`` at exit."""
    where = os.environ.get("A2UI_STREAM_PROFILE_DIR")
    if not where:
        return [sys.executable, *command]
    label = name.replace(",", "+")
    out = Path(where) / f"{label}-{os.getpid()}-{next(_profiled)}.folded"
    return [sys.executable, "-m", "app.devtools.cpu_profile", str(out), "--", *command]


_profiled = itertools.count(1)  # numbers the profiled processes of one bench run


def _spawn_live(
    bench: PassSetup, bootstrap: str, opts: Options, roles: str | None, mode: str
) -> list[str]:
    """The pass's processes: workers with ``roles``, or (None) the pass-through with its
    producer ``mode``; their consumer groups."""
    admission, log_topic = bench.topics["admission"], bench.topics["log"]
    app_id = bench.settings.app_id
    for n in range(opts.workers):
        if roles is not None:
            env = worker_env(bootstrap, bench.settings, bench.tmp, roles, n)
            bench.procs.spawn(profiled(["-m", "app.shell.cli", "worker"], roles), env, f"worker{n}")
        else:
            argv = profiled(["-m", "app.devtools.bench_pipeline", "passthrough"], "passthrough")
            argv += [bootstrap, admission, log_topic, f"{app_id}-passthrough", mode]
            bench.procs.spawn(argv, dict(os.environ), f"passthrough{n}")
    return [f"{app_id}-{r}" for r in roles.split(",")] if roles else [f"{app_id}-passthrough"]


async def live_pass(
    bench: PassSetup, broker: Broker, opts: Options, roles: str | None, mode: str = "partition"
) -> dict[str, Any]:
    """A pipeline pass with roles including the validator, or the pass-through (its producer
    ``mode``, ``passthrough.MODES``): probes, then the timed records, then the latency
    records."""
    bootstrap, p = broker.bootstrap, opts.partitions
    admission, log_topic, dead = (
        bench.topics["admission"],
        bench.topics["log"],
        bench.topics["deadletter"],
    )
    watch = [log_topic, dead] if roles is not None else [log_topic]
    watcher = OutcomeWatcher(bootstrap, watch, p, "read_committed")
    await watcher.start()
    groups = _spawn_live(bench, bootstrap, opts, roles, mode)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **PRODUCER_CONFIG)
    await producer.start()
    try:
        await _ready(bench, bootstrap, groups, opts.workers)
        await produce_fast(producer, admission, probe_records(p), p)
        await watcher.until(p, bench.procs)
        data = bench_records(opts.records, opts.runs, prefix="bench-")
        watching = asyncio.create_task(watcher.until(p + len(data), bench.procs))
        cpu_before = processes_cpu(bench.procs)
        first, acked = await produce_fast(
            producer, admission, [(k, v, None, []) for k, v in data], p
        )
        last = await watching  # the watcher reads while the records are produced
        out: dict[str, Any] = {
            "published": len(data),
            "elapsed_s": round(last - first, 4),
            "produce_s": round(acked - first, 4),
            "envelopes_per_second": round(len(data) / (last - first), 1),
        }
        # Until quiet: after the drain the default worker's projector and read side still work
        # through the backlog the validator just decided. Their CPU up to then is the pass's
        # cost; the latency phase then offers a steady rate to a steady worker (a figure taken
        # during the catch-up measured the catch-up).
        out["settle_s"], cpu_quiet = await until_quiet(bench.procs)
        if cpu_quiet is not None:
            out["cpu_us_per_envelope"] = round((cpu_quiet - cpu_before) / len(data) * 1e6, 1)
        out |= await measure_latency(producer, admission, watcher, p + len(data), opts, bench.procs)
        out |= {
            "outcomes": len(watcher.seen) - p - opts.latency_records,
            "log_records": watcher.by_topic[log_topic],
            "dead_letters": watcher.by_topic.get(dead, 0),
            "duplicates": watcher.duplicates,
        }
        return out
    finally:
        await producer.stop()
        await watcher.stop()


async def projector_pass(
    bench: PassSetup, broker: Broker, opts: Options, source: list[Any]
) -> dict[str, Any]:
    """The projector alone: the log records a validator pass wrote, produced to a fresh log
    (same partitions, keys and headers); done when the projector group's committed offset is
    at each partition's end. The probe runs' events go first, one per partition."""
    bootstrap, p, log_topic = broker.bootstrap, opts.partitions, bench.topics["log"]
    for n in range(opts.workers):
        env = worker_env(bootstrap, bench.settings, bench.tmp, "projector", n)
        argv = profiled(["-m", "app.shell.cli", "worker"], "projector")
        bench.procs.spawn(argv, env, f"worker{n}")
    group = f"{bench.settings.app_id}-projector"

    def row(r: Any) -> tuple[bytes, bytes, int, list[Any]]:
        return (r.key, r.value, r.partition, list(r.headers or ()))

    probes = [row(r) for r in source if (r.key or b"").startswith(b"probe-run-")]
    rest = [row(r) for r in source if not (r.key or b"").startswith(b"probe-run-")]
    ends = [0] * p
    for r in source:
        ends[r.partition] += 1
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **PRODUCER_CONFIG)
    await producer.start()
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await _ready(bench, bootstrap, [group], opts.workers)
        await produce_fast(producer, log_topic, probes, p)
        probed = {r[2] for r in probes}

        async def probes_done() -> bool:
            got = await group_committed(admin, group)
            return all(got.get(q, 0) >= 1 for q in probed)

        await wait_until("the projector's probes", probes_done, bench.procs)
        first, acked = await produce_fast(producer, log_topic, rest, p)
        got: dict[int, int] = {}

        async def all_done() -> bool:
            nonlocal got
            got = await group_committed(admin, group)
            return all(got.get(q, 0) >= ends[q] for q in range(p) if ends[q])

        await wait_until("the projector's commits", all_done, bench.procs)
        last = time.perf_counter()
        return {
            "published": len(rest),
            "elapsed_s": round(last - first, 4),
            "produce_s": round(acked - first, 4),
            "envelopes_per_second": round(len(rest) / (last - first), 1),
            "outcomes": sum(got.values()) - len(probes),
            "duplicates": 0,
        }
    finally:
        await admin.close()
        await producer.stop()


async def raw_pass(bench: PassSetup, broker: Broker, opts: Options) -> dict[str, Any]:
    """The raw ceiling: produce to the admission topic, consume it back, no transactions."""
    admission = bench.topics["admission"]
    watcher = OutcomeWatcher(broker.bootstrap, [admission], opts.partitions, "read_uncommitted")
    await watcher.start()
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, **PRODUCER_CONFIG)
    await producer.start()
    try:
        await watcher.consumer.getmany(timeout_ms=200)  # the first fetch before the clock
        data = bench_records(opts.records, opts.runs, prefix="rbench-")
        watching = asyncio.create_task(watcher.until(len(data), None))
        first, acked = await produce_fast(
            producer, admission, [(k, v, None, []) for k, v in data], opts.partitions
        )
        last = await watching
        out: dict[str, Any] = {
            "published": len(data),
            "elapsed_s": round(last - first, 4),
            "produce_s": round(acked - first, 4),
            "envelopes_per_second": round(len(data) / (last - first), 1),
        }
        out |= await measure_latency(producer, admission, watcher, len(data), opts, None)
        return out | {
            "outcomes": len(watcher.seen) - opts.latency_records,
            "duplicates": watcher.duplicates,
        }
    finally:
        await producer.stop()
        await watcher.stop()
