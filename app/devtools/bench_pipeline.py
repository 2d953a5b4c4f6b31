"""``a2ui-stream bench pipeline``: envelopes per second END TO END through real ``a2ui-stream
worker`` processes, each figure beside its ceilings measured interleaved with it on the same
broker, in the same run, on the same topic layout and partition count.

Shell module. One PASS: fresh topics (``desired_for``, a prefix of its own), the processes
started and ready (their consumer group stable with every member, and one probe per
partition answered), then the bench's producer sends N records (each the RFC 0209 positive
example on its own surface, over ``--runs`` runs) while the processes run. The figure is N
over the time from the first admission send to the last committed outcome: the moment the
bench's ``read_committed`` consumer of the log and the dead letters has seen an outcome for
every record (live: the producer runs beside the worker, nothing waits as a backlog).
Kinds of pass:

- ``pipeline ROLES``: ``--workers`` worker processes with ``A2UI_STREAM_ROLES=ROLES``;
  ``validator,projector`` is what ``a2ui-stream worker`` runs by default. ``projector``
  alone: its input is the log, so the bench produces the log records a validator pass of the
  same run wrote (same partitions, keys, headers) and the outcome is the projector group's
  committed offset reaching each partition's end;
- ``passthrough`` (CEILING a): ``--workers`` processes that consume the admission topic in a
  group and, per partition, produce each record to the log in a transaction (one
  transactional producer per partition, batches sent closed, ``send_offsets_to_transaction``
  once per commit interval as the validator does, commit; batches gathered as the validator
  gathers them), with no decision: the validator's transaction pattern at no decision cost;
- ``raw`` (CEILING b): the same records produced without transactions to the admission topic
  and consumed back (``read_uncommitted``) by the bench itself.

``--rounds`` rounds, each one pass of every kind, the order rotated each round; ratios are
taken within a round (one pass against the ceiling measured minutes, not a warm-up, apart).
Pipeline and pass-through passes then wait until their processes are quiet (the timed
records' backlog done everywhere, the projector's and read side's too) and offer
``--latency-records`` at a steady ``--rate``, timing each record from its send to its committed
outcome (one clock, the bench's).

Printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
)
from aiokafka.partitioner import DefaultPartitioner

from app.devtools.bench_admission import positive_record
from app.devtools.bench_output import (
    code_version,
    delete_topics,
    emit,
    load_average,
    load_text,
    pct,
)
from app.shell.cli.broker import Broker, free_port, start_broker
from app.shell.settings import Settings, load_settings
from app.shell.wire import SOURCE_HEADER
from app.shell.worker.kafka_io import group_consumer, read_topic
from app.shell.worker.topics_admin import desired_for, ensure_topics
from app.shell.worker.validator_config import ValidatorConfig

__all__ = [
    "Options",
    "measure",
    "passthrough",
    "produce",
    "register",
    "table",
    "worker_env",
]

TARGET_PER_SECOND = 10_000
TARGET_VALIDATOR_PER_SECOND = 15_000
TARGET_RATIO = 0.70
DEFAULT_ROLES = "validator,projector"
PASSTHROUGH, RAW = "passthrough", "raw"
READY_TIMEOUT = 180.0
MAX_BATCH = ValidatorConfig.max_batch
_PRODUCER = {"acks": "all", "linger_ms": 5, "max_batch_size": 256 * 1024}


@dataclass(frozen=True)
class Options:
    records: int = 20000
    runs: int = 50
    partitions: int = 6
    rate: float = 1000.0
    rounds: int = 3
    workers: int = 1
    roles: tuple[str, ...] = (DEFAULT_ROLES,)
    latency_records: int = 2000


def _say(message: str) -> None:
    print(f"bench pipeline: {message}", file=sys.stderr, flush=True)


# -- records ------------------------------------------------------------------------------------


def _record(i: int, run: str, prefix: str) -> tuple[bytes, bytes]:
    rec = positive_record()
    sid = f"{prefix}brief-{i}"
    payload = rec["envelope"]["payload"]
    payload["surfaceId"] = sid
    for message in payload["messages"]:
        next(iter(v for k, v in message.items() if k != "version"))["surfaceId"] = sid
    rec["runId"] = run
    rec["envelope"]["correlationId"] = f"{prefix}{i}"
    rec["envelope"]["envelopeId"] = f"{prefix}env-{i}"
    return run.encode(), orjson.dumps(rec)


def _records(n: int, runs: int, prefix: str = "bench-") -> list[tuple[bytes, bytes]]:
    return [_record(i, f"{prefix}run-{i % runs:03d}", prefix) for i in range(n)]


def _probes(partitions: int) -> list[tuple[bytes, bytes, int | None, list[Any]]]:
    """One record per partition, each of a run whose key the producer's partitioner puts
    there (the validator dead-letters a record on a partition its key does not map to)."""
    partitioner = DefaultPartitioner()
    everyone = list(range(partitions))
    found: dict[int, tuple[bytes, bytes]] = {}
    n = 0
    while len(found) < partitions:
        run = f"probe-run-{n}"
        found.setdefault(partitioner(run.encode(), everyone, everyone), _record(n, run, "probe-"))
        n += 1
    return [(k, v, None, []) for k, v in found.values()]


# -- the ceiling (a): a transactional pass-through, run as its own process ----------------------


async def _pass_batch(
    producer: AIOKafkaProducer,
    tp: TopicPartition,
    records: list[Any],
    log_topic: str,
    group: str,
    offsets: bool,
) -> None:
    """One partition's batch in one transaction, as ``validator_commit.commit_partition`` does
    it (appends awaited inside the transaction, then the offsets when ``offsets``: the
    validator's only once per commit interval, then the commit)."""
    async with producer.transaction():
        futures = []
        builder = producer.create_batch()
        for r in records:
            headers = [(SOURCE_HEADER, f"{tp.partition}:{r.offset}".encode())]
            if builder.append(key=r.key, value=r.value, timestamp=None, headers=headers) is None:
                futures.append(
                    await producer.send_batch(builder, log_topic, partition=tp.partition)
                )
                builder = producer.create_batch()
                builder.append(key=r.key, value=r.value, timestamp=None, headers=headers)
        builder.close()  # as the validator does: an open batch waits out linger_ms
        futures.append(await producer.send_batch(builder, log_topic, partition=tp.partition))
        await asyncio.gather(*futures)
        if offsets:
            await producer.send_offsets_to_transaction({tp: records[-1].offset + 1}, group)


async def passthrough(  # noqa: C901 - the measured loop stays in one piece
    bootstrap: str, admission: str, log_topic: str, group: str, stopping: asyncio.Event
) -> None:
    """Admission -> log, per partition in transactions, no decision, until ``stopping``."""
    consumer = group_consumer(bootstrap, group, fast_groups=True)
    producers: dict[int, AIOKafkaProducer] = {}
    lock = asyncio.Lock()

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            async with lock:  # never while a transaction is open
                for tp in revoked:
                    producer = producers.pop(tp.partition, None)
                    if producer is not None:
                        await producer.stop()

        async def on_partitions_assigned(self, assigned: Any) -> None:
            for tp in assigned:
                if tp.partition not in producers:
                    producer = AIOKafkaProducer(
                        bootstrap_servers=bootstrap,
                        transactional_id=f"{group}-p{tp.partition}",
                        transaction_timeout_ms=30000,
                        max_request_size=9 * 1024 * 1024,
                        **_PRODUCER,
                    )
                    for attempt in range(10):  # e.g. the coordinator not yet elected
                        try:
                            await producer.start()  # fences the partition's previous owner
                            break
                        except Exception as exc:  # noqa: BLE001 - any start failure retries
                            print(f"passthrough: p{tp.partition} start: {exc!r}", flush=True)
                            await producer.stop()
                            await asyncio.sleep(0.5 * (attempt + 1))
                    else:
                        raise RuntimeError(f"passthrough: no producer for {tp}")
                    producers[tp.partition] = producer

    consumer.subscribe([admission], listener=Listener())
    await consumer.start()
    loop = asyncio.get_running_loop()
    # the worker's settings (the same environment): its batch time bound, and its commit
    # interval, at most which a partition's offset waits to join a transaction
    # (``validator_commit.offsets_due``)
    settings = load_settings()
    batch_s, interval_s = settings.batch_ms / 1000, settings.commit_interval_ms / 1000
    offsets_at: dict[int, float] = {}  # partition -> when a transaction last carried offsets
    try:
        while not stopping.is_set():
            deadline = loop.time() + batch_s
            batch: dict[TopicPartition, list[Any]] = {}
            count = 0
            while count < MAX_BATCH and (remaining := deadline - loop.time()) > 0:
                got = await consumer.getmany(
                    timeout_ms=max(1, int(remaining * 1000)), max_records=MAX_BATCH - count
                )
                if not got:
                    break
                for tp, records in got.items():
                    batch.setdefault(tp, []).extend(records)
                    count += len(records)
            async with lock:
                for tp, records in batch.items():
                    if tp.partition not in producers:  # revoked meanwhile: not ours to move
                        with contextlib.suppress(Exception):
                            consumer.seek(tp, records[0].offset)
                now = loop.time()
                due = {
                    tp.partition
                    for tp in batch
                    if now - offsets_at.get(tp.partition, float("-inf")) >= interval_s
                }
                offsets_at.update((p, now) for p in due)
                await asyncio.gather(
                    *(
                        _pass_batch(
                            producers[tp.partition],
                            tp,
                            records,
                            log_topic,
                            group,
                            tp.partition in due,
                        )
                        for tp, records in batch.items()
                        if tp.partition in producers
                    )
                )
    finally:
        await consumer.stop()
        for producer in producers.values():
            await producer.stop()


def _passthrough_main(argv: Sequence[str]) -> int:
    bootstrap, admission, log_topic, group = argv

    async def main() -> None:
        stopping = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
        await passthrough(bootstrap, admission, log_topic, group, stopping)

    asyncio.run(main())
    return 0


# -- processes, readiness, the watcher ----------------------------------------------------------


@dataclass(eq=False)
class _Procs:
    tmp: Path
    procs: list[tuple[subprocess.Popen[bytes], Path]] = field(default_factory=list)

    def spawn(self, argv: list[str], env: dict[str, str], name: str) -> None:
        log_path = self.tmp / f"{name}.log"
        with open(log_path, "ab") as log_file:
            proc = subprocess.Popen(argv, env=env, stdout=log_file, stderr=subprocess.STDOUT)
        self.procs.append((proc, log_path))

    def check(self) -> None:
        for proc, log_path in self.procs:
            if proc.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"a bench process exited ({proc.returncode}):\n{tail}")

    def tails(self) -> str:
        return "".join(
            f"\n--- {path.name}:\n{path.read_text(errors='replace')[-1500:]}"
            for _, path in self.procs
        )

    def stop(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc, _ in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()


async def _until(what: str, check: Callable[[], Any], procs: _Procs | None) -> Any:
    """Poll ``check`` (async, None/False = not yet) every 50 ms, bounded."""
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        got = await check()
        if got:
            return got
        if procs is not None:
            procs.check()
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


# A broker seconds old has no group coordinator yet (its offsets topic is still being created
# and loaded): the admin calls below raise one of these, which means "not yet", not a failure.
_NO_COORDINATOR_YET = (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
)


async def _group_stable(admin: AIOKafkaAdminClient, group: str, members: int) -> bool:
    try:
        [response] = await admin.describe_consumer_groups([group])
    except _NO_COORDINATOR_YET:
        return False
    _, _, state, _, _, found = response.groups[0]
    return state == "Stable" and len(found) == members


async def _committed(admin: AIOKafkaAdminClient, group: str) -> dict[int, int]:
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    except _NO_COORDINATOR_YET:
        return {}  # nothing committed that anyone could read yet
    return {tp.partition: meta.offset for tp, meta in offsets.items() if meta.offset >= 0}


class _Watcher:
    """The bench's own consumer of the outcomes: the time each one became visible, keyed by
    the admission record it answers (``partition:offset``)."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int, isolation: str):
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            isolation_level=isolation,
            max_partition_fetch_bytes=8 * 1024 * 1024,
        )
        self.tps = [TopicPartition(t, p) for t in topics for p in range(partitions)]
        self.seen: dict[str, float] = {}
        self.by_topic: dict[str, int] = dict.fromkeys(topics, 0)
        self.duplicates = 0
        self.own_offsets = isolation == "read_uncommitted"  # raw: the records themselves

    async def start(self) -> None:
        await self.consumer.start()
        self.consumer.assign(self.tps)
        await self.consumer.seek_to_beginning(*self.tps)

    async def stop(self) -> None:
        await self.consumer.stop()

    async def until(self, count: int, procs: _Procs | None, timeout: float = 300) -> float:
        """Read until ``count`` outcomes are seen; the time the last one was."""
        deadline = time.monotonic() + timeout
        last = time.perf_counter()
        while len(self.seen) < count:
            got = await self.consumer.getmany(timeout_ms=200, max_records=20000)
            now = time.perf_counter()
            for tp, records in got.items():
                for r in records:
                    if self.own_offsets:
                        source = f"{r.partition}:{r.offset}"
                    else:
                        raw = dict(r.headers or ()).get(SOURCE_HEADER)
                        if raw is None:
                            continue
                        source = raw.decode()
                    if source in self.seen:
                        self.duplicates += 1
                        continue
                    self.seen[source] = now
                    self.by_topic[tp.topic] += 1
                    last = now
            if procs is not None:
                procs.check()
            if time.monotonic() > deadline:
                tails = procs.tails() if procs is not None else ""
                raise RuntimeError(
                    f"{len(self.seen)} of {count} outcomes in {timeout:.0f} s{tails}"
                )
        return last


# -- producing ----------------------------------------------------------------------------------


async def _produce_fast(
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


def _cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _procs_cpu(procs: _Procs) -> float:
    """The CPU seconds (user + system) the processes of ``procs`` have used so far."""
    return sum(_cpu_seconds(proc.pid) for proc, _ in procs.procs)


async def _quiet(procs: _Procs, window: float = 1.0) -> tuple[float | None, float | None]:
    """Seconds until the processes used under ``QUIET_CORES`` over a ``window``: done with
    their backlog (None: not quiet within ``QUIET_TIMEOUT``; the figures after it say so); and
    their CPU seconds when that quiet window began (what the backlog cost them)."""
    pids = [proc.pid for proc, _ in procs.procs]
    if not pids or not Path("/proc/self/stat").exists():
        return None, None
    start = time.monotonic()
    while time.monotonic() - start < QUIET_TIMEOUT:
        before, t0 = _procs_cpu(procs), time.monotonic()
        await asyncio.sleep(window)
        procs.check()
        if (_procs_cpu(procs) - before) / (time.monotonic() - t0) < QUIET_CORES:
            return round(time.monotonic() - start, 2), before
    return None, None


async def _latency(
    producer: AIOKafkaProducer,
    admission: str,
    watcher: _Watcher,
    seen: int,
    opts: Options,
    procs: _Procs | None,
) -> dict[str, Any]:
    """``--latency-records`` offered at ``--rate``: each one's send to its outcome seen."""
    if not opts.latency_records:
        return {}
    lat = _records(opts.latency_records, opts.runs, prefix="lat-")
    watching = asyncio.create_task(watcher.until(seen + len(lat), procs))
    sent = await _produce_at(producer, admission, lat, opts.rate)
    await watching
    delays = [(watcher.seen[s] - t) * 1000 for s, t in sent.items()]
    return {
        "latency_records": len(delays),
        "latency_ms_p50": round(statistics.median(delays), 2),
        "latency_ms_p99": round(pct(delays, 0.99), 2),
        "latency_ms_max": round(max(delays), 2),
    }


# -- one pass -----------------------------------------------------------------------------------


@dataclass
class _Pass:
    kind: str
    settings: Settings
    topics: dict[str, str]
    tmp: Path
    procs: _Procs


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
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **_PRODUCER)
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


async def _ready(bench: _Pass, bootstrap: str, groups: list[str], workers: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        for group in groups:
            await _until(
                f"group {group} stable with {workers} members",
                lambda g=group: _group_stable(admin, g, workers),  # type: ignore[misc]
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


async def _live_pass(
    bench: _Pass, broker: Broker, opts: Options, roles: str | None
) -> dict[str, Any]:
    """A pipeline pass with roles including the validator, or the pass-through: probes, then
    the timed records, then the latency records."""
    bootstrap, p = broker.bootstrap, opts.partitions
    admission, log_topic, dead = (
        bench.topics["admission"],
        bench.topics["log"],
        bench.topics["deadletter"],
    )
    watch = [log_topic, dead] if roles is not None else [log_topic]
    watcher = _Watcher(bootstrap, watch, p, "read_committed")
    await watcher.start()
    app_id = bench.settings.app_id
    for n in range(opts.workers):
        if roles is not None:
            env = worker_env(bootstrap, bench.settings, bench.tmp, roles, n)
            bench.procs.spawn(profiled(["-m", "app.shell.cli", "worker"], roles), env, f"worker{n}")
        else:
            argv = profiled(["-m", "app.devtools.bench_pipeline", "passthrough"], "passthrough")
            argv += [bootstrap, admission, log_topic, f"{app_id}-passthrough"]
            bench.procs.spawn(argv, dict(os.environ), f"passthrough{n}")
    groups = [f"{app_id}-{r}" for r in roles.split(",")] if roles else [f"{app_id}-passthrough"]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **_PRODUCER)
    await producer.start()
    try:
        await _ready(bench, bootstrap, groups, opts.workers)
        await _produce_fast(producer, admission, _probes(p), p)
        await watcher.until(p, bench.procs)
        data = _records(opts.records, opts.runs, prefix="bench-")
        watching = asyncio.create_task(watcher.until(p + len(data), bench.procs))
        cpu_before = _procs_cpu(bench.procs)
        first, acked = await _produce_fast(
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
        out["settle_s"], cpu_quiet = await _quiet(bench.procs)
        if cpu_quiet is not None:
            out["cpu_us_per_envelope"] = round((cpu_quiet - cpu_before) / len(data) * 1e6, 1)
        out |= await _latency(producer, admission, watcher, p + len(data), opts, bench.procs)
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


async def _projector_pass(
    bench: _Pass, broker: Broker, opts: Options, source: list[Any]
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
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **_PRODUCER)
    await producer.start()
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await _ready(bench, bootstrap, [group], opts.workers)
        await _produce_fast(producer, log_topic, probes, p)
        probed = {r[2] for r in probes}

        async def probes_done() -> bool:
            got = await _committed(admin, group)
            return all(got.get(q, 0) >= 1 for q in probed)

        await _until("the projector's probes", probes_done, bench.procs)
        first, acked = await _produce_fast(producer, log_topic, rest, p)
        got: dict[int, int] = {}

        async def all_done() -> bool:
            nonlocal got
            got = await _committed(admin, group)
            return all(got.get(q, 0) >= ends[q] for q in range(p) if ends[q])

        await _until("the projector's commits", all_done, bench.procs)
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


async def _raw_pass(bench: _Pass, broker: Broker, opts: Options) -> dict[str, Any]:
    """The raw ceiling: produce to the admission topic, consume it back, no transactions."""
    admission = bench.topics["admission"]
    watcher = _Watcher(broker.bootstrap, [admission], opts.partitions, "read_uncommitted")
    await watcher.start()
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, **_PRODUCER)
    await producer.start()
    try:
        await watcher.consumer.getmany(timeout_ms=200)  # the first fetch before the clock
        data = _records(opts.records, opts.runs, prefix="rbench-")
        watching = asyncio.create_task(watcher.until(len(data), None))
        first, acked = await _produce_fast(
            producer, admission, [(k, v, None, []) for k, v in data], opts.partitions
        )
        last = await watching
        out: dict[str, Any] = {
            "published": len(data),
            "elapsed_s": round(last - first, 4),
            "produce_s": round(acked - first, 4),
            "envelopes_per_second": round(len(data) / (last - first), 1),
        }
        out |= await _latency(producer, admission, watcher, len(data), opts, None)
        return out | {
            "outcomes": len(watcher.seen) - opts.latency_records,
            "duplicates": watcher.duplicates,
        }
    finally:
        await producer.stop()
        await watcher.stop()


# -- the run --------------------------------------------------------------------------------------


def _kinds(opts: Options) -> list[str]:
    """Validator-carrying role sets first: a projector pass replays a validator pass's log."""
    roles = sorted(opts.roles, key=lambda r: "validator" not in r.split(","))
    return roles + [PASSTHROUGH, RAW]


def _spread(values: list[float]) -> dict[str, Any]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "per_round": values,
    }


async def measure(opts: Options, broker: Broker) -> dict[str, Any]:
    load_start = load_average()
    token = uuid.uuid4().hex[:8]
    base = load_settings()
    kinds = _kinds(opts)
    if "projector" in kinds and not any("validator" in k.split(",") for k in opts.roles):
        raise ValueError("--roles projector replays a validator pass's log: list one with it")
    passes: list[dict[str, Any]] = []
    source: list[Any] = []
    with tempfile.TemporaryDirectory(prefix="a2ui-bench-") as tmp_dir:
        for rnd in range(opts.rounds):
            order = kinds[rnd % len(kinds) :] + kinds[: rnd % len(kinds)] if rnd else kinds
            if not source:
                order = kinds
            for kind in order:
                tag = f"r{rnd}{kinds.index(kind)}"
                settings = replace(
                    base,
                    topic_prefix=f"bench{token}{tag}.",
                    app_id=f"bench-{token}-{tag}",
                    partitions=opts.partitions,
                    fast_groups=True,
                )
                specs = {s.id: s for s in desired_for(settings)}
                await ensure_topics(broker.bootstrap, list(specs.values()))
                tmp = Path(tmp_dir) / tag
                tmp.mkdir()
                bench = _Pass(
                    kind, settings, {k: s.name for k, s in specs.items()}, tmp, _Procs(tmp)
                )
                _say(f"round {rnd + 1}/{opts.rounds}: {kind}")
                try:
                    if kind == RAW:
                        got = await _raw_pass(bench, broker, opts)
                    elif kind == PASSTHROUGH:
                        got = await _live_pass(bench, broker, opts, None)
                    elif kind == "projector":
                        got = await _projector_pass(bench, broker, opts, source)
                    else:
                        got = await _live_pass(bench, broker, opts, kind)
                        if not source:
                            source = await read_topic(
                                broker.bootstrap, bench.topics["log"], isolation="read_committed"
                            )
                finally:
                    bench.procs.stop()
                    # Fresh topics per pass; those left behind would make every later pass
                    # run on a broker with ever more topics and partitions (measured: 1,247
                    # topics after an evening of runs, and each pass's latency worse).
                    prefixes = (settings.topic_prefix, f"{settings.app_id}-")
                    await delete_topics(broker.bootstrap, prefixes)
                _say(f"  {got['envelopes_per_second']:,.0f} envelopes/s")
                passes.append({"round": rnd + 1, "kind": kind, **got})
    figures = {
        kind: _spread([p["envelopes_per_second"] for p in passes if p["kind"] == kind])
        for kind in kinds
    }
    ratios: dict[str, dict[str, Any]] = {}
    for kind in kinds[:-2]:
        for ceiling in (PASSTHROUGH, RAW):
            per_round = []
            for rnd in range(1, opts.rounds + 1):
                by = {p["kind"]: p for p in passes if p["round"] == rnd}
                per_round.append(
                    round(by[kind]["envelopes_per_second"] / by[ceiling]["envelopes_per_second"], 3)
                )
            ratios[f"{kind} / {ceiling}"] = _spread(per_round)
    cpu = {
        kind: _spread([p["cpu_us_per_envelope"] for p in passes if p["kind"] == kind])
        for kind in kinds
        if any("cpu_us_per_envelope" in p for p in passes if p["kind"] == kind)
    }
    latency = {
        kind: {
            q: _spread([p[f"latency_ms_{q}"] for p in passes if p["kind"] == kind])
            for q in ("p50", "p99")
        }
        for kind in kinds
        if any("latency_ms_p50" in p for p in passes if p["kind"] == kind)
    }
    return {
        "benchmark": "pipeline",
        "date": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "commit": code_version(),
        "machine": (
            f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}"
        ),
        "broker": broker.description,
        "records": opts.records,
        "runs": opts.runs,
        "partitions": opts.partitions,
        "workers": opts.workers,
        "rounds": opts.rounds,
        "roles": list(opts.roles),
        "latency_rate_per_second": opts.rate,
        "load_average": {"start": load_start, "end": load_average()},
        "target_envelopes_per_second": TARGET_PER_SECOND,
        "target_validator_per_second": TARGET_VALIDATOR_PER_SECOND,
        "target_ratio_to_passthrough": TARGET_RATIO,
        "passes": passes,
        "envelopes_per_second": figures,
        "ratios": ratios,
        "cpu_us_per_envelope": cpu,
        "latency_ms": latency,
    }


def _label(kind: str) -> str:
    return {
        PASSTHROUGH: "ceiling a: transactional pass-through",
        RAW: "ceiling b: raw produce+consume",
    }.get(kind, f"pipeline, roles {kind}")


def _s(spread: dict[str, Any], fmt: str = ",.0f") -> str:
    return (
        f"{spread['median']:{fmt}} ({spread['min']:{fmt}}-{spread['max']:{fmt}})"
        if len(spread["per_round"]) > 1
        else f"{spread['median']:{fmt}}"
    )


def _settled(r: dict[str, Any], kind: str) -> str:
    """How long the processes of ``kind`` took to be quiet after each timed pass."""
    got = [p.get("settle_s", "n/a") for p in r["passes"] if p["kind"] == kind]
    said = ["not quiet" if s is None else "n/a" if s == "n/a" else f"{s} s" for s in got]
    return ", ".join(said) or "n/a"


def table(r: dict[str, Any]) -> str:
    rounds = r["rounds"]
    many = " median (min-max of rounds)" if rounds > 1 else ""
    lines = [
        f"bench pipeline: {r['records']:,} RFC 0209 envelopes per pass over {r['runs']} runs, "
        f"{r['partitions']} partitions, {r['workers']} worker process(es), {rounds} round(s) "
        "interleaved",
        f"  {r['broker']}; {r['machine']}; commit {r['commit']}; {r['date']}",
        f"  {load_text(r['load_average'])}",
        "",
        f"end to end (first admission send -> last committed outcome), envelopes/s{many}",
    ]
    rows = [(_label(k), _s(s)) for k, s in r["envelopes_per_second"].items()]
    width = max(len(a) for a, _ in rows)
    lines += [f"  {a:<{width}}  {b:>26}" for a, b in rows]
    lines += ["", f"pipeline / ceiling, the same round's passes{many}"]
    rows = [(k, _s(s, ".2f")) for k, s in r["ratios"].items()]
    width = max([len(a) for a, _ in rows] + [10])
    lines += [f"  {a:<{width}}  {b:>18}" for a, b in rows]
    lines.append(
        f"  targets: default roles >= {r['target_envelopes_per_second']:,}/s and >= "
        f"{r['target_ratio_to_passthrough']:.0%} of the pass-through; validator alone >= "
        f"{r['target_validator_per_second']:,}/s"
    )
    if r.get("cpu_us_per_envelope"):
        lines += [
            "",
            "CPU of the worker (or pass-through) processes per envelope, from the first send "
            f"until quiet, µs{many}",
        ]
        rows = [(_label(k), _s(s, ",.1f")) for k, s in r["cpu_us_per_envelope"].items()]
        width = max(len(a) for a, _ in rows)
        lines += [f"  {a:<{width}}  {b:>26}" for a, b in rows]
    if r["latency_ms"]:
        lines += [
            "",
            f"send -> committed outcome at {r['latency_rate_per_second']:,.0f} envelopes/s "
            f"offered, ms{many}",
        ]
        rows4 = [
            (_label(k), _s(q["p50"], ".1f"), _s(q["p99"], ".1f"), _settled(r, k))
            for k, q in r["latency_ms"].items()
        ]
        width = max(len(a) for a, _, _, _ in rows4)
        lines.append(f"  {'':<{width}}  {'p50':>20}  {'p99':>20}  {'quiet after the drain':>22}")
        lines += [f"  {a:<{width}}  {b:>20}  {c:>20}  {d:>22}" for a, b, c, d in rows4]
        lines.append(
            "  (each offered once the processes are quiet: under "
            f"{QUIET_CORES} of a core, after the timed pass's backlog)"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.records < 100:
        print("a2ui-stream bench pipeline: --records must be at least 100", file=sys.stderr)
        return 2
    for roles in args.roles:
        names = set(roles.split(","))
        if not names or names - {"validator", "projector"}:
            print(f"a2ui-stream bench pipeline: --roles {roles!r}: validator and/or projector")
            return 2
    if "projector" in args.roles and not any("validator" in r for r in args.roles):
        print(
            "a2ui-stream bench pipeline: --roles projector replays the log a validator pass "
            "wrote: list a role set with the validator too",
            file=sys.stderr,
        )
        return 2
    opts = Options(
        records=args.records,
        runs=args.runs,
        partitions=args.partitions,
        rate=args.rate,
        rounds=args.rounds,
        workers=args.workers,
        roles=tuple(dict.fromkeys(args.roles)),
        latency_records=args.latency_records,
    )

    async def main() -> dict[str, Any]:
        # SIGTERM cancels the bench, so its finally blocks stop the processes it started
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        broker = start_broker(log=_say)
        try:
            return await measure(opts, broker)
        finally:
            broker.stop()

    try:
        result = asyncio.run(main())
    except asyncio.CancelledError:
        _say("stopped (SIGTERM); the processes it started are stopped")
        return 143
    return emit(result, args.json, table)


EPILOG = """\
what each figure means:
  envelopes/s            records published in a pass / seconds from the bench's first
                         admission send to the moment its read_committed consumer saw the last
                         outcome (log record or dead letter). The producer runs beside the
                         worker (live); start-up and readiness are before the clock.
  pipeline, roles R      --workers `a2ui-stream worker` processes with A2UI_STREAM_ROLES=R;
                         validator,projector is the default worker. projector alone replays
                         the log a validator pass wrote and ends when the projector group's
                         committed offsets reach the log's end.
  ceiling a              the same records through --workers processes that move each admission
                         record to the log in the validator's transaction pattern (per-partition
                         transactional producer, the offsets once per commit interval, commit),
                         with no decision: what transactions alone allow here.
  ceiling b              the same records produced without transactions and consumed back.
  pipeline / ceiling     a pass over the ceiling's pass of the same round (interleaved rounds,
                         fresh topics of the same layout and partition count each pass).
  send -> committed      per record offered at --rate: its send to its outcome visible to the
                         bench's read_committed consumer (one clock). Offered once the
                         processes are quiet after the timed pass (under 0.15 of a core:
                         the projector and read side done with its backlog); the table
                         says how long that took.
  CPU per envelope       the user + system CPU seconds of the worker (or pass-through)
                         processes from just before the first timed send until they are
                         quiet after the drain (the projector's and read side's catch-up
                         included), over the records published: the cost, where envelopes/s
                         is also the machine's contention. Set A2UI_STREAM_PROFILE_DIR to a
                         directory to run them under the CPU-time sampler
                         (app/devtools/cpu_profile.py) and see where it goes.
  load average           /proc/loadavg at the start and the end: the machine may be shared.
"""


def register(bench_subparsers: Any) -> None:
    parser = bench_subparsers.add_parser(
        "pipeline",
        help="end-to-end envelopes/s through workers vs transactional and raw ceilings",
        description=(
            "Envelopes per second end to end through real worker processes, each pass beside\n"
            "a transactional pass-through and a raw produce+consume measured in the same round\n"
            "on the same broker and topic layout (the harness picks the broker: KAFKA_BOOTSTRAP,\n"
            "else one it starts). Printed, never asserted."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--records", type=int, default=20000, help="envelopes per pass (default 20000)"
    )
    parser.add_argument("--runs", type=int, default=50, help="runs they spread over (default 50)")
    parser.add_argument("--partitions", type=int, default=6, help="partitions (default 6)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="interleaved rounds of every pass (default 3)"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="worker (and pass-through) processes (default 1)"
    )
    parser.add_argument(
        "--roles",
        nargs="+",
        default=[DEFAULT_ROLES],
        metavar="ROLES",
        help=(
            "role sets to bench, each a pipeline pass per round (default validator,projector; "
            "e.g. --roles validator,projector validator projector)"
        ),
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=1000.0,
        help="envelopes/s offered in the latency phase (default 1000)",
    )
    parser.add_argument(
        "--latency-records",
        type=int,
        default=2000,
        help="records offered at --rate after each timed pass (default 2000; 0: none)",
    )
    parser.set_defaults(func=run)


if __name__ == "__main__":
    if sys.argv[1:2] == ["passthrough"]:
        sys.exit(_passthrough_main(sys.argv[2:]))
    sys.exit(
        "usage: python -m app.devtools.bench_pipeline passthrough BOOTSTRAP ADMISSION LOG GROUP"
    )
