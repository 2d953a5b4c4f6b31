"""Fault scenarios that break the group's members and who owns what: a worker SIGKILLed in a
loop, a member killed during a rebalance, a zombie member (SIGSTOPped past its session,
resumed with its transaction open).
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

from app.devtools.fault_kit import (
    WorkerProcess,
    open_transactions,
)
from app.devtools.fault_stage import (
    RESTART_SECONDS,
    Report,
    Stage,
    kill_after_progress,
    scenario_corpus,
)
from app.shell.cli.broker import Broker

__all__ = [
    "STOP_SEARCH_SECONDS",
    "ZOMBIE_STOP_SECONDS",
    "rebalance_kill",
    "sigkill_loop",
    "zombie_member",
]


async def sigkill_loop(broker: Broker, size: int, tmp: Path, seed: int = 1) -> Report:
    """The worker is SIGKILLed repeatedly mid-stream and restarted each time."""
    stage = Stage(broker, tmp, "sigkill-loop", size)
    report: Report | None = None
    kills = max(3, size // 5000)
    records = scenario_corpus(size, seed, "kill")
    rng = random.Random(seed)
    try:
        await stage.prepare()
        fleet = await stage.fleet(2)
        worker = stage.worker("w1")

        async def chaos() -> None:
            for _ in range(kills):
                await kill_after_progress(worker, rng)
                stage.faults["worker SIGKILL"] += 1
                worker.start()

        seconds = kills * RESTART_SECONDS + 5.0
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
    records = scenario_corpus(size, seed, "rebalance")
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
    records = scenario_corpus(size, seed, "zombie")
    rng = random.Random(seed)
    try:
        await stage.prepare()
        fleet = await stage.fleet(2)
        members = (stage.worker("w1"), stage.worker("w2"))
        # Each round: both members' progress, the stop (session timeout, the rebalance, the
        # restore, progress), the zombie's return and rejoin; the stream flows all along.
        seconds = rounds * 50.0 + 10.0
        # Small chunks: a steady stream, so that a member is often inside a transaction.
        await asyncio.gather(
            stage.publish(records, seconds=seconds, chunk=5),
            _zombie_rounds(stage, members, rounds, rng),
        )
        report = await stage.finish(lambda: fleet.views)
        report.figures["fenced (the validator's log)"] = sum(m.log_count(_FENCED) for m in members)
        return report
    finally:
        await stage.close(report)


async def _zombie_rounds(
    stage: Stage, members: tuple[WorkerProcess, WorkerProcess], rounds: int, rng: random.Random
) -> None:
    """The chaos of ``zombie_member``: each round, one member stopped past its session
    timeout while the other takes its partitions over, then resumed."""
    partitions = stage.settings.partitions
    stopped_for: list[float] = []
    for n in range(rounds):
        victim, other = members[n % 2], members[1 - n % 2]
        await asyncio.gather(*(m.wait_progress(timeout=60) for m in members))
        await _stop_holding_a_transaction(stage, victim, other, rng)
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


async def _stop_holding_a_transaction(
    stage: Stage, victim: WorkerProcess, other: WorkerProcess, rng: random.Random
) -> None:
    """SIGSTOP ``victim`` at a moment when the broker says it holds an open
    transaction on one of its partitions (records written, no commit yet; asked while
    it stands still). A stop that finds none is undone at once (a tenth of a second,
    far below the session timeout) and tried again; past ``STOP_SEARCH_SECONDS`` it
    stays stopped anyway (a stop mid-stream, counted as such)."""
    partitions = stage.settings.partitions
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
            held = await open_transactions(stage.broker.bootstrap, topics, sorted(owned))
            if held or time.monotonic() > deadline:
                break
            victim.resume()
        await asyncio.sleep(rng.uniform(0.0, 0.05))
    stage.figures["stop attempts"] += attempts
    if held:
        stage.figures["stops holding an open transaction"] += 1
