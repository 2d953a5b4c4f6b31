"""``a2ui-stream bench sse [--json] [--subscribers N] [--events N] [--rate R] [--components N]``:
issue 6's acceptance benchmark. N concurrent SSE subscribers of one run on one worker: the delay
from log append to delivery (p50/p99), and delta vs full bytes on the wire over the same events.

Shell module. One broker (the harness) and one ``a2ui-stream worker`` with the validator role
only, on a v1 host (A2UI_STREAM_FLOOR=1: RFC 0114 deltas apply to v1 payloads). In each phase a
fresh run gets a full v1 surface of ``--components`` components; the subscribers connect with
``Last-Event-ID`` at that event (so they are live), half of them with ``?a2uiDelta=1``; then
``--events`` single-leaf updates (one text changed) are offered at ``--rate`` per second. Each
subscriber notes, per SSE event id, its receipt time and the bytes of the frame (the SSE body,
not HTTP chunk framing). Delay = receipt minus the log record's Kafka timestamp, set by the
validator's producer at append (one clock: the same machine). The subscribers run in this
process, each a socket read as its bytes arrive (``SseReader``: the receipt is stamped when
the event loop hands the socket's bytes over, not when a reading task gets to run; until
2026-12-07 each was an aiohttp client stream, whose own reading was in the figure); the CPU
shares of the worker and of this process during the updates, and each event's first-to-last
delivery spread, say where it went.

The BASELINE, over the same updates in the same run: a plain aiokafka consumer tailing the log
topic (read_committed, as the worker's run index does), its receipt minus the same timestamp:
the floor that SSE adds its hop to. A first phase with one (full) subscriber shows what fan-out
costs. Printed, never asserted.

The subscribers, the log tail and the published surfaces are in ``bench_sse_clients``; this
module runs the phases and the command.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from app.core.http.wire_ids import project_run_id
from app.devtools.bench_output import emit, process_cpu_seconds
from app.devtools.bench_pipeline import produce, profiled, worker_env
from app.devtools.bench_sse_clients import (
    LogTail,
    SseReader,
    Subscriber,
    admission_records,
    bytes_per_subscriber,
    delays_ms,
    percentiles,
    spreads_ms,
    surfaces,
)
from app.shell.cli.broker import start_broker
from app.shell.settings import load_settings
from app.shell.worker.topics_admin import desired_for, ensure_topics

__all__ = ["Subscriber", "delays_ms", "register", "spreads_ms", "surfaces", "table"]


TOKEN = "bench-" + uuid.uuid4().hex


@dataclass
class _Bench:
    base: str
    session: aiohttp.ClientSession
    bootstrap: str
    admission: str
    tail: LogTail
    worker: subprocess.Popen[bytes]
    log_path: Path

    async def get(self, path: str) -> tuple[int, bytes]:
        """(status, body); status 0 when the worker does not answer (yet)."""
        headers = {"Authorization": f"Bearer {TOKEN}"}
        try:
            async with self.session.get(self.base + path, headers=headers) as resp:
                return resp.status, await resp.read()
        except aiohttp.ClientError:
            return 0, b""

    async def until(self, what: str, check: Callable[[], Any], timeout: float) -> Any:
        """Poll ``check`` (sync or async) until it returns a true value, the worker exits or
        ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.worker.poll() is not None:
                raise RuntimeError(f"the worker exited; see {self.log_path}")
            value = check()
            if value := (await value if inspect.isawaitable(value) else value):
                return value
            await asyncio.sleep(0.1)
        raise RuntimeError(f"timed out waiting for {what}; see {self.log_path}")

    async def streams_gauge(self) -> int:
        _, body = await self.get("/metrics")
        line = next(x for x in body.decode().splitlines() if x.startswith("a2ui_http_sse_streams"))
        return int(float(line.split()[1]))


async def _listen(
    bench: _Bench, url: str, sub: Subscriber, target: tuple[int, int], gate: asyncio.Semaphore
) -> None:
    """One subscriber: connects (``gate``: in batches, the server's listen backlog is finite)
    and reads until its last event (``SseReader``)."""
    parts = urlsplit(url)
    request = (
        f"GET {parts.path}{'?' + parts.query if parts.query else ''} HTTP/1.1\r\n"
        f"Host: {parts.netloc}\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Accept: text/event-stream\r\nLast-Event-ID: {target[0]}\r\n\r\n"
    ).encode()
    loop = asyncio.get_running_loop()
    reader = SseReader(sub, request, target[1])
    async with gate:
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        transport, _ = await loop.create_connection(lambda: reader, host, port)
        await reader.answered
    try:
        await reader.done
    finally:
        transport.close()


async def _phase(
    bench: _Bench, count: int, payloads: list[dict[str, Any]], rate: float
) -> dict[str, Any]:
    """One run: a full surface, ``count`` subscribers from just after it, the updates."""
    run_id = f"bench-sse-{count}-{uuid.uuid4().hex[:8]}"
    records = admission_records(run_id, payloads)
    await produce(bench.bootstrap, bench.admission, records[:1])

    async def indexed() -> int | None:
        status, body = await bench.get(f"/v1/runs/{project_run_id(run_id)}")
        return int(orjson.loads(body)["lastSequence"]) + 1 if status == 200 else None

    first = await bench.until("the first surface in the run index", indexed, 60) - 1
    target = (first, first + len(records) - 1)  # (Last-Event-ID, the last update's sequence)
    url = f"{bench.base}/v1/runs/{project_run_id(run_id)}/events"
    subs, tasks = _subscribe(bench, url, count, target)
    before = await bench.streams_gauge()
    pairs = list(zip(subs, tasks, strict=True))
    await bench.until("connections", lambda: all(s.status or t.done() for s, t in pairs), 120)
    gauge = [await bench.streams_gauge()]
    sampling = asyncio.create_task(_sample(bench, gauge))
    cpu = (time.monotonic(), _cpu_seconds(bench.worker.pid), time.process_time())
    await produce(bench.bootstrap, bench.admission, records[1:], rate=rate)

    await bench.until("the log", lambda: len(bench.tail.of(run_id)) >= len(records) - 1, 120)
    _, pending = await asyncio.wait(tasks, timeout=60)
    for task in [*pending, sampling]:
        task.cancel()
    await asyncio.gather(*tasks, sampling, return_exceptions=True)
    wall, worker_cpu = time.monotonic() - cpu[0], _cpu_seconds(bench.worker.pid) - cpu[1]
    seen = {q: v for q, v in bench.tail.of(run_id).items() if q > first}
    shares = (wall, worker_cpu, cpu[2])
    return _phase_figures(count, subs, seen, (before, max(gauge)), shares)


def _subscribe(
    bench: _Bench, url: str, count: int, target: tuple[int, int]
) -> tuple[list[Subscriber], list[asyncio.Task[None]]]:
    """``count`` subscribers (every other one delta, beyond the first), each listening."""
    subs = [Subscriber(delta=count > 1 and i % 2 == 1) for i in range(count)]
    gate = asyncio.Semaphore(50)
    query = {True: "?a2uiDelta=1", False: ""}
    tasks = [
        asyncio.create_task(_listen(bench, url + query[s.delta], s, target, gate)) for s in subs
    ]
    return subs, tasks


def _phase_figures(
    count: int,
    subs: list[Subscriber],
    seen: dict[int, tuple[float, int]],
    gauges: tuple[int, int],
    shares: tuple[float, float, float],
) -> dict[str, Any]:
    """A phase's figures: delays against the baseline, bytes, spreads, the streams gauge
    (before, peak) and the CPU shares (wall, the worker's CPU, this process's at the start)."""
    wall, worker_cpu, own_cpu_start = shares
    stamps = {q: stamp for q, (_, stamp) in seen.items()}
    seqs = sorted(stamps)
    deltas, fulls = [s for s in subs if s.delta], [s for s in subs if not s.delta]
    return {
        "subscribers": count,
        "events": len(seqs),
        **percentiles("sse", delays_ms(subs, stamps)),
        **percentiles("delta", delays_ms(deltas, stamps)),
        **percentiles("full", delays_ms(fulls, stamps)),
        **percentiles("baseline", [at * 1000 - stamp for at, stamp in seen.values()]),
        "bytes_per_subscriber_delta": bytes_per_subscriber(deltas, seqs),
        "bytes_per_subscriber_full": bytes_per_subscriber(fulls, seqs),
        **percentiles("spread", spreads_ms(subs, seqs)),
        "sse_streams_gauge_before": gauges[0],
        "sse_streams_gauge_peak": gauges[1],
        "cpu_share_worker": worker_cpu / wall,
        "cpu_share_subscribers": (time.process_time() - own_cpu_start) / wall,
        "subscribers_refused": sum(1 for s in subs if s.status != 200),
        "subscribers_missing_events": sum(1 for s in subs if not set(seqs) <= s.received.keys()),
    }


def _cpu_seconds(pid: int) -> float:
    """The worker's CPU seconds so far (NaN once it is gone)."""
    used = process_cpu_seconds(pid)
    return float("nan") if used is None else used


async def _sample(bench: _Bench, gauge: list[int]) -> None:
    while True:
        await asyncio.sleep(0.5)
        gauge.append(await bench.streams_gauge())


async def _phases(bench: _Bench, plan: tuple[int, list[dict[str, Any]], float]) -> dict[str, Any]:
    """Tail the log, wait for the worker's run index, run the 1-subscriber then the N phase."""
    subscribers, payloads, rate = plan
    started, stop = asyncio.Event(), asyncio.Event()
    tailing = asyncio.create_task(bench.tail.run(started, stop))
    try:
        await asyncio.wait_for(started.wait(), 60)

        async def ready() -> bool:  # any run path answers 404 once the index has read the log
            return (await bench.get("/runs/bench-probe"))[0] == 404

        await bench.until("the worker's run index", ready, 120)
        single = await _phase(bench, 1, payloads, rate)
        fan = await _phase(bench, subscribers, payloads, rate)
    finally:
        stop.set()
        await tailing
    full, delta = fan["bytes_per_subscriber_full"], fan["bytes_per_subscriber_delta"]
    return {
        **fan,
        "bytes_ratio_delta_to_full": delta / full if full else None,
        **{f"single_{k}": v for k, v in single.items() if k.startswith(("sse_ms", "baseline_"))},
    }


def _start_worker(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    """The ``a2ui-stream worker`` under test (validator role), its output in ``log_path``."""
    with open(log_path, "wb") as log_file:
        return subprocess.Popen(
            profiled(["-m", "app.shell.cli", "worker"], "sse-worker"),
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )


def _stop_worker(worker: subprocess.Popen[bytes]) -> None:
    worker.terminate()
    try:
        worker.wait(timeout=60)
    except subprocess.TimeoutExpired:
        worker.kill()


async def measure(subscribers: int, events: int, rate: float, components: int) -> dict[str, Any]:
    token = uuid.uuid4().hex[:8]
    settings = replace(load_settings(), topic_prefix=f"benchsse{token}.", app_id=f"sse-{token}")
    specs = {s.id: s for s in desired_for(settings)}
    plan = (subscribers, surfaces(components, events), rate)
    load = os.getloadavg()[0]
    broker = start_broker(log=lambda m: print(m, file=sys.stderr))
    try:
        await ensure_topics(broker.bootstrap, list(specs.values()))
        with tempfile.TemporaryDirectory(prefix="a2ui-bench-sse-") as tmp:
            env = {
                **worker_env(broker, settings, Path(tmp)),
                "A2UI_STREAM_FLOOR": "1",  # a v1 host: RFC 0114 deltas apply to v1 payloads
                "A2UI_STREAM_HTTP_TOKENS": TOKEN,
            }
            log_path = Path(tmp) / "worker.log"
            worker = _start_worker(env, log_path)
            try:
                connector = aiohttp.TCPConnector(limit=0)
                timeout = aiohttp.ClientTimeout(total=None, sock_connect=30)
                async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
                    base = f"http://127.0.0.1:{env['A2UI_STREAM_WEB_PORT']}"
                    tail = LogTail(broker.bootstrap, specs["log"].name)
                    admission = specs["admission"].name
                    bench = _Bench(
                        base, session, broker.bootstrap, admission, tail, worker, log_path
                    )
                    figures = await _phases(bench, plan)
            finally:
                _stop_worker(worker)
    finally:
        broker.stop()
    return {
        "benchmark": "sse",
        "machine": f"{platform.machine()} {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "broker": broker.description,
        "load_average_1m_before": load,  # the machine may be shared: timings are noisy
        "components": components,
        "rate_per_second": rate,
        **figures,
    }


def _ms(r: dict[str, Any], name: str) -> str:
    p50, p99 = r[f"{name}_ms_p50"], r[f"{name}_ms_p99"]
    return "n/a" if p50 is None else f"{p50:.1f} / {p99:.1f} ms"


def table(r: dict[str, Any]) -> str:
    half, before = r["subscribers"] // 2, r["sse_streams_gauge_before"]
    cpu = f"{r['cpu_share_worker']:.0%} + {r['cpu_share_subscribers']:.0%}"
    rows = [
        (f"SSE delay p50/p99, {r['subscribers']} subscribers", _ms(r, "sse"), "all pairs"),
        (f"  with ?a2uiDelta=1 ({half})", _ms(r, "delta"), ""),
        (f"  full events ({r['subscribers'] - half})", _ms(r, "full"), ""),
        ("aiokafka log tail p50/p99", _ms(r, "baseline"), "baseline: same updates, same run"),
        ("first->last subscriber p50/p99", _ms(r, "spread"), "per event"),
        ("SSE delay p50/p99, 1 subscriber", _ms(r, "single_sse"), "separate phase, before"),
        ("  aiokafka log tail p50/p99", _ms(r, "single_baseline"), "its baseline"),
        ("bytes/subscriber, delta", f"{r['bytes_per_subscriber_delta']:,.0f}", "SSE body"),
        ("bytes/subscriber, full", f"{r['bytes_per_subscriber_full']:,.0f}", "baseline"),
        ("delta / full bytes", f"{100 * (r['bytes_ratio_delta_to_full'] or 0):.1f} %", ""),
        ("a2ui_http_sse_streams peak", str(r["sse_streams_gauge_peak"]), f"before: {before}"),
        ("CPU during the updates", cpu, "worker + this process (the subscribers), of one core"),
        ("subscribers refused", f"{r['subscribers_refused']}", ""),
        ("subscribers missing events", f"{r['subscribers_missing_events']}", ""),
    ]
    width = max(len(a) for a, _, _ in rows)
    head = (
        f"bench sse: {r['events']} single-leaf updates of a {r['components']}-component v1 "
        f"surface at {r['rate_per_second']:g}/s, one worker (validator role, floor 1), "
        f"{r['broker']}, {r['machine']} (load {r['load_average_1m_before']:.1f} at start); "
        "delay = SSE receipt - log append (Kafka timestamp)"
    )
    return "\n".join([head] + [f"  {a:<{width}}  {b:>20}  {c}" for a, b, c in rows])


def run(args: argparse.Namespace) -> int:
    if args.subscribers < 2 or args.events < 1 or args.rate <= 0 or args.components < 3:
        usage = "--subscribers >= 2, --events >= 1, --rate > 0 and --components >= 3"
        print(f"a2ui-stream bench sse: needs {usage}", file=sys.stderr)
        return 2
    result = asyncio.run(measure(args.subscribers, args.events, args.rate, args.components))
    return emit(result, args.json, table)


def register(bench_subparsers: Any) -> None:
    parser = bench_subparsers.add_parser(
        "sse",
        help="N SSE subscribers: append->delivery p50/p99 vs an aiokafka tail; delta vs full bytes",
        description=(
            "N concurrent SSE subscribers of one run on one worker: the delay from log append "
            "to delivery (p50, p99) against an aiokafka tail of the log, and the bytes of "
            "RFC 0114 delta frames against full frames over the same events."
        ),
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--subscribers", type=int, default=500, help="SSE clients (default 500)")
    parser.add_argument("--events", type=int, default=100, help="updates (default 100)")
    parser.add_argument("--rate", type=float, default=10.0, help="updates/s (default 10)")
    parser.add_argument("--components", type=int, default=100, help="surface size (default 100)")
    parser.set_defaults(func=run)
