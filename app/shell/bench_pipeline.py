"""``a2ui-stream bench pipeline [--json] [--records N]``: end-to-end envelopes per second and
admission-to-log latency through a real broker with one worker, against the raw aiokafka
ceiling measured on the same broker in the same run.

Shell module. Two phases with one ``a2ui-stream worker`` process, each record the RFC 0209
positive example on its own surface (so every one is admitted):

- throughput: N records wait on the admission topic as a backlog; the worker starts and drains
  it; envelopes/s = N over the span of the log records' timestamps (start-up and state restore
  are not counted);
- latency: with the worker live, records are offered at a steady ``--rate``; each one's delay is
  its log record's timestamp minus its admission record's (Kafka CreateTime, one clock).

The CEILING: the same N records produced with aiokafka to a plain topic and consumed back by
one aiokafka consumer, first send to last receive, on the same broker in the same run.
Printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from app.core.topic_plan import TopicSpec
from app.shell.bench_admission import positive_record
from app.shell.bench_output import emit
from app.shell.broker import Broker, _free_port, start_broker
from app.shell.kafka_io import read_topic
from app.shell.settings import Settings, load_settings
from app.shell.topics_admin import desired_for, ensure_topics
from app.shell.validator_loop import SOURCE_HEADER

__all__ = ["register"]

TARGET_PER_SECOND = 10_000


def _records(n: int, runs: int, prefix: str = "bench-") -> list[tuple[bytes, bytes]]:
    base = positive_record()
    out = []
    for i in range(n):
        run = f"bench-run-{i % runs:03d}"
        rec = orjson.loads(orjson.dumps(base))
        sid = f"{prefix}brief-{i}"
        payload = rec["envelope"]["payload"]
        payload["surfaceId"] = sid
        for message in payload["messages"]:
            next(iter(v for k, v in message.items() if k != "version"))["surfaceId"] = sid
        rec["runId"] = run
        rec["envelope"]["correlationId"] = f"{prefix}{i}"
        rec["envelope"]["envelopeId"] = f"{prefix}env-{i}"
        out.append((run.encode(), orjson.dumps(rec)))
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _ceiling(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> float:
    await ensure_topics(bootstrap, [TopicSpec("raw", topic, 1, 1, {})])
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        group_id=f"bench-raw-{uuid.uuid4().hex[:6]}",
        max_partition_fetch_bytes=8 * 1024 * 1024,
    )
    await consumer.start()
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_batch_size=256 * 1024
    )
    await producer.start()
    try:
        await consumer.getmany(timeout_ms=1000)  # join the group before the clock starts
        start = time.perf_counter()

        async def produce() -> None:
            futures = [await producer.send(topic, value, key=key) for key, value in records]
            await asyncio.gather(*futures)

        sending = asyncio.create_task(produce())
        got = 0
        while got < len(records):
            batch = await consumer.getmany(timeout_ms=1000, max_records=5000)
            got += sum(len(v) for v in batch.values())
        elapsed = time.perf_counter() - start
        await sending
        return len(records) / elapsed
    finally:
        await producer.stop()
        await consumer.stop()


def _worker_env(broker: Broker, settings: Settings, tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "KAFKA_BOOTSTRAP": broker.bootstrap,
        "A2UI_STREAM_TOPIC_PREFIX": settings.topic_prefix,
        "A2UI_STREAM_PARTITIONS": str(settings.partitions),
        "A2UI_STREAM_APP_ID": settings.app_id,
        "A2UI_STREAM_FAST_GROUPS": "1",
        "A2UI_STREAM_WORKER_ID": "bench",
        "A2UI_STREAM_WEB_PORT": str(_free_port()),
        "A2UI_STREAM_DATA_DIR": str(tmp / "data"),
        "A2UI_STREAM_LOG_LEVEL": "warning",
        # The stage measured is admission -> log: the projector (log -> subscribers) can run
        # in other processes (A2UI_STREAM_ROLES); here it would share the validator's CPU.
        "A2UI_STREAM_ROLES": "validator",
    }


async def _produce(
    bootstrap: str, topic: str, records: list[tuple[bytes, bytes]], rate: float | None = None
) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_batch_size=256 * 1024
    )
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


async def _wait_log(
    bootstrap: str,
    topic: str,
    count: int,
    worker: subprocess.Popen[bytes],
    timeout: float,
    log_path: Path,
) -> list[Any]:
    deadline = time.monotonic() + timeout
    while True:
        records = await read_topic(bootstrap, topic, isolation="read_committed", timeout=120)
        if len(records) >= count:
            return records
        if worker.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the pipeline did not finish; see {log_path}")
        await asyncio.sleep(0.5)


async def _pipeline(
    broker: Broker,
    settings: Settings,
    records: list[tuple[bytes, bytes]],
    latency_records: list[tuple[bytes, bytes]],
    rate: float,
    tmp: Path,
) -> dict[str, Any]:
    """Phase 1 (throughput): the N records wait on the admission topic as a backlog; one
    worker starts and drains it; rate = N over the span of the log records' timestamps, so
    worker start-up and state restore are not counted. Phase 2 (latency): with the worker
    live and idle, records are published at a steady ``rate`` per second and each one's
    admission->log delay is measured."""
    specs = {s.id: s for s in desired_for(settings)}
    await ensure_topics(broker.bootstrap, list(specs.values()))
    admission, log_topic = specs["admission"].name, specs["log"].name
    await _produce(broker.bootstrap, admission, records)
    log_path = tmp / "worker.log"
    log_file = open(log_path, "wb")  # noqa: SIM115
    worker = subprocess.Popen(
        [sys.executable, "-m", "app.shell.cli", "worker"],
        env=_worker_env(broker, settings, tmp),
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    try:
        drained = await _wait_log(broker.bootstrap, log_topic, len(records), worker, 900, log_path)
        stamps = [r.timestamp for r in drained]
        throughput = (len(stamps) - 1) / max(0.001, (max(stamps) - min(stamps)) / 1000)
        await _produce(broker.bootstrap, admission, latency_records, rate=rate)
        logged = await _wait_log(
            broker.bootstrap, log_topic, len(records) + len(latency_records), worker, 300, log_path
        )
        admitted = await read_topic(broker.bootstrap, admission, timeout=120)
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
    sent_at = {(r.partition, r.offset): r.timestamp for r in admitted}
    latencies = []
    for record in logged:
        source = dict(record.headers or ()).get(SOURCE_HEADER)
        if source is None:
            continue
        partition, _, offset = source.decode().partition(":")
        sent = sent_at.get((int(partition), int(offset)))
        if sent is not None and b"bench-lat-" in record.value[:400]:
            latencies.append(float(record.timestamp - sent))
    return {
        "records": len(records),
        "envelopes_per_second": throughput,
        "latency_records": len(latencies),
        "latency_rate_per_second": rate,
        "latency_ms_p50": statistics.median(latencies),
        "latency_ms_p99": _pct(latencies, 0.99),
    }


async def measure(records: int, runs: int, partitions: int, rate: float) -> dict[str, Any]:
    token = uuid.uuid4().hex[:8]
    settings = replace(
        load_settings(),
        topic_prefix=f"bench{token}.",
        app_id=f"bench-{token}",
        partitions=partitions,
        fast_groups=True,
    )
    data = _records(records, runs)
    latency_data = _records(min(records, 2000), runs, prefix="bench-lat-")
    broker = start_broker(log=lambda m: print(m, file=sys.stderr))
    try:
        with tempfile.TemporaryDirectory(prefix="a2ui-bench-") as tmp:
            pipeline = await _pipeline(broker, settings, data, latency_data, rate, Path(tmp))
        ceiling = await _ceiling(broker.bootstrap, f"bench{token}.raw", data)
    finally:
        broker.stop()
    return {
        "benchmark": "pipeline",
        "machine": (
            f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}"
        ),
        "broker": broker.description,
        "partitions": partitions,
        "worker_roles": "validator",
        "runs": runs,
        **pipeline,
        "target_envelopes_per_second": TARGET_PER_SECOND,
        "ceiling_raw_aiokafka_per_second": ceiling,
        "ratio_pipeline_to_ceiling": pipeline["envelopes_per_second"] / ceiling,
    }


def _table(r: dict[str, Any]) -> str:
    rows = [
        (
            "pipeline envelopes/s (1 worker)",
            f"{r['envelopes_per_second']:,.0f}",
            f"target >= {r['target_envelopes_per_second']:,}",
        ),
        (
            "raw aiokafka produce->consume/s",
            f"{r['ceiling_raw_aiokafka_per_second']:,.0f}",
            "ceiling (same broker, same run)",
        ),
        ("pipeline / ceiling", f"{r['ratio_pipeline_to_ceiling']:.2f}", ""),
        (
            "admission->log latency p50",
            f"{r['latency_ms_p50']:.1f} ms",
            f"at {r['latency_rate_per_second']:,.0f} envelopes/s offered",
        ),
        ("admission->log latency p99", f"{r['latency_ms_p99']:.1f} ms", ""),
    ]
    width = max(len(a) for a, _, _ in rows)
    head = (
        f"bench pipeline: {r['records']:,} RFC 0209 envelopes, {r['runs']} runs, "
        f"{r['partitions']} partitions, one worker process with A2UI_STREAM_ROLES=validator, "
        f"{r['broker']}, {r['machine']}"
    )
    return "\n".join([head] + [f"  {a:<{width}}  {b:>14}  {c}" for a, b, c in rows])


def run(args: argparse.Namespace) -> int:
    if args.records < 100:
        print("a2ui-stream bench pipeline: --records must be at least 100", file=sys.stderr)
        return 2
    result = asyncio.run(measure(args.records, args.runs, args.partitions, args.rate))
    return emit(result, args.json, _table)


def register(bench_subparsers: Any) -> None:
    parser = bench_subparsers.add_parser(
        "pipeline",
        help="end-to-end envelopes/s and admission->log latency vs raw aiokafka",
        description=(
            "End-to-end envelopes per second and admission-to-log latency through a real "
            "broker with one worker, against the raw aiokafka ceiling measured on the same "
            "broker in the same run (the harness picks the broker: KAFKA_BOOTSTRAP, else one "
            "it starts)."
        ),
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--records", type=int, default=20000, help="envelopes (default 20000)")
    parser.add_argument("--runs", type=int, default=50, help="runs they spread over (default 50)")
    parser.add_argument("--partitions", type=int, default=6, help="partitions (default 6)")
    parser.add_argument(
        "--rate",
        type=float,
        default=1000.0,
        help="envelopes/s offered in the latency phase (default 1000)",
    )
    parser.set_defaults(func=run)
