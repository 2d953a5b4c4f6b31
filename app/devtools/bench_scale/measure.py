"""Every phase for each design, in order, on fresh topics: the scale bench's figures as one
JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import shutil
import statistics
import tempfile
import time
import uuid
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import aiohttp
from aiokafka import AIOKafkaProducer

from app.devtools.bench_output import code_version, delete_topics
from app.devtools.bench_scale.deployment import Bench
from app.devtools.bench_scale.designs import DEFAULT_ENVELOPES, DESIGNS, TARGETS, Design
from app.devtools.bench_scale.mix import Mix, MixConfig
from app.devtools.bench_scale.phases import grow, restart, rss_sampler, until_web
from app.devtools.bench_scale.windows import cpu_phase, reads, shares_of_one, two_workers
from app.devtools.bench_scale.workers import Worker, rss_slope_kb, say, spread_of
from app.shell.cli.broker import Broker, free_port, start_broker
from app.shell.settings import load_settings
from app.shell.worker.topics_admin import desired_for, ensure_topics

__all__ = ["measure", "measure_design"]


async def measure_design(
    bench: Bench, design: Design, tmp: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """Every phase for one design (one column)."""
    envs = _worker_envs(bench, tmp, design)
    first = Worker("a", envs["a"], tmp / "worker-a.log")
    second = Worker("b", envs["b"], tmp / "worker-b.log")
    bench.workers = [first]
    label = [f"[{design.name}] grow"]
    sampler = asyncio.create_task(rss_sampler(bench, int(args.max_rss_mb * 1.5 * 1024), label))
    try:
        phases = await _phases(bench, design, args, (first, second), label)
    finally:
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
        for worker in (first, second):  # measured already: a graceful stop takes minutes
            worker.kill()
    return _figures(bench, design, phases)


async def _phases(
    bench: Bench,
    design: Design,
    args: argparse.Namespace,
    workers: tuple[Worker, Worker],
    label: list[str],
) -> dict[str, Any]:
    """The phases in order, each one's raw result by name (``_figures`` makes the column)."""
    first, second = workers
    first.start()
    await until_web(bench, first, time.monotonic())
    await bench.until("the validator owning every partition", bench.ownership)
    grown = await grow(bench, first, args.envelopes, args.minutes, args.max_rss_mb)
    say(f"[{design.name}] grow stopped: {grown['stopped']}; {grown['envelopes_published']:,}")
    restarts = []
    for n in range(args.restarts + 1):  # the SIGKILL restarts, then one with SIGTERM
        label[0] = f"[{design.name}] restart {n + 1}/{args.restarts + 1}"
        restarts.append(await restart(bench, first, graceful=n == args.restarts))
    window = max(1000, min(50_000, bench.envelopes // 10))
    one_cpu, one_paced = await cpu_phase(bench, window, args, label, "one worker")
    alone = await bench.snapshot(first)
    label[0] = f"[{design.name}] two workers"
    joined = await two_workers(bench, second)
    snaps = [await bench.snapshot(w) for w in bench.workers]
    split_state = bench.expected()
    owned = {s["worker"]: s["partitions"] for s in snaps}
    two_cpu, two_paced = await cpu_phase(bench, window, args, label, "two workers")
    label[0] = f"[{design.name}] reads"
    read = await reads(bench, owned, args.reads, args.read_rounds)
    again = []
    for n in range(args.restarts):  # SIGKILL, of the worker that joined
        label[0] = f"[{design.name}] restart one of two {n + 1}/{args.restarts}"
        again.append(await restart(bench, second))
    final = {**bench.expected(), "workers": [await bench.snapshot(w) for w in bench.workers]}
    return {
        "grown": grown,
        "restarts": restarts,
        "one_worker": {**alone, "cpu": one_cpu, "cpu_paced": one_paced},
        "two_workers": {
            "join": joined,
            "workers": [{**s, "share_of_one": shares_of_one(alone, s)} for s in snaps],
            "expected": split_state,
            "cpu": two_cpu,
            "cpu_paced": two_paced,
            "restart_one": again[-1],
            "restarts_one": again,
        },
        "reads": read,
        "final": final,
    }


def _figures(bench: Bench, design: Design, phases: dict[str, Any]) -> dict[str, Any]:
    """One design's column: the phases' results, with the RSS curve's slope and marks."""
    grown = phases["grown"]
    restarts = phases["restarts"]
    slope = rss_slope_kb(grown["curve"])
    curve = grown["curve"]
    at_50k = next((p for p in curve if p["envelopes"] == 50_000), None)
    at_1m = next((p for p in curve if p["envelopes"] == 1_000_000), None)
    return {
        "design": design.summary,
        **grown,
        "record_bytes_mean": bench.mix.bytes / max(1, bench.mix.records),
        "rss_kb_per_envelope": slope,
        "rss_mb_at_1m": at_1m["rss_mb"] if at_1m else None,
        "rss_mb_at_1m_extrapolated": (
            curve[-1]["rss_mb"] + slope * (1_000_000 - curve[-1]["envelopes"]) / 1024
            if slope is not None and not at_1m
            else None
        ),
        "rss_ratio_last_to_50k": curve[-1]["rss_mb"] / at_50k["rss_mb"] if at_50k else None,
        "restarts": restarts,
        "restart_ready_s": spread_of([r["ready_s"] for r in restarts if r["signal"] == "SIGKILL"]),
        "one_worker": phases["one_worker"],
        "two_workers": phases["two_workers"],
        "reads": phases["reads"],
        "final": phases["final"],
        # 404s answered for a run whose every record was decided (retried): a read-side bug
        "missing_reads": bench.missing_reads,
    }


def _worker_envs(bench: Bench, tmp: Path, design: Design) -> dict[str, dict[str, str]]:
    settings = bench.settings
    key = uuid.uuid4().hex + uuid.uuid4().hex  # one gateway key for the deployment
    envs = {}
    for name in ("a", "b"):
        envs[name] = {
            **os.environ,
            "KAFKA_BOOTSTRAP": bench.bootstrap,
            "A2UI_STREAM_TOPIC_PREFIX": settings.topic_prefix,
            "A2UI_STREAM_PARTITIONS": str(settings.partitions),
            "A2UI_STREAM_APP_ID": settings.app_id,
            "A2UI_STREAM_FAST_GROUPS": "1",
            "A2UI_STREAM_WORKER_ID": f"scale-{name}",
            "A2UI_STREAM_WEB_PORT": str(free_port()),
            "A2UI_STREAM_DATA_DIR": str(tmp / f"data-{name}"),
            # info: the rebalances and restores a restart goes through (--keep-logs)
            "A2UI_STREAM_LOG_LEVEL": "info",
            "A2UI_STREAM_ROLES": "validator,projector",
            "A2UI_STREAM_HTTP_AUTH": "on",
            "A2UI_STREAM_HTTP_TOKENS": bench.token,
            "A2UI_STREAM_GATEWAY_KEY": key,
            "A2UI_STREAM_HTTP_WAIT_SECONDS": "60",
            **design.env,
        }
    return envs


async def measure(args: argparse.Namespace, broker: Broker | None = None) -> dict[str, Any]:
    """Every phase for each design in ``args.designs``, on ``broker`` (else the harness's)."""
    load_before = os.getloadavg()[0]
    own_broker = broker is None
    broker = start_broker(log=say) if broker is None else broker
    designs: dict[str, Any] = {}
    mix_config = MixConfig().for_size(args.envelopes)
    try:
        for name in args.designs:
            designs[name] = await _one_design(broker, DESIGNS[name], mix_config, args)
    finally:
        if own_broker:
            broker.stop()
    return {
        "benchmark": "scale",
        "code": code_version(),
        "machine": f"{platform.machine()} {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "broker": broker.description,
        "partitions": args.partitions,
        "load_average_1m_before": load_before,
        "load_average_1m_after": os.getloadavg()[0],
        "envelopes_requested": args.envelopes,
        "envelopes_default": args.envelopes == DEFAULT_ENVELOPES,
        "minutes": args.minutes,
        "max_rss_mb": args.max_rss_mb,
        "restarts_per_design": args.restarts,
        "cpu_windows_per_design": args.cpu_windows,
        "cpu_rate": args.cpu_rate,
        "mix": asdict(mix_config),
        "record_bytes_mean": statistics.mean(d["record_bytes_mean"] for d in designs.values()),
        "targets": TARGETS,
        "columns": {name: DESIGNS[name].summary for name in designs},
        "designs": designs,
    }


async def _one_design(
    broker: Broker, design: Design, mix_config: MixConfig, args: argparse.Namespace
) -> dict[str, Any]:
    run_token = uuid.uuid4().hex[:8]
    settings = replace(
        load_settings(),
        topic_prefix=f"scale{run_token}.",
        app_id=f"scale-{run_token}",
        partitions=args.partitions,
        fast_groups=True,
    )
    await ensure_topics(broker.bootstrap, list(desired_for(settings)))
    tmp = Path(tempfile.mkdtemp(prefix="a2ui-bench-scale-"))
    token = "scale-" + uuid.uuid4().hex
    producer = AIOKafkaProducer(
        bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5, max_batch_size=256 * 1024
    )
    await producer.start()
    try:
        timeout = aiohttp.ClientTimeout(total=120, sock_connect=5)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            mix = Mix(mix_config, settings.partitions, run_token)
            bench = Bench(settings, broker.bootstrap, session, producer, mix, token)
            figures = await measure_design(bench, design, tmp, args)
    except BaseException:
        say(f"the worker logs are kept in {tmp}")
        raise
    finally:
        await producer.stop()
        await delete_topics(broker.bootstrap, (settings.topic_prefix, settings.app_id))
    if args.keep_logs is not None:
        kept = Path(args.keep_logs) / design.name
        kept.mkdir(parents=True, exist_ok=True)
        for log_file in tmp.glob("worker-*.log"):
            shutil.copy2(log_file, kept / log_file.name)
        say(f"[{design.name}] the worker logs are kept in {kept}")
    shutil.rmtree(tmp, ignore_errors=True)
    return figures
