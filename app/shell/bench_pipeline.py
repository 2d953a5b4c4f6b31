"""``a2ui-stream bench pipeline [--json] [--records N]``: end-to-end envelopes per second and
admission-to-log latency through a real broker with one worker, against the raw aiokafka
ceiling measured on the same broker in the same run.

Shell module. The pipeline figure: N admission records, each the RFC 0209 positive example on
its own surface (so every one is admitted), published to the admission topic while one
``a2ui-stream worker`` process runs; throughput is N over the time from the first admission
record's timestamp to the last log record's timestamp; latency is, per record, the log record's
timestamp minus its admission record's (both Kafka CreateTime stamps on this machine's clock).
The CEILING: the same N records produced with aiokafka to a plain topic and consumed back by
one aiokafka consumer, first send to last receive. Printed, never asserted.
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
from app.shell.broker import Broker, _free_port, start_broker
from app.shell.kafka_io import read_topic
from app.shell.settings import Settings, load_settings
from app.shell.topics_admin import desired_for, ensure_topics
from app.shell.validator_loop import SOURCE_HEADER

__all__ = ["register"]

TARGET_PER_SECOND = 10_000


def _records(n: int, runs: int) -> list[tuple[bytes, bytes]]:
    base = positive_record()
    out = []
    for i in range(n):
        run = f"bench-run-{i % runs:03d}"
        rec = orjson.loads(orjson.dumps(base))
        sid = f"approve-brief-{i}"
        payload = rec["envelope"]["payload"]
        payload["surfaceId"] = sid
        for message in payload["messages"]:
            next(iter(v for k, v in message.items() if k != "version"))["surfaceId"] = sid
        rec["runId"] = run
        rec["envelope"]["correlationId"] = f"bench-{i}"
        rec["envelope"]["envelopeId"] = f"bench-env-{i}"
        out.append((run.encode(), orjson.dumps(rec)))
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _ceiling(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> float:
    await ensure_topics(bootstrap, [TopicSpec("raw", topic, 1, 1, {})])
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                group_id=f"bench-raw-{uuid.uuid4().hex[:6]}",
                                max_partition_fetch_bytes=8 * 1024 * 1024)
    await consumer.start()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                                max_batch_size=256 * 1024)
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


async def _pipeline(
    broker: Broker, settings: Settings, records: list[tuple[bytes, bytes]], tmp: Path
) -> dict[str, Any]:
    specs = {s.id: s for s in desired_for(settings)}
    await ensure_topics(broker.bootstrap, list(specs.values()))
    env = {
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
    }
    log_file = open(tmp / "worker.log", "wb")  # noqa: SIM115
    worker = subprocess.Popen([sys.executable, "-m", "app.shell.cli", "worker"], env=env,
                              stdout=log_file, stderr=subprocess.STDOUT)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5,
                                max_batch_size=256 * 1024)
    await producer.start()
    try:
        # Warm-up: one record through, so the worker has joined and restored before timing.
        warm_key, warm_value = _records(1, 1)[0]
        warm = orjson.loads(warm_value)
        warm["envelope"]["correlationId"] = "bench-warmup"
        warm["envelope"]["payload"]["surfaceId"] = "warm"
        for m in warm["envelope"]["payload"]["messages"]:
            next(iter(v for k, v in m.items() if k != "version"))["surfaceId"] = "warm"
        await producer.send_and_wait(specs["admission"].name, orjson.dumps(warm), key=warm_key)
        deadline = time.monotonic() + 120
        while not await read_topic(broker.bootstrap, specs["log"].name):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the worker did not start; see " + str(tmp / "worker.log"))
            await asyncio.sleep(0.2)
        futures = [await producer.send(specs["admission"].name, v, key=k) for k, v in records]
        await asyncio.gather(*futures)
        admitted_target = len(records) + 1
        while True:
            log_records = await read_topic(broker.bootstrap, specs["log"].name,
                                           isolation="read_committed", timeout=120)
            if len(log_records) >= admitted_target:
                break
            if worker.poll() is not None or time.monotonic() > deadline + 600:
                raise RuntimeError("the pipeline did not finish; see " + str(tmp / "worker.log"))
            await asyncio.sleep(0.5)
        admission = await read_topic(broker.bootstrap, specs["admission"].name, timeout=120)
    finally:
        await producer.stop()
        worker.terminate()
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
    sent_at = {(r.partition, r.offset): r.timestamp for r in admission}
    latencies = []
    log_times = []
    for record in log_records:
        source = dict(record.headers or ()).get(SOURCE_HEADER)
        if source is None:
            continue
        partition, _, offset = source.decode().partition(":")
        sent = sent_at.get((int(partition), int(offset)))
        if sent is None:
            continue
        latencies.append(float(record.timestamp - sent))
        log_times.append(record.timestamp)
    timed = [r.timestamp for r in admission if b"bench-warmup" not in r.value]
    first_sent = min(timed)
    last_logged = max(log_times)
    return {
        "records": len(records),
        "envelopes_per_second": len(records) / max(0.001, (last_logged - first_sent) / 1000),
        "latency_ms_p50": statistics.median(latencies),
        "latency_ms_p99": _pct(latencies, 0.99),
        "transactional": "transactional" in (tmp / "worker.log").read_text(errors="replace")
        or broker.features.transactions,
    }


async def measure(records: int, runs: int, partitions: int) -> dict[str, Any]:
    token = uuid.uuid4().hex[:8]
    settings = replace(load_settings(), topic_prefix=f"bench{token}.", app_id=f"bench-{token}",
                       partitions=partitions, fast_groups=True)
    data = _records(records, runs)
    broker = start_broker(log=lambda m: print(m, file=sys.stderr))
    try:
        with tempfile.TemporaryDirectory(prefix="a2ui-bench-") as tmp:
            pipeline = await _pipeline(broker, settings, data, Path(tmp))
        ceiling = await _ceiling(broker.bootstrap, f"bench{token}.raw", data)
    finally:
        broker.stop()
    return {
        "benchmark": "pipeline",
        "machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "broker": broker.description,
        "partitions": partitions,
        "runs": runs,
        **pipeline,
        "target_envelopes_per_second": TARGET_PER_SECOND,
        "ceiling_raw_aiokafka_per_second": ceiling,
        "ratio_pipeline_to_ceiling": pipeline["envelopes_per_second"] / ceiling,
    }


def _table(r: dict[str, Any]) -> str:
    rows = [
        ("pipeline envelopes/s (1 worker)", f"{r['envelopes_per_second']:,.0f}",
         f"target >= {r['target_envelopes_per_second']:,}"),
        ("raw aiokafka produce->consume/s", f"{r['ceiling_raw_aiokafka_per_second']:,.0f}",
         "ceiling (same broker, same run)"),
        ("pipeline / ceiling", f"{r['ratio_pipeline_to_ceiling']:.2f}", ""),
        ("admission->log latency p50", f"{r['latency_ms_p50']:.1f} ms", ""),
        ("admission->log latency p99", f"{r['latency_ms_p99']:.1f} ms", ""),
    ]
    width = max(len(a) for a, _, _ in rows)
    head = (f"bench pipeline: {r['records']:,} RFC 0209 envelopes, {r['runs']} runs, "
            f"{r['partitions']} partitions, {r['broker']}, {r['machine']}")
    return "\n".join([head] + [f"  {a:<{width}}  {b:>14}  {c}" for a, b, c in rows])


def run(args: argparse.Namespace) -> int:
    if args.records < 100:
        print("a2ui-stream bench pipeline: --records must be at least 100", file=sys.stderr)
        return 2
    result = asyncio.run(measure(args.records, args.runs, args.partitions))
    print(orjson.dumps(result).decode() if args.json else _table(result))
    return 0


def register(bench_subparsers: Any) -> None:
    parser = bench_subparsers.add_parser(
        "pipeline",
        help="end-to-end envelopes/s and admission->log latency vs raw aiokafka",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--records", type=int, default=20000, help="envelopes (default 20000)")
    parser.add_argument("--runs", type=int, default=50, help="runs they spread over (default 50)")
    parser.add_argument("--partitions", type=int, default=6, help="partitions (default 6)")
    parser.set_defaults(func=run)
