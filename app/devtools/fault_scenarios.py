"""The fault scenarios: the pipeline on a real broker while something breaks, each ending with
the accounting (docs/reliability.md).

Shell module. Each scenario is ``async def name(broker, size, tmp, seed=1) -> Report``: it
creates its own topics (a unique prefix), starts ``a2ui-stream worker`` processes, publishes
about ``size`` admission records (the mixed corpus of ``fault_kit.corpus``: valid lifecycles,
fold violations, excluded components, bad shapes, undecodable bytes, re-sends) spread over
time, injects its fault mid-stream, waits for the pipeline to settle (every record decided,
every worker's lag 0; bounded) and then checks:

- the accounting of ``fault_accounting.tally`` against the core oracle: published = admitted
  + refused + deduplicated, lost 0, duplicated 0, mis-ordered 0, wrong 0;
- every subscriber's reconstructed surfaces equal the log's materialization;
- no worker crashed (an exit we did not cause, or a service crash in its log).

The tests (tests/integration/test_faults.py) run them at CI size; ``a2ui-stream soak`` runs
them repeatedly, bigger.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from app.core.subscriber import SubscriberView
from app.devtools.fault_accounting import (
    Accounting,
    Outputs,
    committed_offsets,
    oracle,
    read_outputs,
    sse_delivery,
    tally,
)
from app.devtools.fault_kit import (
    RULES,
    Published,
    WorkerProcess,
    apply_topics,
    corpus,
    open_transactions,
    publish_paced,
    topic_names,
)
from app.devtools.fault_subscribers import SseReader, SubscriberFleet, wait_converged
from app.shell.cli.broker import Broker
from app.shell.cli.subscriber_client import SubscriberClient
from app.shell.settings import load_settings
from app.shell.worker.faust_app import policy_from
from app.shell.worker.kafka_io import read_topic

__all__ = ["SCENARIOS", "Report", "Scenario"]


@dataclass
class Report:
    """What one scenario did and found; ``ok`` is the verdict."""

    scenario: str
    size: int
    broker: str
    faults: dict[str, int] = field(default_factory=dict)
    accounting: Accounting = field(default_factory=Accounting)
    crashes: int = 0
    subscribers: int = 0
    surfaces: int = 0  # surfaces the log materializes (each subscriber must hold them all)
    diverged: list[str] = field(default_factory=list)  # "subscriber: difference"
    failures: list[str] = field(default_factory=list)  # the scenario's own checks
    figures: dict[str, int] = field(default_factory=dict)  # more counts worth printing
    seconds: float = 0.0
    skipped: str | None = None

    @property
    def ok(self) -> bool:
        if self.skipped is not None:
            return True
        return self.accounting.ok and not self.crashes and not self.diverged and not self.failures

    def as_dict(self) -> dict[str, Any]:
        acc = self.accounting
        return {
            "scenario": self.scenario,
            "ok": self.ok,
            "skipped": self.skipped,
            "size": self.size,
            "broker": self.broker,
            "faults": self.faults,
            "published": acc.published,
            "admitted": acc.admitted,
            "refused": acc.refused,
            "deduplicated": acc.deduplicated,
            "lost": acc.lost,
            "pending": acc.pending,
            "duplicated": acc.duplicated,
            "twice": acc.twice,
            "misordered": acc.misordered,
            "wrong": acc.wrong,
            "events": acc.events,
            "runs": acc.runs,
            "crashes": self.crashes,
            "subscribers": self.subscribers,
            "surfaces": self.surfaces,
            "diverged": len(self.diverged),
            "figures": self.figures,
            "seconds": round(self.seconds, 1),
            "problems": (acc.problems + self.diverged + self.failures)[:20],
        }

    def __str__(self) -> str:
        if self.skipped is not None:
            return f"{self.scenario}: skipped ({self.skipped})"
        faults = ", ".join(f"{name} x{n}" for name, n in self.faults.items()) or "none"
        lines = [
            f"{self.scenario}: {'OK' if self.ok else 'FAILED'} in {self.seconds:.0f}s; "
            f"faults: {faults}",
            f"  {self.accounting.line()}",
            f"  crashes={self.crashes}; subscribers={self.subscribers} reconstructed == "
            f"materialized: {self.subscribers - _diverged_subscribers(self.diverged)} of "
            f"{self.subscribers} ({self.surfaces} surfaces)",
        ]
        if self.figures:
            lines.append("  " + ", ".join(f"{k}={v}" for k, v in self.figures.items()))
        lines += [f"  problem: {p}" for p in self.as_dict()["problems"]]
        return "\n".join(lines)


def _diverged_subscribers(diverged: Sequence[str]) -> int:
    return len({d.split(":", 1)[0] for d in diverged})


# -- the stage every scenario runs on ---------------------------------------------------------


class Stage:
    """One scenario's topics, workers, faults and timing."""

    def __init__(
        self, broker: Broker, tmp: Path, scenario: str, size: int, *, partitions: int = 3
    ) -> None:
        token = uuid.uuid4().hex[:8]
        self.broker, self.scenario, self.size = broker, scenario, size
        self.settings = replace(
            load_settings({}),
            topic_prefix=f"f{token}.",
            app_id=f"a2ui-fault-{token}",
            partitions=partitions,
            fast_groups=True,
        )
        self.topics = topic_names(self.settings)
        self.dir = tmp / f"{scenario}-{token}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.workers: list[WorkerProcess] = []
        self.faults: Counter[str] = Counter()
        self.figures: Counter[str] = Counter()
        self.failures: list[str] = []
        self.tasks: list[asyncio.Task[Any]] = []
        self.fleets: list[SubscriberFleet] = []
        self.stopping = asyncio.Event()
        self.started = time.monotonic()
        self.worker_env: dict[str, str] = {}  # more environment for every worker

    async def prepare(self) -> None:
        await apply_topics(self.broker, self.settings)

    def worker(self, worker_id: str, *, start: bool = True) -> WorkerProcess:
        worker = WorkerProcess(
            self.broker, self.settings, worker_id, self.dir, extra_env=self.worker_env
        )
        self.workers.append(worker)
        if start:
            worker.start()
        return worker

    def background(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self.tasks.append(task)
        return task

    async def fleet(self, n: int, runs: Sequence[frozenset[str] | None] = ()) -> SubscriberFleet:
        """``n`` subscribers (every other one on deltas), registered and read; subscriber
        ``i`` follows ``runs[i % len(runs)]`` (default: every run)."""
        ids = [f"{self.settings.app_id}-sub{i:03d}" for i in range(n)]
        fleet = SubscriberFleet(
            self.broker.bootstrap,
            self.settings,
            ids,
            runs={sid: runs[i % len(runs)] for i, sid in enumerate(ids)} if runs else {},
        )
        self.fleets.append(fleet)
        await fleet.register()
        self.background(fleet.run(self.stopping))
        return fleet

    async def publish(
        self, records: Sequence[Published], seconds: float, *, chunk: int = 50
    ) -> None:
        resent = await publish_paced(
            self.broker.bootstrap, self.topics["admission"], records, seconds=seconds, chunk=chunk
        )
        if resent:
            self.figures["records re-sent after a send failure"] += resent

    def _lags(self) -> int | None:
        """Summed consumer lag of the live workers; None when one is not serving yet."""
        total = 0
        for worker in self.workers:
            if not worker.alive():
                continue
            try:
                text = worker.metrics()
            except OSError:
                return None
            for line in text.splitlines():
                if line.startswith("a2ui_consumer_lag{"):
                    total += int(float(line.rsplit(" ", 1)[1]))
        return total

    async def settle(self, timeout: float) -> tuple[Accounting, Outputs]:
        """Wait (bounded) until every published record has its outcome and the workers have
        no lag, then tally."""
        admission = await read_topic(self.broker.bootstrap, self.topics["admission"], timeout=300)
        worker_settings = load_settings(self.workers[0].env())
        want = oracle(
            admission,
            policy_from(worker_settings),
            RULES,
            partitions=worker_settings.partitions,
            max_bytes=worker_settings.max_record_bytes,
        )
        due = sum(
            len(w.events) if w.kind == "admitted" else 1
            for w in want.wants.values()
            if w.kind != "deduplicated"
        )
        deadline = time.monotonic() + timeout
        while True:
            got = await read_outputs(
                self.broker.bootstrap, self.topics["log"], self.topics["deadletter"]
            )
            enough = len(got.events) + len(got.dead_letters) >= due
            if enough and await asyncio.to_thread(self._lags) == 0:
                # Read once more: anything written twice would be visible now.
                got = await read_outputs(
                    self.broker.bootstrap, self.topics["log"], self.topics["deadletter"]
                )
                break
            if time.monotonic() > deadline:
                self.failures.append(
                    f"not settled after {timeout:.0f}s: "
                    f"{len(got.events) + len(got.dead_letters)} of {due} outcomes"
                )
                break
            await asyncio.sleep(1.0)
        committed = await committed_offsets(
            self.broker.bootstrap, f"{self.settings.app_id}-validator", self.topics["admission"]
        )
        return tally(len(admission), want, got, committed), got

    async def finish(
        self,
        views: Callable[[], Mapping[str, SubscriberView]] | None = None,
        *,
        runs: Mapping[str, frozenset[str] | None] | None = None,
        timeout: float = 300.0,
    ) -> Report:
        settling = time.monotonic()
        accounting, got = await self.settle(timeout)
        self.figures["seconds to settle after the stream"] = round(time.monotonic() - settling)
        report = Report(
            self.scenario,
            self.size,
            self.broker.description,
            faults=dict(self.faults),
            accounting=accounting,
        )
        if views is not None:
            materialized = got.materialized()
            differences = await wait_converged(materialized, views, timeout=120, runs=runs)
            report.subscribers = len(differences)
            report.surfaces = len(materialized.surfaces)
            report.diverged = [
                f"{sid}: {d}" for sid, diffs in differences.items() for d in diffs[:3]
            ]
        report.failures = self.failures
        report.figures = dict(self.figures)
        return report

    async def close(self, report: Report | None = None) -> None:
        self.stopping.set()
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(BaseException):
                await task
        for fleet in self.fleets:
            await fleet.close()
        for worker in self.workers:
            await asyncio.to_thread(worker.stop)
        if report is not None:
            report.crashes = sum(worker.crashes for worker in self.workers)
            report.seconds = time.monotonic() - self.started


def _corpus(size: int, seed: int, prefix: str) -> list[Published]:
    """About ``size`` records over up to 60 runs; each scenario (``prefix``) draws its own."""
    runs = max(4, min(60, size // 80))
    mixed = zlib.crc32(prefix.encode()) % 1000 + 1000 * seed
    return corpus(runs=runs, per_run=max(10, size // runs), seed=mixed, prefix=prefix)


# Measured on a loaded 2-core machine: a SIGKILLed worker is deciding records again 8-14 s
# after its restart (Python and Faust start-up, then the group waits for the dead member's
# session to expire). Scenarios pace their publication so that each fault lands mid-stream.
RESTART_SECONDS = 12.0


async def _kill_after_progress(
    worker: WorkerProcess, rng: random.Random, *, timeout: float = 30.0
) -> None:
    """SIGKILL ``worker`` a moment after it decided records in this incarnation (or after
    ``timeout`` if it has nothing to decide)."""
    await worker.wait_progress(timeout=timeout)
    await asyncio.sleep(rng.uniform(0.1, 1.2))
    worker.kill()


# -- the scenarios ----------------------------------------------------------------------------


async def sigkill_loop(broker: Broker, size: int, tmp: Path, seed: int = 1) -> Report:
    """The worker is SIGKILLed repeatedly mid-stream and restarted each time."""
    stage = Stage(broker, tmp, "sigkill-loop", size)
    report: Report | None = None
    kills = max(3, size // 5000)
    records = _corpus(size, seed, "kill")
    rng = random.Random(seed)
    try:
        await stage.prepare()
        fleet = await stage.fleet(2)
        worker = stage.worker("w1")

        async def chaos() -> None:
            for _ in range(kills):
                await _kill_after_progress(worker, rng)
                stage.faults["worker SIGKILL"] += 1
                worker.start()

        seconds = kills * RESTART_SECONDS + 5.0
        await asyncio.gather(stage.publish(records, seconds=seconds), chaos())
        report = await stage.finish(lambda: fleet.views)
        return report
    finally:
        await stage.close(report)


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
    records = _corpus(size, seed, "restart")
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


def _joined(worker: WorkerProcess, before: int) -> bool:
    """The worker's validator found the broker grants transactions (and subscribes next)."""
    return worker.log_count(b"validator: transactional producer") > before


async def rebalance_kill(broker: Broker, size: int, tmp: Path, seed: int = 1) -> Report:
    """Three workers in one group: each round a member joins and, while the group rebalances,
    another member is SIGKILLed; the killed one comes back the next round (its partitions' new
    owners fenced its open transactions when they took them)."""
    stage = Stage(broker, tmp, "rebalance-kill", size, partitions=6)
    report: Report | None = None
    rounds = max(1, size // 8000)
    records = _corpus(size, seed, "rebalance")
    rng = random.Random(seed)
    try:
        await stage.prepare()
        fleet = await stage.fleet(2)
        members = [stage.worker("w1"), stage.worker("w2"), stage.worker("w3", start=False)]

        async def chaos() -> None:
            down = members[2]
            for _ in range(rounds):
                alive = [m for m in members if m.alive()]
                await asyncio.gather(*(m.wait_progress(timeout=30) for m in alive))
                before = down.log_count(b"validator: transactional producer")
                down.start()
                stage.faults["rebalance (a member joined)"] += 1
                deadline = time.monotonic() + 60
                while not _joined(down, before) and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                await asyncio.sleep(rng.uniform(0.0, 1.0))
                victim = rng.choice(alive)
                victim.kill()
                stage.faults["member SIGKILLed during the rebalance"] += 1
                # The group notices the dead member when its session expires (10 s with
                # A2UI_STREAM_FAST_GROUPS), then the newcomer gets partitions and works.
                await down.wait_progress(timeout=30)
                down = victim
            down.start()  # back for good

        # Each round: the members' progress, a join, the dead member's session timeout, the
        # newcomer's progress; the stream must still be flowing at the end of it.
        seconds = rounds * 30.0 + 10.0
        await asyncio.gather(stage.publish(records, seconds=seconds), chaos())
        report = await stage.finish(lambda: fleet.views)
        return report
    finally:
        await stage.close(report)


# A zombie is resumed at the latest this long after its SIGSTOP: past its session timeout (10 s
# with A2UI_STREAM_FAST_GROUPS) and the group's move, and before the broker aborts the open
# transaction it holds on its own (the validator's transaction timeout is 30 s, and the broker
# looks for expired transactions every 10 s), so that the zombie wakes with it still open.
ZOMBIE_STOP_SECONDS = 27.0
# How long a round looks for a moment when the member holds an open transaction (it does a
# few percent of the time at this stream's rate; each look stops it for about 0.1 s).
STOP_SEARCH_SECONDS = 45.0
_FENCED = b"fenced"  # the validator's log line when a partition's producer was fenced


def _restores(worker: WorkerProcess) -> int:
    """Partitions the worker's validator restored ("validator: partition N restored: ...")."""
    return worker.log_count(b" restored: ")


async def zombie_member(broker: Broker, size: int, tmp: Path, seed: int = 1) -> Report:
    """Two members in one group; each round one of them is stopped (SIGSTOP) while it decides
    records, for longer than its session timeout: the group drops it and moves its partitions to
    the other member, which restores them and decides records there. Then the stopped member is
    resumed (SIGCONT) with whatever it held: fetched records, an open transaction, staged state.
    A member that lost its partitions must not commit an outcome for them (issue 15 item 4)."""
    stage = Stage(broker, tmp, "zombie-member", size, partitions=4)
    report: Report | None = None
    rounds = max(2, size // 6000)
    records = _corpus(size, seed, "zombie")
    rng = random.Random(seed)
    partitions = stage.settings.partitions
    try:
        await stage.prepare()
        fleet = await stage.fleet(2)
        members = [stage.worker("w1"), stage.worker("w2")]

        async def stop_holding_a_transaction(victim: WorkerProcess, other: WorkerProcess) -> None:
            """SIGSTOP ``victim`` at a moment when the broker says it holds an open
            transaction on one of its partitions (records written, no commit yet; asked while
            it stands still). A stop that finds none is undone at once (a tenth of a second,
            far below the session timeout) and tried again; past ``STOP_SEARCH_SECONDS`` it
            stays stopped anyway (a stop mid-stream, counted as such)."""
            topics = [stage.topics["log"], stage.topics["deadletter"]]
            deadline = time.monotonic() + STOP_SEARCH_SECONDS
            attempts = 0
            held: list[tuple[str, int]] = []
            while True:
                # Only the owner of partition p writes p of the log and the dead letters:
                # look while the two members' partitions are settled (disjoint, all of them).
                owned = set(await asyncio.to_thread(victim.partitions))
                others = set(await asyncio.to_thread(other.partitions))
                settled = owned and not owned & others and len(owned | others) == partitions
                if settled or time.monotonic() > deadline:
                    attempts += 1
                    victim.pause()
                    held = await open_transactions(broker.bootstrap, topics, sorted(owned))
                    if held or time.monotonic() > deadline:
                        break
                    victim.resume()
                await asyncio.sleep(rng.uniform(0.0, 0.05))
            stage.figures["stop attempts"] += attempts
            if held:
                stage.figures["stops holding an open transaction"] += 1

        async def chaos() -> None:
            stopped_for: list[float] = []
            for n in range(rounds):
                victim, other = members[n % 2], members[1 - n % 2]
                await asyncio.gather(*(m.wait_progress(timeout=60) for m in members))
                await stop_holding_a_transaction(victim, other)
                restored = _restores(other)
                stopped = time.monotonic()
                stage.faults["member SIGSTOPped past its session timeout"] += 1
                deadline = stopped + ZOMBIE_STOP_SECONDS
                # The group moved on: the other member restored every partition (an eager
                # rebalance gives it all of them, the zombie's included) and decided records.
                while _restores(other) < restored + partitions and time.monotonic() < deadline:
                    await asyncio.sleep(0.2)
                moved = _restores(other) >= restored + partitions
                if moved:
                    progress = other.outcomes_counted()
                    await other.wait_progress(
                        beyond=progress, timeout=max(0.5, deadline - time.monotonic())
                    )
                else:
                    stage.figures["stops resumed before the group moved on"] += 1
                stopped_for.append(time.monotonic() - stopped)
                victim.resume()
                stage.faults["zombie resumed (SIGCONT)"] += 1
                # It learns from its next heartbeat that it was dropped, rejoins, and decides
                # again for the partitions the group gives it back.
                await victim.wait_progress(beyond=victim.outcomes_counted(), timeout=90)
            stage.figures["seconds stopped, shortest"] = round(min(stopped_for))
            stage.figures["seconds stopped, longest"] = round(max(stopped_for))
            if stage.figures["stops resumed before the group moved on"] == rounds:
                stage.failures.append("the group never moved a stopped member's partitions")

        # Each round: both members' progress, the stop (session timeout, the rebalance, the
        # restore, progress), the zombie's return and rejoin; the stream flows all along.
        seconds = rounds * 50.0 + 10.0
        # Small chunks: a steady stream, so that a member is often inside a transaction.
        await asyncio.gather(stage.publish(records, seconds=seconds, chunk=5), chaos())
        report = await stage.finish(lambda: fleet.views)
        report.figures["fenced (the validator's log)"] = sum(m.log_count(_FENCED) for m in members)
        return report
    finally:
        await stage.close(report)


async def subscriber_pause(broker: Broker, size: int, tmp: Path, seed: int = 1) -> Report:
    """Subscribers that stop reading for a while and catch up: one whose application stops
    pulling surfaces (its client suspended, frames pile up on its topic), one that goes away
    and comes back as a fresh client with nothing held; a third reads all along."""
    stage = Stage(broker, tmp, "subscriber-pause", size)
    report: Report | None = None
    records = _corpus(size, seed, "pause")
    seconds = max(20.0, size / 250)
    try:
        await stage.prepare()
        app = stage.settings.app_id

        def client(name: str, delta: bool) -> SubscriberClient:
            return SubscriberClient(
                broker.bootstrap,
                f"{app}-{name}",
                delta=delta,
                full_every=50,
                settings=stage.settings,
            )

        paused, gone, steady = client("paused", True), client("gone", True), client("steady", False)
        for c in (paused, gone, steady):
            await c.register()
        reading = asyncio.Event()
        reading.set()
        delivered: Counter[str] = Counter()
        gone_stop = asyncio.Event()

        async def read(
            c: SubscriberClient, stop: asyncio.Event, gate: asyncio.Event | None
        ) -> None:
            surfaces = c.surfaces(stop)
            try:
                async for _ in surfaces:
                    delivered[c.subscriber_id] += 1
                    if gate is not None:
                        await gate.wait()  # the application stopped pulling: the client waits
            finally:
                await surfaces.aclose()  # type: ignore[attr-defined]  # an async generator

        stage.background(read(paused, stage.stopping, reading))
        stage.background(read(gone, gone_stop, None))
        stage.background(read(steady, stage.stopping, None))
        stage.worker("w1")
        holder: dict[str, SubscriberClient] = {}

        async def chaos() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not (
                delivered[paused.subscriber_id] and delivered[gone.subscriber_id]
            ):
                await asyncio.sleep(0.2)
            reading.clear()
            gone_stop.set()
            stage.faults["subscriber stopped reading"] += 1
            stage.faults["subscriber gone, back with nothing held"] += 1
            pause = seconds * 0.6
            await asyncio.sleep(pause)  # the fault itself: how long nobody reads
            stage.figures["seconds without reading"] = round(pause)
            stage.figures["frames delivered before the pause"] = delivered[paused.subscriber_id]
            back = client("gone", True)
            holder["back"] = back
            stage.background(read(back, stage.stopping, None))
            reading.set()

        await asyncio.gather(stage.publish(records, seconds=seconds), chaos())

        def views() -> dict[str, SubscriberView]:
            return {
                "paused": paused.view,
                "back": holder["back"].view,
                "steady": steady.view,
            }

        report = await stage.finish(views)
        report.figures["frames delivered to the paused subscriber"] = delivered[
            paused.subscriber_id
        ]
        return report
    finally:
        await stage.close(report)


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
    records = _corpus(size, seed, "storm")
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
        # Every request (the storm's and any a subscriber sent on its own) is answered: an
        # answer frame names its request (the a2ui-resync header). A request answered by two
        # owners across a rebalance gets two full frames, which is allowed (idempotent).
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
            moved = restores > stage.settings.partitions
            report.failures.append(
                f"{unanswered} of {fleet.resyncs_requested} resync requests never answered"
                + ("; the projector group rebalanced meanwhile (not injected)" if moved else "")
            )
        report.subscribers = subscribers
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
    records = _corpus(size, seed, "retry")
    lanes = _retried(records, rng, 3)
    seconds = max(15.0, size / 250)
    try:
        await stage.prepare()
        fleet = await stage.fleet(2)
        worker = stage.worker("w1")

        async def chaos() -> None:
            await _kill_after_progress(worker, rng)
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
    records = _corpus(size, seed, "sse")
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

        async def moved(before: int) -> None:
            """Wait (bounded) until streams ended and were resumed since ``before``."""
            deadline = time.monotonic() + 60
            while sum(r.resumes for r in readers) <= before and time.monotonic() < deadline:
                await asyncio.sleep(0.2)

        async def chaos() -> None:
            w1, w2, w3 = members
            await asyncio.gather(w1.wait_progress(timeout=60), w2.wait_progress(timeout=60))
            # the clients are attached: most runs have recorded events, streamed
            deadline = time.monotonic() + 60
            while (
                time.monotonic() < deadline
                and sum(bool(r.received) for r in readers) < len(readers) * 0.8
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
                await moved(before)
                alive = [m for m in members if m.alive()]
                await asyncio.gather(*(_wait_owning(m, timeout=60) for m in alive))
                await asyncio.gather(
                    *(m.wait_progress(beyond=m.outcomes_counted(), timeout=30) for m in alive)
                )
                resumed = sum(r.resumes for r in readers) - before
                stage.figures[f"SSE resumed after step {step} ({fault})"] = resumed

        # Each step: the join or the exit, the group's move (a SIGKILLed member after its 10 s
        # session), the streams resumed, progress; the stream must still flow through the last.
        seconds = max(100.0, size / 30)

        changed = asyncio.Event()  # the last owner change is done
        tail = len(records) // 10

        async def stream() -> None:
            """The records paced over ``seconds``; the last tenth (spread over every run) once
            the last owner change is done, so each client's final stream carries events."""
            flowing.set()
            try:
                await stage.publish(records[:-tail], seconds=seconds, chunk=10)
                flowing.clear()
                await changed.wait()
                await stage.publish(records[-tail:], seconds=5.0, chunk=10)
            finally:
                flowing.clear()

        async def faults() -> None:
            try:
                await chaos()
            finally:
                changed.set()

        await asyncio.gather(stream(), faults())
        report = await stage.finish(lambda: fleet.views)
        got = await read_outputs(broker.bootstrap, stage.topics["log"], stage.topics["deadletter"])
        await _check_sse(report, readers, got, timeout=120)
        return report
    finally:
        await stage.close(report)  # the readers (background tasks) first, then the workers
        await session.close()


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


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[Broker, int, Path, int], Awaitable[Report]]
    proves: str


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("sigkill-loop", sigkill_loop, "crash safety: SIGKILL repeatedly mid-stream"),
        Scenario("broker-restart", broker_restart, "the broker stops and restarts mid-stream"),
        Scenario("rebalance-kill", rebalance_kill, "a member killed during a rebalance"),
        Scenario("subscriber-pause", subscriber_pause, "subscribers stop reading, catch up"),
        Scenario("resync-storm", resync_storm, "many full-surface requests at once"),
        Scenario("producer-retries", producer_retries, "same correlationIds re-sent"),
        Scenario("zombie-member", zombie_member, "a member stopped past its session resumes"),
        Scenario(
            "sse-owner-change",
            sse_owner_change,
            "owners change under attached SSE clients, which resume",
        ),
    )
}
