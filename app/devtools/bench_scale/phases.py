"""The scale bench's grow phase (publish, sample RSS at each checkpoint) and its restarts, timed
until the worker is ready.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from app.core.http.wire_ids import project_run_id
from app.devtools.bench_scale.deployment import Bench
from app.devtools.bench_scale.designs import STOP_SECONDS, SUB_CHUNK, WAIT_SECONDS
from app.devtools.bench_scale.mix import MixRun, checkpoints
from app.devtools.bench_scale.workers import Worker, machine_low_on_memory, say
from app.shell.errors import OperatorError

__all__ = ["grow", "ready_after", "restart", "rss_sampler", "until_quiet", "until_web"]


async def rss_sampler(bench: Bench, hard_kb: int, label: list[str]) -> None:
    """Peak RSS per worker; a progress line every 10 s; kill a worker past the hard ceiling
    (so the bench cannot take the machine down)."""
    last = time.monotonic()
    while True:
        await asyncio.sleep(0.5)
        for worker in bench.workers:
            rss = worker.rss_kb()
            worker.rss_peak_kb = max(worker.rss_peak_kb, rss)
            low = rss > hard_kb // 4 and machine_low_on_memory(0.05)
            if rss > hard_kb or low:
                worker.killed_for = (
                    f"killed by the bench at {rss // 1024:,} MB RSS, past 1.5x --max-rss-mb "
                    "or with under 5% of the machine's memory left; give a smaller "
                    "--envelopes or --max-rss-mb"
                )
                say(f"worker {worker.name}: {worker.killed_for}")
                worker.kill()
        if time.monotonic() - last >= 10:
            last = time.monotonic()
            sizes = ", ".join(f"{w.name} {w.rss_kb() / 1024:,.0f} MB" for w in bench.workers)
            say(
                f"{label[0]}: {bench.envelopes:,} envelopes published "
                f"({bench.published:,} records), RSS {sizes}"
            )


async def _point(bench: Bench, worker: Worker, last: dict[str, float], t0: float) -> dict[str, Any]:
    await bench.sync()
    await asyncio.sleep(1.0)
    snap = await bench.snapshot(worker)
    cpu, envelopes = worker.cpu_seconds(), bench.envelopes
    per = (cpu - last["cpu"]) / max(1, envelopes - last["envelopes"]) * 1e6
    last.update(cpu=cpu, envelopes=envelopes)
    point = {
        **bench.expected(),
        **{k: v for k, v in snap.items() if k not in ("worker", "partitions")},
        "cpu_us_per_envelope": per,
        "seconds": time.monotonic() - t0,
    }
    say(
        f"{envelopes:,} envelopes recorded: RSS {point['rss_mb']:,.0f} MB, "
        f"{point['http_runs']:,} runs in the read side's memory, {per:,.0f} µs CPU per envelope"
    )
    return point


async def grow(
    bench: Bench, worker: Worker, target: int, minutes: float, max_rss_mb: int
) -> dict[str, Any]:
    """Phase 1: publish up to ``target`` envelopes within the budgets, sampling at checkpoints."""
    t0 = time.monotonic()
    deadline = t0 + minutes * 60
    last = {"cpu": worker.cpu_seconds(), "envelopes": 0.0}
    points: list[dict[str, Any]] = []
    stopped = f"reached --envelopes {target:,}"
    for mark in checkpoints(target):
        while bench.envelopes < mark and stopped.startswith("reached"):
            if time.monotonic() > deadline:
                stopped = f"time budget (--minutes {minutes:g})"
            elif worker.rss_kb() > max_rss_mb * 1024:
                stopped = f"memory budget (worker RSS above --max-rss-mb {max_rss_mb:,})"
            elif machine_low_on_memory(0.15):
                stopped = "memory budget (the machine's MemAvailable below 15%)"
            else:
                await bench.flow()
                await bench.settle_due()
                await bench.publish(min(SUB_CHUNK, mark - bench.envelopes))
        if bench.envelopes and (not points or points[-1]["envelopes"] < bench.envelopes):
            points.append(await _point(bench, worker, last, t0))
        if not stopped.startswith("reached"):
            break
    seconds = points[-1]["seconds"] if points else 0.0
    return {
        "envelopes_published": bench.envelopes,
        "stopped": stopped,
        "publish_seconds": seconds,
        "envelopes_per_second": bench.envelopes / seconds if seconds else 0.0,
        "curve": points,
    }


def _probe_runs(bench: Bench) -> dict[int, MixRun]:
    """Per partition, a run that takes envelopes (open, not deleted, with a surface)."""
    found: dict[int, MixRun] = {}
    for run in [*bench.mix.active, *reversed(bench.mix.runs)]:
        if run.created and run.fate != "cancel" and not run.deleted:
            found.setdefault(run.partition, run)
    return found


async def _until_admitted(
    bench: Bench, worker: Worker, runs: dict[int, MixRun], t0: float
) -> float:
    """Seconds from ``t0`` until an envelope POSTed to a run of every partition got its 201."""

    async def admit(run: MixRun) -> None:
        while True:
            worker.check()
            body = orjson.dumps(bench.mix.envelope(run))
            url = f"{worker.base}/runs/{project_run_id(run.run_id)}/envelopes"
            status, answer = await bench.request("POST", url, body)
            if status in (201, 504):  # 504: published, decided later (then posted again)
                bench.published += 1
                run.events += 1
                bench.probes[run.partition] = (run, run.events - 1)
            if status == 201:
                return
            bench.refused(f"admission on partition {run.partition}", status, answer)
            if status not in (0, 503, 504):
                text = answer[:300].decode(errors="replace")
                raise OperatorError(f"bench scale: an admission answered {status}: {text}")
            await asyncio.sleep(0.05)

    try:
        await asyncio.wait_for(asyncio.gather(*(admit(r) for r in runs.values())), WAIT_SECONDS)
    except TimeoutError:
        raise OperatorError(
            f"bench scale: worker {worker.name} did not admit an envelope on every partition "
            f"within {WAIT_SECONDS:.0f} s; its log is {worker.log_path}"
        ) from None
    return time.monotonic() - t0


async def _until_read(
    bench: Bench, worker: Worker, known: list[tuple[MixRun, int]], t0: float
) -> float:
    """Seconds from ``t0`` until a poll of a known run of every partition answered 200 with
    the run's last recorded sequence (known before the restart)."""
    for run, sequence in known:
        await bench.until(
            f"worker {worker.name} serving run {run.run_id}",
            lambda r=run, s=sequence: bench.read_through(worker, r, s),
        )
    return time.monotonic() - t0


async def until_web(bench: Bench, worker: Worker, t0: float) -> float:
    async def up() -> bool:
        return (await bench.request("GET", worker.base + "/health"))[0] == 200

    await bench.until(f"worker {worker.name}'s web server", up)
    return time.monotonic() - t0


async def _until_owned(bench: Bench, t0: float) -> float:
    """Seconds from ``t0`` until the validators' gauges show every partition restored (and
    split between the workers). Not a readiness signal: it says which part took the time,
    since the HTTP API answers an admission only once the read side has read the log."""
    await bench.until("every partition restored by a validator", bench.ownership)
    return time.monotonic() - t0


async def until_quiet(bench: Bench, t0: float, cores: float = 0.15) -> float:
    """Seconds from ``t0`` until every worker uses under ``cores`` of a core over 2 s (the
    work left after ready, e.g. the projector's restore, is done)."""

    async def quiet() -> bool | None:
        before = [w.cpu_seconds() for w in bench.workers]
        await asyncio.sleep(2.0)
        used = [w.cpu_seconds() - b for w, b in zip(bench.workers, before, strict=True)]
        return True if max(used) / 2.0 < cores else None

    await bench.until("the workers going quiet", quiet)
    return time.monotonic() - t0 - 2.0


async def ready_after(bench: Bench, worker: Worker, t0: float) -> dict[str, Any]:
    """Time each readiness signal of ``worker`` from ``t0``; ready is the later of the read
    and the admission signal (docstring, phase 2); then until the workers are quiet.
    ``refusals``: what the probes were refused with meanwhile (``Bench.refused``)."""
    runs = _probe_runs(bench)
    known = [(run, run.events - 1) for run in runs.values()]
    bench.note_refusals(t0)
    try:
        web, reads, admitted, owned = await asyncio.gather(
            until_web(bench, worker, t0),
            _until_read(bench, worker, known, t0),
            _until_admitted(bench, worker, runs, t0),
            _until_owned(bench, t0),
        )
    finally:
        refusals = bench.note_refusals(None)
    return {
        "refusals": refusals,
        "web_s": web,
        "reads_s": reads,
        "admission_s": admitted,
        "validator_restored_s": owned,
        "ready_s": max(reads, admitted),
        "quiet_s": await until_quiet(bench, t0),
    }


async def restart(bench: Bench, worker: Worker, *, graceful: bool = False) -> dict[str, Any]:
    """SIGKILL ``worker`` (or, ``graceful``, SIGTERM and wait for it to exit, as a deploy
    does), start it again, and time from the signal until it is ready (phases 2 and 6)."""
    await bench.sync()
    await bench.rebase()
    before = worker.rss_kb()
    worker.rss_peak_kb = 0
    t0 = time.monotonic()
    exited = True
    if graceful:
        exited = worker.stop(timeout=STOP_SECONDS)
    else:
        worker.kill()
    stopped = time.monotonic() - t0
    worker.start()
    times = await ready_after(bench, worker, t0)
    await bench.sync()
    await asyncio.sleep(1.0)
    how = "SIGTERM" if graceful else "SIGKILL"
    say(f"worker {worker.name} restarted ({how}): ready in {times['ready_s']:.1f} s")
    return {
        **times,
        "signal": how,
        "stopped_s": stopped,
        "exited_by_itself": exited,
        "rss_mb_before": before / 1024,
        "rss_mb_after": worker.rss_kb() / 1024,
        "rss_mb_peak_during": worker.rss_peak_kb / 1024,
    }
