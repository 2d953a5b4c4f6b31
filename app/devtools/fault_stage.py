"""The stage every fault scenario runs on (``Stage``: its own topics, worker processes,
subscribers, paced publishing, settling and the accounting) and what a scenario reports
(``Report``). The scenarios are in fault_scenarios_members, _subscribers and _broker; the
registry in fault_scenarios.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.core.projection.subscriber_view import SubscriberView
from app.devtools.fault_accounting import (
    Accounting,
    Outputs,
    committed_offsets,
    oracle,
    read_outputs,
    tally,
)
from app.devtools.fault_kit import (
    RULES,
    Published,
    WorkerProcess,
    apply_topics,
    corpus,
    publish_paced,
    topic_names,
)
from app.devtools.fault_subscribers import SubscriberFleet, wait_converged
from app.shell.cli.broker import Broker
from app.shell.settings import load_settings
from app.shell.worker.faust_app import policy_from
from app.shell.worker.kafka_io import read_topic

__all__ = ["RESTART_SECONDS", "Report", "Stage", "kill_after_progress", "scenario_corpus"]


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


def scenario_corpus(size: int, seed: int, prefix: str) -> list[Published]:
    """About ``size`` records over up to 60 runs; each scenario (``prefix``) draws its own."""
    runs = max(4, min(60, size // 80))
    mixed = zlib.crc32(prefix.encode()) % 1000 + 1000 * seed
    return corpus(runs=runs, per_run=max(10, size // runs), seed=mixed, prefix=prefix)


# Measured on a loaded 2-core machine: a SIGKILLed worker is deciding records again 8-14 s
# after its restart (Python and Faust start-up, then the group waits for the dead member's
# session to expire). Scenarios pace their publication so that each fault lands mid-stream.
RESTART_SECONDS = 12.0


async def kill_after_progress(
    worker: WorkerProcess, rng: random.Random, *, timeout: float = 30.0
) -> None:
    """SIGKILL ``worker`` a moment after it decided records in this incarnation (or after
    ``timeout`` if it has nothing to decide)."""
    await worker.wait_progress(timeout=timeout)
    await asyncio.sleep(rng.uniform(0.1, 1.2))
    worker.kill()
