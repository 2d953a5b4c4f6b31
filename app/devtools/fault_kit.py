"""The pipeline on a real broker, as a kit: worker processes, a corpus of admission records,
publishing (paced, and with retries that survive a broker restart), and reading back what the
pipeline wrote.

Shell module, shared by the integration tests (``tests/integration/pipeline_kit.py`` re-exports
it) and by ``a2ui-stream soak`` (``app.devtools.fault_scenarios``). It may start processes, open
sockets and read the environment. The checks ("nothing lost, nothing duplicated, per-run
order") live in ``app.devtools.fault_accounting``; ``account`` below is the short form the
pipeline tests use.

The kit is three modules: ``fault_workers`` (the worker processes, open transactions, the
topics), ``fault_corpus`` (the corpus and its expected outcomes) and this one, which
publishes, reads back and names the whole kit (what the tests and the scenarios import).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer

from app.devtools.fault_corpus import (
    BASIC,
    RULES,
    Expected,
    Published,
    components,
    corpus,
    create,
    data,
    delete,
    envelope,
    expected_outcomes,
    image,
)
from app.devtools.fault_workers import WorkerProcess, apply_topics, open_transactions, topic_names
from app.shell.cli.broker import Broker
from app.shell.settings import Settings
from app.shell.worker.kafka_io import read_topic

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
