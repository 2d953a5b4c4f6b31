"""Fault scenarios that break subscribers and their streams: subscribers paused and caught up,
a storm of full-surface requests, and SSE clients whose runs' partitions change owner.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from app.core.projection.subscriber_view import SubscriberView
from app.devtools.fault_accounting import (
    Outputs,
    read_outputs,
    sse_delivery,
)
from app.devtools.fault_kit import Published, WorkerProcess
from app.devtools.fault_stage import Report, Stage, scenario_corpus
from app.devtools.fault_subscribers import SseReader, SubscriberFleet
from app.shell.cli.broker import Broker
from app.shell.cli.subscriber_client import SubscriberClient

__all__ = ["MAX_SSE_CLIENTS", "resync_storm", "sse_owner_change", "subscriber_pause"]


async def subscriber_pause(broker: Broker, size: int, tmp: Path, seed: int = 1) -> Report:
    """Subscribers that stop reading for a while and catch up: one whose application stops
    pulling surfaces (its client suspended, frames pile up on its topic), one that goes away
    and comes back as a fresh client with nothing held; a third reads all along."""
    stage = Stage(broker, tmp, "subscriber-pause", size)
    report: Report | None = None
    records = scenario_corpus(size, seed, "pause")
    seconds = max(20.0, size / 250)
    try:
        await stage.prepare()
        cast = _PausedCast(stage)
        for c in (cast.paused, cast.gone, cast.steady):
            await c.register()
        stage.background(cast.read(cast.paused, stage.stopping, cast.reading))
        stage.background(cast.read(cast.gone, cast.gone_stop, None))
        stage.background(cast.read(cast.steady, stage.stopping, None))
        stage.worker("w1")
        await asyncio.gather(stage.publish(records, seconds=seconds), cast.pause(seconds))
        report = await stage.finish(cast.views)
        report.figures["frames delivered to the paused subscriber"] = cast.delivered[
            cast.paused.subscriber_id
        ]
        return report
    finally:
        await stage.close(report)


class _PausedCast:
    """The three subscribers of ``subscriber_pause`` (paused, gone and back, steady), what each
    was delivered, and the fault: nobody reads for a while."""

    def __init__(self, stage: Stage) -> None:
        self.stage = stage
        self.paused, self.gone = self.client("paused", True), self.client("gone", True)
        self.steady = self.client("steady", False)
        self.reading = asyncio.Event()
        self.reading.set()
        self.delivered: Counter[str] = Counter()
        self.gone_stop = asyncio.Event()
        self.holder: dict[str, SubscriberClient] = {}

    def client(self, name: str, delta: bool) -> SubscriberClient:
        return SubscriberClient(
            self.stage.broker.bootstrap,
            f"{self.stage.settings.app_id}-{name}",
            delta=delta,
            full_every=50,
            settings=self.stage.settings,
        )

    async def read(
        self, c: SubscriberClient, stop: asyncio.Event, gate: asyncio.Event | None
    ) -> None:
        surfaces = c.surfaces(stop)
        try:
            async for _ in surfaces:
                self.delivered[c.subscriber_id] += 1
                if gate is not None:
                    await gate.wait()  # the application stopped pulling: the client waits
        finally:
            await surfaces.aclose()  # type: ignore[attr-defined]  # an async generator

    async def pause(self, seconds: float) -> None:
        """Once both have frames: the paused one stops pulling, the gone one goes; after a
        while the gone one comes back with nothing held and the paused one reads again."""
        stage, delivered = self.stage, self.delivered
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (
            delivered[self.paused.subscriber_id] and delivered[self.gone.subscriber_id]
        ):
            await asyncio.sleep(0.2)
        self.reading.clear()
        self.gone_stop.set()
        stage.faults["subscriber stopped reading"] += 1
        stage.faults["subscriber gone, back with nothing held"] += 1
        pause = seconds * 0.6
        await asyncio.sleep(pause)  # the fault itself: how long nobody reads
        stage.figures["seconds without reading"] = round(pause)
        stage.figures["frames delivered before the pause"] = delivered[self.paused.subscriber_id]
        back = self.client("gone", True)
        self.holder["back"] = back
        stage.background(self.read(back, stage.stopping, None))
        self.reading.set()

    def views(self) -> dict[str, SubscriberView]:
        return {
            "paused": self.paused.view,
            "back": self.holder["back"].view,
            "steady": self.steady.view,
        }


def _holding(fleet: SubscriberFleet, surfaces: int) -> int:
    """Subscribers that hold at least ``surfaces`` surfaces."""
    return sum(1 for view in fleet.views.values() if len(view.surfaces) >= surfaces)


async def resync_storm(broker: Broker, size: int, tmp: Path, seed: int = 1) -> Report:
    """Many subscribers ask for full surfaces at once, mid-stream, with two workers owning
    the runs: every request is answered with exactly one full frame, and every subscriber
    ends with the materialized surfaces."""
    stage = Stage(broker, tmp, "resync-storm", size, partitions=4)
    report: Report | None = None
    subscribers = max(10, min(300, size // 60))
    records = scenario_corpus(size, seed, "storm")
    half = len(records) // 2
    seconds = max(10.0, size / 400)
    # Each subscriber follows three runs (a UI shows a few runs, not all of them), so the
    # fan-out per change stays near 3 * subscribers / runs while the storm grows with them.
    run_ids = sorted({rec.run for rec in records})
    follows = [
        frozenset(run_ids[(i + k) % len(run_ids)] for k in range(3)) for i in range(len(run_ids))
    ]
    try:
        await stage.prepare()
        fleet = await stage.fleet(subscribers, follows)
        workers = [stage.worker("w1"), stage.worker("w2")]
        await stage.publish(records[:half], seconds=seconds)
        deadline = time.monotonic() + 60
        # The storm asks for what the subscribers hold: let them hold a few surfaces each (their
        # three runs start with createSurface), bounded.
        while time.monotonic() < deadline and _holding(fleet, 3) < subscribers:
            await asyncio.sleep(0.2)
        second_half = stage.background(stage.publish(records[half:], seconds=seconds))
        stage.faults["resync requests at once"] = await fleet.storm()
        await second_half
        report = await stage.finish(lambda: fleet.views, runs=fleet.runs)
        await _check_answered(report, fleet, workers, stage.settings.partitions)
        report.subscribers = subscribers
        return report
    finally:
        await stage.close(report)


async def _check_answered(
    report: Report, fleet: SubscriberFleet, workers: list[WorkerProcess], partitions: int
) -> None:
    """Every request (the storm's and any a subscriber sent on its own) is answered: an
    answer frame names its request (the a2ui-resync header). A request answered by two
    owners across a rebalance gets two full frames, which is allowed (idempotent)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and fleet.unanswered():
        await asyncio.sleep(0.5)
    unanswered = fleet.unanswered()
    report.figures["resync requests"] = fleet.resyncs_requested
    report.figures["resyncs answered"] = len(fleet.request_sources) - unanswered
    report.figures["answer frames"] = fleet.answers
    report.figures["frames delivered"] = sum(fleet.frames.values())
    # Each worker restores each partition it is given: more restores than partitions means
    # the projector group rebalanced during the scenario, which nothing here injected.
    restores = sum(w.log_count(b"projector: partition") for w in workers)
    report.figures["projector partition restores"] = restores
    if unanswered or len(fleet.request_sources) != fleet.resyncs_requested:
        moved = restores > partitions
        report.failures.append(
            f"{unanswered} of {fleet.resyncs_requested} resync requests never answered"
            + ("; the projector group rebalanced meanwhile (not injected)" if moved else "")
        )


# Clients of at most this many runs (one each): enough to cover every partition many times
# over, few enough for a 2-core machine that runs the workers too.
MAX_SSE_CLIENTS = 32


def _base(worker: WorkerProcess) -> str:
    return f"http://127.0.0.1:{worker.web_port}"


async def _wait_owning(worker: WorkerProcess, *, timeout: float) -> bool:
    """Wait (bounded) until ``worker``'s validator owns at least one partition."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await asyncio.to_thread(worker.partitions):
            return True
        await asyncio.sleep(0.2)
    return False


async def sse_owner_change(broker: Broker, size: int, tmp: Path, seed: int = 1) -> Report:
    """SSE clients attached to every run (through either worker: a run another worker owns is
    forwarded to its owner) while the stream flows and the runs' partitions change owner: a
    third worker joins, an owner stops with SIGTERM, another is SIGKILLed, the first comes
    back. A moved partition's streams end; each client resumes with Last-Event-ID, as
    EventSource does, at whichever worker is up. At the end every client must hold every
    recorded event of its run (the log read read_committed) exactly once, in sequence order."""
    stage = Stage(broker, tmp, "sse-owner-change", size, partitions=4)
    report: Report | None = None
    records = scenario_corpus(size, seed, "sse")
    token = uuid.uuid4().hex
    stage.worker_env = {"A2UI_STREAM_HTTP_TOKENS": token}
    run_ids = sorted({rec.run for rec in records})[:MAX_SSE_CLIENTS]
    members: list[WorkerProcess] = []

    def bases() -> list[str]:
        return [_base(m) for m in members if m.alive()]

    readers = [SseReader(run_id, bases, token, turn=i) for i, run_id in enumerate(run_ids)]
    session = aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=3, sock_read=60),
        connector=aiohttp.TCPConnector(limit=0),
    )
    try:
        await stage.prepare()
        fleet = await stage.fleet(2)
        members += [stage.worker("w1"), stage.worker("w2"), stage.worker("w3", start=False)]
        flowing = asyncio.Event()  # set while the stream is being published
        for reader in readers:
            stage.background(reader.run(session, stage.stopping))
        # Each step: the join or the exit, the group's move (a SIGKILLed member after its 10 s
        # session), the streams resumed, progress; the stream must still flow through the last.
        seconds = max(100.0, size / 30)
        changed = asyncio.Event()  # the last owner change is done

        async def faults() -> None:
            try:
                await _owner_changes(stage, members, readers, flowing)
            finally:
                changed.set()

        await asyncio.gather(_sse_stream(stage, records, seconds, flowing, changed), faults())
        report = await stage.finish(lambda: fleet.views)
        got = await read_outputs(broker.bootstrap, stage.topics["log"], stage.topics["deadletter"])
        await _check_sse(report, readers, got, timeout=120)
        return report
    finally:
        await stage.close(report)  # the readers (background tasks) first, then the workers
        await session.close()


async def _sse_stream(
    stage: Stage,
    records: list[Published],
    seconds: float,
    flowing: asyncio.Event,
    changed: asyncio.Event,
) -> None:
    """The records paced over ``seconds``; the last tenth (spread over every run) once
    the last owner change is done, so each client's final stream carries events."""
    tail = len(records) // 10
    flowing.set()
    try:
        await stage.publish(records[:-tail], seconds=seconds, chunk=10)
        flowing.clear()
        await changed.wait()
        await stage.publish(records[-tail:], seconds=5.0, chunk=10)
    finally:
        flowing.clear()


async def _until_resumed(readers: Sequence[SseReader], before: int) -> None:
    """Wait (bounded) until streams ended and were resumed since ``before``."""
    deadline = time.monotonic() + 60
    while sum(r.resumes for r in readers) <= before and time.monotonic() < deadline:
        await asyncio.sleep(0.2)


async def _owner_changes(
    stage: Stage,
    members: list[WorkerProcess],
    readers: Sequence[SseReader],
    flowing: asyncio.Event,
) -> None:
    """The chaos of ``sse_owner_change``: once the clients are attached, a worker joins, an
    owner stops, another is killed, the first comes back; after each, the streams resume."""
    w1, w2, w3 = members
    await asyncio.gather(w1.wait_progress(timeout=60), w2.wait_progress(timeout=60))
    # the clients are attached: most runs have recorded events, streamed
    deadline = time.monotonic() + 60
    while (
        time.monotonic() < deadline and sum(bool(r.received) for r in readers) < len(readers) * 0.8
    ):
        await asyncio.sleep(0.2)
    steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("owner change (a worker joined)", lambda: asyncio.to_thread(w3.start)),
        ("owner stopped (SIGTERM)", lambda: asyncio.to_thread(w1.stop)),
        ("owner killed (SIGKILL)", lambda: asyncio.to_thread(w2.kill)),
        ("owner change (a worker joined)", lambda: asyncio.to_thread(w1.start)),
    ]
    for step, (fault, act) in enumerate(steps, 1):
        before = sum(r.resumes for r in readers)
        await act()
        stage.faults[fault] += 1
        stage.figures["owner changes while the stream flowed"] += flowing.is_set()
        await _until_resumed(readers, before)
        alive = [m for m in members if m.alive()]
        await asyncio.gather(*(_wait_owning(m, timeout=60) for m in alive))
        await asyncio.gather(
            *(m.wait_progress(beyond=m.outcomes_counted(), timeout=30) for m in alive)
        )
        resumed = sum(r.resumes for r in readers) - before
        stage.figures[f"SSE resumed after step {step} ({fault})"] = resumed


async def _check_sse(
    report: Report, readers: Sequence[SseReader], got: Outputs, *, timeout: float
) -> None:
    """Wait (bounded) until every client received its run's last recorded event, then check
    each one's delivery against the log (``fault_accounting.sse_delivery``) into ``report``."""
    recorded: dict[str, list[tuple[int, str]]] = {}
    for event, _src in got.events:
        recorded.setdefault(event["runId"], []).append(
            (int(event["sequence"]), str(event.get("eventId")))
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(
        r.last_sequence < len(recorded.get(r.run_id, ())) - 1 for r in readers
    ):
        await asyncio.sleep(0.5)
    totals: Counter[str] = Counter()
    for reader in readers:
        delivery = sse_delivery(recorded.get(reader.run_id, []), reader.received)
        totals["missing"] += delivery.missing
        totals["duplicated"] += delivery.duplicated
        totals["misordered"] += delivery.misordered
        totals["foreign"] += delivery.foreign
        totals["events received"] += delivery.received
        report.failures += [f"SSE {reader.run_id}: {p}" for p in delivery.problems[:3]]
    figures = report.figures
    figures["SSE clients"] = len(readers)
    figures["SSE events recorded for them"] = sum(len(recorded.get(r.run_id, ())) for r in readers)
    figures["SSE events received"] = totals["events received"]
    for name in ("missing", "duplicated", "misordered", "foreign"):
        figures[f"SSE {name}"] = totals[name]
    figures["SSE streams opened"] = sum(r.connects for r in readers)
    figures["SSE resumed with Last-Event-ID"] = sum(r.resumes for r in readers)
    figures["SSE streams ended by the server"] = sum(r.ended for r in readers)
    figures["SSE connections failed"] = sum(r.failed for r in readers)
    answers = Counter[int]()
    for reader in readers:
        answers.update(reader.answers)
    for status, n in sorted(answers.items()):
        figures[f"SSE answered {status} (retried)"] = n
    for reader in readers:
        for status, n in reader.refusals.items():
            report.failures.append(
                f"SSE {reader.run_id}: answered {status} x{n} after its run had events "
                "(an EventSource would not reconnect)"
            )
    if not figures["SSE resumed with Last-Event-ID"]:
        report.failures.append("no SSE stream was resumed: no partition moved under a client")
