"""The pipeline on a real broker, as a kit: worker processes, a corpus of admission records,
publishing (paced, and with retries that survive a broker restart), and reading back what the
pipeline wrote.

Shell module, shared by the integration tests (``tests/integration/pipeline_kit.py`` re-exports
it) and by ``a2ui-stream soak`` (``app.devtools.fault_scenarios``). It may start processes, open
sockets and read the environment. The checks ("nothing lost, nothing duplicated, per-run
order") live in ``app.devtools.fault_accounting``; ``account`` below is the short form the
pipeline tests use.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from app.core.admission import Admitted, Deduplicated, decide
from app.core.payload_rules import PayloadRules
from app.core.policy import HostPolicy
from app.core.run_state import RunState
from app.shell.cli.broker import Broker, free_port
from app.shell.schema_files import load_schema_documents
from app.shell.settings import Settings
from app.shell.worker.kafka_io import read_topic
from app.shell.worker.topics_admin import desired_for, ensure_topics

__all__ = [
    "BASIC",
    "RULES",
    "Expected",
    "Observed",
    "Published",
    "WorkerProcess",
    "account",
    "apply_topics",
    "components",
    "corpus",
    "create",
    "data",
    "delete",
    "envelope",
    "expected_outcomes",
    "image",
    "observe",
    "open_transactions",
    "publish",
    "publish_paced",
    "topic_names",
    "wait_for_outcomes",
]

BASIC = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"
RULES = PayloadRules.from_documents(load_schema_documents())


def topic_names(settings: Settings) -> dict[str, str]:
    """Topic id -> topic name for these settings (topics/topics.json)."""
    return {spec.id: spec.name for spec in desired_for(settings)}


# -- workers ----------------------------------------------------------------------------------

# mode logs this when a service of the worker crashed (the worker may keep its process alive).
_CRASH_LINE = re.compile(rb"Crashed reason=")


class WorkerProcess:
    """`a2ui-stream worker` as a child process (the same command users run).

    It remembers whether each exit was ours (``kill``/``stop``): any other exit, or a service
    crash in its log, is a crash (``crashes``)."""

    def __init__(
        self,
        broker: Broker,
        settings: Settings,
        worker_id: str,
        tmp: Path,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.broker, self.settings, self.worker_id, self.tmp = broker, settings, worker_id, tmp
        self.extra_env = dict(extra_env or {})
        self.web_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.kills = 0
        self.paused = False
        self.exits: list[int] = []  # return codes of exits we did not cause

    def env(self) -> dict[str, str]:
        s = self.settings
        return {
            **os.environ,
            "KAFKA_BOOTSTRAP": self.broker.bootstrap,
            "A2UI_STREAM_TOPIC_PREFIX": s.topic_prefix,
            "A2UI_STREAM_PARTITIONS": str(s.partitions),
            "A2UI_STREAM_APP_ID": s.app_id,
            "A2UI_STREAM_FAST_GROUPS": "1",
            "A2UI_STREAM_WORKER_ID": self.worker_id,
            "A2UI_STREAM_WEB_PORT": str(self.web_port),
            "A2UI_STREAM_DATA_DIR": str(self.tmp / f"data-{self.worker_id}"),
            "A2UI_STREAM_LOG_LEVEL": "info",
            # far below the runs in play, so every scenario moves run states out of memory and
            # back under its faults (the validator's bounded cache, issue 15)
            "A2UI_STREAM_VALIDATOR_CACHE_RUNS": os.environ.get(
                "A2UI_STREAM_VALIDATOR_CACHE_RUNS", "8"
            ),
            # one deployment: every worker of the fleet verifies the others' host commands
            "A2UI_STREAM_GATEWAY_KEY": os.environ.get("A2UI_STREAM_GATEWAY_KEY")
            or hashlib.sha256(s.app_id.encode()).hexdigest(),
            **self.extra_env,
        }

    @property
    def log_path(self) -> Path:
        return self.tmp / f"worker-{self.worker_id}.log"

    def start(self) -> None:
        self._note_exit()
        self.starts += 1
        # the child writes to its own copy of the descriptor; ours is closed once it has started
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "app.shell.cli", "worker"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env(),
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _note_exit(self) -> None:
        """An exit we did not cause is a crash; forget the process either way."""
        if self.proc is not None and self.proc.poll() is not None:
            self.exits.append(int(self.proc.returncode))
            self.proc = None

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, an open transaction is left behind."""
        self.paused = False  # SIGKILL ends a stopped process too
        self._note_exit()
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
            self.kills += 1
            self.proc = None

    def pause(self) -> None:
        """SIGSTOP: the process stands still (a GC pause, a stalled VM) with whatever it held:
        no heartbeat, no request, an open transaction stays open."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        """SIGCONT: it carries on where it stood, unaware of what the group did meanwhile."""
        if self.proc is not None and self.paused:
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def stop(self) -> None:
        self.resume()  # a stopped process would not handle SIGTERM
        self._note_exit()
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
            self.proc = None

    @property
    def crashes(self) -> int:
        """Exits we did not cause, plus service crashes the worker logged."""
        self._note_exit()
        logged = 0
        if self.log_path.exists():
            logged = len(_CRASH_LINE.findall(self.log_path.read_bytes()))
        return len(self.exits) + logged

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.web_port}/metrics"
        with urllib.request.urlopen(url, timeout=3) as response:
            return str(response.read().decode())

    def counter(self, name: str) -> int:
        """The sum of one counter's samples on /metrics (0 while the worker is not serving)."""
        try:
            text = self.metrics()
        except OSError:
            return 0
        total = 0
        for line in text.splitlines():
            if line.startswith(name) and line[len(name) : len(name) + 1] in (" ", "{"):
                total += int(float(line.rsplit(" ", 1)[1]))
        return total

    def partitions(self) -> list[int]:
        """The admission partitions this worker's validator owns and has restored (the
        partitions of its consumer-lag gauge; none while it is not serving)."""
        try:
            text = self.metrics()
        except OSError:
            return []
        return sorted(
            int(m.group(1)) for m in re.finditer(r'a2ui_consumer_lag\{[^}]*partition="(\d+)"', text)
        )

    def outcomes_counted(self) -> int:
        """Records this incarnation decided (admitted, refused or deduplicated)."""
        return sum(
            self.counter(name)
            for name in ("a2ui_admitted_total", "a2ui_refused_total", "a2ui_deduplicated_total")
        )

    async def wait_progress(self, *, beyond: int = 0, timeout: float = 120.0) -> bool:
        """Wait (bounded) until this incarnation has decided more than ``beyond`` records."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await asyncio.to_thread(self.outcomes_counted) > beyond:
                return True
            if not self.alive():
                return False
            await asyncio.sleep(0.2)
        return False

    def log_count(self, needle: bytes) -> int:
        """How often ``needle`` occurs in this worker's log (all incarnations)."""
        return self.log_path.read_bytes().count(needle) if self.log_path.exists() else 0

    def tail(self, n: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-n:] if self.log_path.exists() else ""


async def open_transactions(
    bootstrap: str, topics: Sequence[str], partitions: Sequence[int], *, timeout: float = 10.0
) -> list[tuple[str, int]]:
    """The topic-partitions among ``topics`` x ``partitions`` where a transaction is open: the
    last stable offset is below the high watermark (records written, no commit or abort marker
    yet). Asked of the broker, so it is true of a producer that stands still (SIGSTOP)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed",
        fetch_max_wait_ms=50,
    )
    await consumer.start()
    try:
        tps = [TopicPartition(t, p) for t in topics for p in partitions]
        if not tps:
            return []
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)  # read_committed: the last stable offset
        deadline = time.monotonic() + timeout
        while any(consumer.last_stable_offset(tp) is None for tp in tps):
            if time.monotonic() > deadline:
                raise TimeoutError("no fetch response told the last stable offsets")
            await consumer.getmany(timeout_ms=100)
        return [
            (tp.topic, tp.partition)
            for tp in tps
            if (consumer.last_stable_offset(tp) or 0) < (consumer.highwater(tp) or 0)
        ]
    finally:
        await consumer.stop()


async def apply_topics(broker: Broker, settings: Settings) -> None:
    await ensure_topics(broker.bootstrap, desired_for(settings))


# -- corpus -----------------------------------------------------------------------------------


def envelope(run: str, n: int, messages: list[Any], sid: str, **extra: Any) -> dict[str, Any]:
    env: dict[str, Any] = {
        "type": "ui.a2ui-surface",
        "schemaVersion": 2,
        "envelopeId": f"env-{run}-{n}",
        "correlationId": f"corr-{run}-{n}",
        "payload": {"version": "v0.9", "catalogId": BASIC, "surfaceId": sid, "messages": messages},
        "meta": {"source": "ai-generation", "ts": "2026-11-30T00:00:00Z"},
    }
    env.update(extra)
    return {"runId": run, "envelope": env}


def create(sid: str) -> dict[str, Any]:
    return {"version": "v0.9", "createSurface": {"surfaceId": sid, "catalogId": BASIC}}


def components(sid: str, text: str) -> dict[str, Any]:
    return {
        "version": "v0.9",
        "updateComponents": {
            "surfaceId": sid,
            "components": [
                {"id": "root", "component": "Column", "children": ["t"]},
                {"id": "t", "component": "Text", "text": text},
            ],
        },
    }


def data(sid: str, value: Any) -> dict[str, Any]:
    return {"version": "v0.9", "updateDataModel": {"surfaceId": sid, "path": "/v", "value": value}}


def delete(sid: str) -> dict[str, Any]:
    return {"version": "v0.9", "deleteSurface": {"surfaceId": sid}}


def image(sid: str) -> dict[str, Any]:
    return {
        "version": "v0.9",
        "updateComponents": {
            "surfaceId": sid,
            "components": [
                {"id": "hero", "component": "Image", "url": "https://evil.example/x.png"}
            ],
        },
    }


@dataclass
class Published:
    run: str
    key: bytes
    value: bytes
    correlation_id: str | None


def corpus(runs: int, per_run: int, seed: int, prefix: str = "run") -> list[Published]:  # noqa: C901 - one weighted roll per record, read top to bottom
    """A mixed stream: valid surface lifecycles, fold violations, excluded components, bad
    shapes, undecodable bytes and producer re-sends of earlier correlationIds, interleaved
    across runs."""
    rng = random.Random(seed)
    streams: list[list[Published]] = []
    for r in range(runs):
        run = f"{prefix}-{seed}-{r:03d}"
        out: list[Published] = []
        live: set[str] = set()
        for n in range(per_run):
            roll = rng.random()
            sid = f"s{rng.randrange(3)}"
            if roll < 0.05 and out:
                out.append(rng.choice(out))  # a producer retry: same bytes, same correlationId
                continue
            if roll < 0.08:
                out.append(Published(run, run.encode(), b"\xff\xfe not utf-8", None))
                continue
            if roll < 0.11:
                out.append(
                    Published(run, run.encode(), b'{"runId": "' + run.encode() + b'", ', None)
                )
                continue
            if roll < 0.15:
                rec = envelope(run, n, [image(sid)], sid)
            elif roll < 0.19:
                rec = envelope(run, n, [data(sid, n)], sid)
                del rec["envelope"]["meta"]["source"]  # shape: validation_error
            elif sid not in live:
                rec = envelope(run, n, [create(sid), components(sid, f"t{n}")], sid)
                if rng.random() < 0.2:
                    rec = envelope(run, n, [data(sid, n)], sid)  # fold: no createSurface yet
                else:
                    live.add(sid)
            elif roll < 0.25:
                rec = envelope(run, n, [delete(sid)], sid)
                live.discard(sid)
            elif roll < 0.30:
                rec = envelope(run, n, [create(sid)], sid)  # fold: createSurface while live
            else:
                rec = envelope(run, n, [data(sid, n), components(sid, f"t{n}")], sid)
            out.append(
                Published(run, run.encode(), orjson.dumps(rec), rec["envelope"]["correlationId"])
            )
        streams.append(out)
    # Interleave runs, keeping each run's own order (that order is what must be preserved).
    merged: list[Published] = []
    cursors = [0] * runs
    while any(cursors[i] < len(streams[i]) for i in range(runs)):
        i = rng.choice([i for i in range(runs) if cursors[i] < len(streams[i])])
        merged.append(streams[i][cursors[i]])
        cursors[i] += 1
    return merged


@dataclass
class Expected:
    admitted: dict[str, list[str]] = field(default_factory=dict)  # run -> correlationIds in order
    refused: int = 0
    deduplicated: int = 0


def expected_outcomes(records: list[Published], policy: HostPolicy | None = None) -> Expected:
    """The oracle: decide every record in publication order, one state per run."""
    policy = policy or HostPolicy()
    states: dict[str, RunState] = {}
    exp = Expected()
    for rec in records:
        try:
            record = orjson.loads(rec.value)
        except orjson.JSONDecodeError:
            exp.refused += 1
            continue
        outcome = decide(record, states.get(rec.run), policy, RULES, now="2026-11-30T00:00:00Z")
        if isinstance(outcome, Admitted):
            states[rec.run] = outcome.state
            exp.admitted.setdefault(rec.run, []).append(str(rec.correlation_id))
        elif isinstance(outcome, Deduplicated):
            exp.deduplicated += 1
        else:
            exp.refused += 1
    return exp


async def publish(
    bootstrap: str, topic: str, records: list[Published], *, pace: float = 0.0
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        futures = []
        for i, rec in enumerate(records):
            futures.append(await producer.send(topic, rec.value, key=rec.key))
            if pace and i % 500 == 499:
                await asyncio.sleep(pace)
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def publish_paced(
    bootstrap: str,
    topic: str,
    records: Sequence[Published],
    *,
    seconds: float,
    chunk: int = 50,
    attempts: int = 60,
) -> int:
    """Publish ``records`` spread evenly over about ``seconds``, surviving broker outages.

    An idempotent producer keeps each partition's order across its own retries. A chunk whose
    sends fail anyway (the broker was away longer than the request timeout) is re-sent by a new
    producer, in order, until it is acknowledged: a record may then be on the topic twice,
    which is exactly a producer retry. Returns the number of such re-sent records. What counts
    as published is what the admission topic holds (``fault_accounting`` reads it back)."""
    producer: AIOKafkaProducer | None = None
    resent = 0
    loop = asyncio.get_running_loop()
    start = loop.time()
    step = seconds / max(1, len(records))
    try:
        for first in range(0, len(records), chunk):
            due = start + first * step
            if due > loop.time():
                await asyncio.sleep(due - loop.time())
            part = records[first : first + chunk]
            for attempt in range(attempts):
                if producer is None:
                    producer = await _start_producer(bootstrap)
                    if producer is None:
                        await asyncio.sleep(1.0)
                        continue
                try:
                    futures = [await producer.send(topic, r.value, key=r.key) for r in part]
                    await asyncio.gather(*futures)
                    break
                except Exception:  # any send failure: re-send the chunk with a new producer
                    resent += len(part)
                    with contextlib.suppress(Exception):
                        await producer.stop()
                    producer = None
                    await asyncio.sleep(min(5.0, 0.5 * (attempt + 1)))
            else:
                raise TimeoutError(f"could not publish to {topic} after {attempts} attempts")
    finally:
        if producer is not None:
            with contextlib.suppress(Exception):
                await producer.stop()
    return resent


async def _start_producer(bootstrap: str) -> AIOKafkaProducer | None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        request_timeout_ms=60000,
        retry_backoff_ms=250,
    )
    try:
        await asyncio.wait_for(producer.start(), 30)
    except Exception:  # the broker is not back yet
        with contextlib.suppress(Exception):
            await producer.stop()
        return None
    return producer


# -- reading back -----------------------------------------------------------------------------


@dataclass
class Observed:
    events: list[dict[str, Any]]
    dead_letters: list[dict[str, Any]]


async def observe(broker: Broker, settings: Settings) -> Observed:
    specs = topic_names(settings)
    log_records = await read_topic(broker.bootstrap, specs["log"], isolation="read_committed")
    dl_records = await read_topic(broker.bootstrap, specs["deadletter"], isolation="read_committed")
    return Observed(
        [orjson.loads(r.value) for r in log_records if r.value is not None],
        [orjson.loads(r.value) for r in dl_records if r.value is not None],
    )


async def wait_for_outcomes(
    broker: Broker,
    settings: Settings,
    total: int,
    *,
    timeout: float,
    workers: list[WorkerProcess] = (),  # type: ignore[assignment]
) -> Observed:
    """Wait until the log and dead letters hold ``total`` records (bounded by ``timeout``)."""
    deadline = time.monotonic() + timeout
    observed = await observe(broker, settings)
    while len(observed.events) + len(observed.dead_letters) < total:
        if time.monotonic() > deadline:
            tails = "\n".join(w.tail() for w in workers)
            raise AssertionError(
                f"only {len(observed.events) + len(observed.dead_letters)} of {total} outcomes "
                f"after {timeout:.0f}s\n{tails}"
            )
        await asyncio.sleep(1.0)
        observed = await observe(broker, settings)
    return observed


def _first_difference(got: list[str], want: list[str]) -> str:
    """Where a run's recorded correlationIds first depart from the oracle's, with context."""
    pairs = enumerate(zip(got, want, strict=False))
    at = next((i for i, (g, w) in pairs if g != w), min(len(got), len(want)))
    recorded, expected = set(got), set(want)
    missing = [c for c in want if c not in recorded]
    extra = [c for c in got if c not in expected]
    return (
        f"first difference at sequence {at}: recorded {got[max(0, at - 2) : at + 3]}, "
        f"oracle {want[max(0, at - 2) : at + 3]}; {len(got)} recorded vs {len(want)} expected; "
        f"missing {missing[:5]}, extra {extra[:5]}"
    )


def account(published: list[Published], expected: Expected, observed: Observed) -> str:
    """Check "nothing lost, nothing duplicated, per-run order" and return the printed line."""
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in observed.events:
        by_run[event["runId"]].append(event)
    correlation_counts = Counter(e["causationId"] for e in observed.events)
    duplicated = {c: n for c, n in correlation_counts.items() if n > 1}
    assert not duplicated, f"correlationIds recorded more than once: {list(duplicated)[:5]}"
    for run, events in by_run.items():
        sequences = [e["sequence"] for e in events]
        assert sequences == list(range(len(events))), f"{run}: sequence gaps or disorder"
        got = [e["causationId"] for e in events]
        want = expected.admitted.get(run, [])
        assert got == want, f"{run}: log differs from the oracle: {_first_difference(got, want)}"
    assert set(by_run) == set(expected.admitted), "runs missing from the log"
    sources = Counter(
        (d["source"]["partition"], d["source"]["offset"]) for d in observed.dead_letters
    )
    assert all(n == 1 for n in sources.values()), "a refused record was dead-lettered twice"
    admitted = len(observed.events)
    refused = len(observed.dead_letters)
    assert refused == expected.refused, f"dead letters {refused} != expected {expected.refused}"
    deduplicated = len(published) - admitted - refused
    assert deduplicated == expected.deduplicated
    line = (
        f"published={len(published)} = admitted={admitted} + refused={refused} + "
        f"deduplicated={deduplicated}"
    )
    assert len(published) == admitted + refused + deduplicated
    return line
