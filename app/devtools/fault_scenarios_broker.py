"""Fault scenarios on the broker's side of the pipeline: the broker stopped and restarted
mid-stream, and producers re-sending records (the same correlationIds) across a worker
SIGKILL.
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections import Counter
from pathlib import Path

import orjson

from app.devtools.fault_accounting import (
    read_outputs,
)
from app.devtools.fault_kit import (
    Published,
)
from app.devtools.fault_stage import Report, Stage, kill_after_progress, scenario_corpus
from app.shell.cli.broker import Broker

__all__ = ["broker_restart", "producer_retries"]


async def broker_restart(broker: Broker, size: int, tmp: Path, seed: int = 1) -> Report:
    """The broker stops and restarts mid-stream on the same ports and log directory, with a
    controlled shutdown and then killed with SIGKILL (its log and transaction state recovered
    from disk), alternately."""
    if not broker.features.durability:
        return Report(
            "broker-restart",
            size,
            broker.description,
            skipped=f"needs broker feature 'durability', which {broker.description} lacks",
        )
    stage = Stage(broker, tmp, "broker-restart", size)
    report: Report | None = None
    restarts = max(2, size // 10000)
    records = scenario_corpus(size, seed, "restart")
    rng = random.Random(seed)
    try:
        await stage.prepare()
        fleet = await stage.fleet(2)
        worker = stage.worker("w1")

        async def chaos() -> None:
            for n in range(restarts):
                await worker.wait_progress(beyond=worker.outcomes_counted(), timeout=60)
                await asyncio.sleep(rng.uniform(0.2, 1.5))
                hard = n % 2 == 1
                await asyncio.to_thread(functools.partial(broker.restart, hard=hard))
                stage.faults["broker SIGKILL + restart" if hard else "broker stop + restart"] += 1

        # A restart takes 10-20 s on a loaded 2-core machine; the stream keeps flowing.
        seconds = restarts * 20.0 + 5.0
        await asyncio.gather(stage.publish(records, seconds=seconds), chaos())
        report = await stage.finish(lambda: fleet.views)
        return report
    finally:
        await stage.close(report)


def _retried(records: list[Published], rng: random.Random, producers: int) -> list[list[Published]]:
    """Each run's records go to one producer; on the way, producers re-send: at once (an ack
    lost), later (a retry queue), from another producer (a client fail-over), and as a
    regenerated envelope (new envelopeId, same correlationId)."""
    lanes: list[list[Published]] = [[] for _ in range(producers)]
    for rec in records:
        lane = lanes[int(rec.run.rsplit("-", 1)[1]) % producers]
        lane.append(rec)
        roll = rng.random()
        if roll < 0.10:
            lane.append(rec)
        elif roll < 0.15:
            lane.insert(len(lane) + rng.randrange(20, 200), rec)  # list.insert clamps
        elif roll < 0.18:
            other = lanes[rng.randrange(producers)]
            other.append(rec)
        elif roll < 0.23 and rec.correlation_id is not None:
            body = orjson.loads(rec.value)
            body["envelope"]["envelopeId"] += "-regenerated"
            lane.append(Published(rec.run, rec.key, orjson.dumps(body), rec.correlation_id))
    return lanes


async def producer_retries(broker: Broker, size: int, tmp: Path, seed: int = 1) -> Report:
    """Three producers re-send records with the same correlationIds (at once, later, from
    another producer, regenerated), across a worker SIGKILL: every re-send of a recorded
    envelope is an E2 deduplication, never a second log record."""
    stage = Stage(broker, tmp, "producer-retries", size)
    report: Report | None = None
    rng = random.Random(seed)
    records = scenario_corpus(size, seed, "retry")
    lanes = _retried(records, rng, 3)
    seconds = max(15.0, size / 250)
    try:
        await stage.prepare()
        fleet = await stage.fleet(2)
        worker = stage.worker("w1")

        async def chaos() -> None:
            await kill_after_progress(worker, rng)
            stage.faults["worker SIGKILL"] += 1
            worker.start()

        await asyncio.gather(*(stage.publish(lane, seconds=seconds) for lane in lanes), chaos())
        stage.faults["producer re-sends"] = sum(map(len, lanes)) - len(records)
        report = await stage.finish(lambda: fleet.views)
        got = await read_outputs(broker.bootstrap, stage.topics["log"], stage.topics["deadletter"])
        recorded = Counter((e["runId"], e["causationId"]) for e, _src in got.events)
        twice = [key for key, n in recorded.items() if n > 1]
        if twice:
            report.failures.append(f"{len(twice)} correlationIds recorded twice: {twice[:3]}")
        return report
    finally:
        await stage.close(report)
