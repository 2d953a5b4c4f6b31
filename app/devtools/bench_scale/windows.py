"""The scale bench's CPU windows (one worker, then two; saturated and paced), the second
worker's join, and the reads of owned against other runs.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from app.core.http.wire_ids import project_run_id
from app.devtools.bench_output import pct
from app.devtools.bench_scale.deployment import Bench
from app.devtools.bench_scale.designs import SUB_CHUNK
from app.devtools.bench_scale.mix import MixRun
from app.devtools.bench_scale.phases import ready_after, until_quiet
from app.devtools.bench_scale.workers import Worker, say
from app.shell.errors import OperatorError

__all__ = [
    "IDLE_SECONDS",
    "READ_KINDS",
    "cpu_phase",
    "cpu_window",
    "cpu_windows",
    "reads",
    "shares_of_one",
    "two_workers",
]


# What each worker did in a CPU window, from its /metrics (the counters' increase): the
# validator's batches and partition commits (a small batch pays the same round trips as a large
# one), its run states moved to the local store and back, and the log records its read side
# tailed.
IDLE_SECONDS = 5.0
_WINDOW_COUNTERS = {
    "validator_batches": ("a2ui_validator_batches_total",),
    "validator_commits": ("a2ui_validator_commits_total",),
    "run_state_moves": (
        'a2ui_validator_run_state_moves_total{way="evicted"}',
        'a2ui_validator_run_state_moves_total{way="loaded"}',
    ),
    "read_side_records": ("a2ui_http_records_read_total",),
}


def _window_counts(metrics: dict[str, float] | None) -> dict[str, float]:
    metrics = metrics or {}
    return {k: sum(metrics.get(n, 0.0) for n in names) for k, names in _WINDOW_COUNTERS.items()}


async def cpu_window(bench: Bench, envelopes: int, rate: float = 0.0) -> dict[str, Any]:
    """CPU (all workers, utime + stime) per envelope while ``envelopes`` more are recorded,
    and each worker's share of it with what it did meanwhile (``_WINDOW_COUNTERS``); offered
    as fast as the workers decide them, or at ``rate`` envelopes/s (under saturation: on a
    machine of few cores the processes that share them slow each other down)."""
    await bench.sync()
    # Quiet first: a window right after a restart or a join would count the background
    # restores it set off as the window's (measured: an idle figure of 0.36 of a core right
    # after a restart, against 0.04-0.05 per worker later in the same run).
    await until_quiet(bench, time.monotonic())
    idle_cores = await _idle_cores(bench)
    counts0 = [_window_counts(await bench.metrics(w)) for w in bench.workers]
    cpus0, t0 = [w.cpu_seconds() for w in bench.workers], time.monotonic()
    await _offer(bench, envelopes, rate, t0)
    await bench.sync()
    wall = time.monotonic() - t0
    used = [w.cpu_seconds() - c for w, c in zip(bench.workers, cpus0, strict=True)]
    counts1 = [_window_counts(await bench.metrics(w)) for w in bench.workers]
    workers: list[dict[str, Any]] = []
    for worker, cpu, idle, before, after in zip(
        bench.workers, used, idle_cores, counts0, counts1, strict=True
    ):
        done = {k: after[k] - before[k] for k in _WINDOW_COUNTERS}
        workers.append(
            {
                "worker": worker.name,
                "cpu_s": cpu,
                "cores": cpu / wall if wall else 0.0,
                "idle_cores": idle,
                **done,
            }
        )
    cpu = sum(used)
    commits = sum(w["validator_commits"] for w in workers)
    idle_cpu = sum(idle_cores) * wall
    return {
        "envelopes": envelopes,
        "rate_offered": rate or None,
        "cpu_us_per_envelope": cpu / envelopes * 1e6,
        # the same less what the workers would have used idle over the window
        "cpu_us_per_envelope_above_idle": max(0.0, cpu - idle_cpu) / envelopes * 1e6,
        "idle_cores": sum(idle_cores),
        "seconds": wall,
        "envelopes_per_second": envelopes / wall,
        "validator_commits_per_1k_envelopes": commits / envelopes * 1000,
        "run_state_moves_per_envelope": sum(w["run_state_moves"] for w in workers) / envelopes,
        "workers": workers,
    }


async def _idle_cores(bench: Bench) -> list[float]:
    """Each worker's CPU with nothing to decide (its timers, heartbeats and tails): a cost per
    second and per worker, not per envelope, which the window's figure includes."""
    idle0, i0 = [w.cpu_seconds() for w in bench.workers], time.monotonic()
    await asyncio.sleep(IDLE_SECONDS)
    return [
        (w.cpu_seconds() - c) / (time.monotonic() - i0)
        for w, c in zip(bench.workers, idle0, strict=True)
    ]


async def _offer(bench: Bench, envelopes: int, rate: float, t0: float) -> None:
    """Publish ``envelopes`` more, as fast as they are decided or paced at ``rate``/s from
    ``t0``."""
    start, target = bench.envelopes, bench.envelopes + envelopes
    chunk = max(1, min(SUB_CHUNK, int(rate / 20))) if rate else SUB_CHUNK
    while bench.envelopes < target:
        await bench.flow()
        await bench.settle_due()
        await bench.publish(min(chunk, target - bench.envelopes))
        if rate:
            await asyncio.sleep(max(0.0, t0 + (bench.envelopes - start) / rate - time.monotonic()))


async def cpu_windows(
    bench: Bench, envelopes: int, count: int, label: list[str], who: str, rate: float = 0.0
) -> dict[str, Any]:
    """``count`` CPU windows back to back (a shared machine: one window is one sample): the
    median one (by CPU per envelope), with every window's figures beside it."""
    windows = []
    design = label[0].split("]")[0] + "]"
    for n in range(count):
        paced = f" at {rate:,.0f}/s" if rate else ""
        label[0] = f"{design} CPU window{paced} {n + 1}/{count}, {who}"
        windows.append(await cpu_window(bench, envelopes, rate))
    ranked = sorted(windows, key=lambda w: w["cpu_us_per_envelope"])
    return {
        **ranked[(len(ranked) - 1) // 2],
        "windows": len(windows),
        "windows_cpu_us_per_envelope": [w["cpu_us_per_envelope"] for w in windows],
        "windows_cpu_us_per_envelope_above_idle": [
            w["cpu_us_per_envelope_above_idle"] for w in windows
        ],
    }


async def cpu_phase(
    bench: Bench, window: int, args: argparse.Namespace, label: list[str], who: str
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A phase's CPU windows: as fast as the workers decide, then (``--cpu-rate``) offered
    at that rate, about 20 s each (None without a rate)."""
    drained = await cpu_windows(bench, window, args.cpu_windows, label, who)
    if args.cpu_rate <= 0:
        return drained, None
    paced = max(1000, min(window, int(args.cpu_rate * 20)))
    return drained, await cpu_windows(bench, paced, args.cpu_windows, label, who, args.cpu_rate)


async def two_workers(bench: Bench, second: Worker) -> dict[str, Any]:
    """Phase 4: ``second`` joins; time until the partitions are split and it serves."""
    await bench.sync()
    await bench.rebase()
    t0 = time.monotonic()
    bench.workers.append(second)
    second.start()
    times = await ready_after(bench, second, t0)
    await bench.sync()
    say(f"two workers: ready {times['ready_s']:.1f} s after the second started")
    return times


async def _timed_get(bench: Bench, url: str, accept: str | None) -> float:
    start = time.perf_counter()
    status, _ = await bench.request("GET", url, accept=accept)
    elapsed = (time.perf_counter() - start) * 1000
    if status != 200:
        raise OperatorError(f"bench scale: GET {url} answered {status} during the read phase")
    return elapsed


def _read_url(worker: Worker, run: MixRun, kind: str) -> tuple[str, str | None]:
    path = f"{worker.base}/runs/{project_run_id(run.run_id)}/events"
    if kind == "poll":  # the tail: the run's last event
        after = f"afterSequence={run.events - 2}&" if run.events > 1 else ""
        return f"{path}/poll?{after}timeout=1", None
    return path, "application/json"  # the event-log read: every event of the run


READ_KINDS = ("poll", "log")


async def reads(bench: Bench, owned: dict[str, list[int]], per: int, rounds: int) -> dict[str, Any]:
    """Phase 5: on each worker, runs of its own partitions against the other worker's,
    alternating, ``per`` of each per kind and round."""
    live = bench.live_runs()
    samples: dict[tuple[str, str], list[list[float]]] = {
        (k, loc): [[] for _ in range(rounds)] for k in READ_KINDS for loc in ("own", "other")
    }
    for i in range(rounds):
        for worker in bench.workers:
            mine = set(owned[worker.name])
            sets = {
                "own": [r for r in live if r.partition in mine][:50],
                "other": [r for r in live if r.partition not in mine][:50],
            }
            if not sets["own"] or not sets["other"]:
                continue
            for n in range(per):
                for kind in READ_KINDS:
                    for loc in ("own", "other"):
                        url, accept = _read_url(worker, sets[loc][n % len(sets[loc])], kind)
                        samples[(kind, loc)][i].append(await _timed_get(bench, url, accept))
    out: dict[str, Any] = {}
    for (kind, loc), by_round in samples.items():
        flat = [v for r in by_round for v in r]
        if flat:
            out.setdefault(kind, {})[loc] = {
                "requests": len(flat),
                "p50_ms": pct(flat, 0.5),
                "p99_ms": pct(flat, 0.99),
                "rounds": [[pct(r, 0.5), pct(r, 0.99)] for r in by_round if r],
            }
    for locs in out.values():
        if "own" in locs and "other" in locs:
            locs["other_minus_own_p99_ms"] = locs["other"]["p99_ms"] - locs["own"]["p99_ms"]
    return out


def shares_of_one(alone: dict[str, Any], snap: dict[str, Any]) -> dict[str, float | None]:
    keys = ("rss_mb", "http_runs", "validator_run_states", "projector_surfaces", "data_dir_mb")
    return {k: (snap[k] / alone[k] if alone[k] else None) for k in keys}
