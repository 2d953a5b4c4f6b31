"""The run-state changelog on a real broker (issue 15 item 1): a restarted worker restores its
validator's partitions from the changelog (a record per run and a checkpoint per partition)
and only the log tail past the checkpoint, not the whole log, and decides on exactly as the
oracle does."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from app.devtools.fault_kit import (
    WorkerProcess,
    account,
    apply_topics,
    corpus,
    expected_outcomes,
    publish,
    wait_for_outcomes,
)
from app.shell.cli.broker import Broker
from app.shell.settings import Settings
from app.shell.worker.topics_admin import desired_for
from tests.integration.pipeline_kit import observe_settled
from tests.integration.test_ops_commands import cli

pytestmark = [pytest.mark.broker, pytest.mark.slow]


async def _restored(worker: WorkerProcess, partitions: int, timeout: float = 120) -> None:
    """Every partition restored by ``worker``'s validator (bounded)."""
    deadline = time.monotonic() + timeout
    while len(worker.partitions()) < partitions:
        if time.monotonic() > deadline:
            raise AssertionError(f"partitions not restored in {timeout:.0f}s\n{worker.tail()}")
        await asyncio.sleep(0.5)


def _sample(worker: WorkerProcess, name: str, label: str) -> int:
    for line in worker.metrics().splitlines():
        if line.startswith(f"{name}{{{label}}} "):
            return int(float(line.rsplit(" ", 1)[1]))
    raise AssertionError(f"{name}{{{label}}} not on /metrics")


async def test_a_restart_restores_from_the_changelog_and_decides_on(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    await apply_topics(broker, settings)
    admission = next(s.name for s in desired_for(settings) if s.id == "admission")
    records = corpus(runs=12, per_run=200, seed=21)
    half = len(records) // 2
    first_half = expected_outcomes(records[:half])
    worker = WorkerProcess(broker, settings, "w1", tmp_path)
    worker.start()
    try:
        await publish(broker.bootstrap, admission, records[:half])
        observed = await wait_for_outcomes(
            broker,
            settings,
            sum(map(len, first_half.admitted.values())) + first_half.refused,
            timeout=180,
            workers=[worker],
        )
        logged = len(observed.events)
        assert _sample(worker, "a2ui_validator_restores_total", 'way="replay"') >= 1
        worker.stop()
        worker.start()  # the same worker again: it restores every partition
        await _restored(worker, settings.partitions)
        assert _sample(worker, "a2ui_validator_restores_total", 'way="replay"') == 0
        by_changelog = _sample(worker, "a2ui_validator_restores_total", 'way="changelog"')
        assert by_changelog == settings.partitions
        read = _sample(worker, "a2ui_validator_restore_records_total", 'topic="log"')
        print(f"restore read {read} of {logged} log records")
        assert read < logged / 4  # the tail past the checkpoints, not the log
        await publish(broker.bootstrap, admission, records[half:])
        expected = expected_outcomes(records)
        observed = await wait_for_outcomes(
            broker,
            settings,
            sum(map(len, expected.admitted.values())) + expected.refused,
            timeout=180,
            workers=[worker],
        )
        # Every published record decided and committed, no transaction left open: any
        # duplicate is in this read, and the accounting would catch it.
        print(account(records, expected, await observe_settled(broker, settings, workers=[worker])))
        # `state rebuild` refuses while a worker runs, rewrites the changelog once they stop,
        # and a worker restores from what it wrote.
        refused = cli(broker, settings, "state", "rebuild", "--yes")
        assert refused.returncode == 2 and "stop every worker" in refused.stderr
        worker.stop()
        rebuilt = cli(broker, settings, "state", "rebuild", "--yes")
        assert rebuilt.returncode == 0, rebuilt.stderr
        assert rebuilt.stdout.count("partition ") == settings.partitions
        assert "Traceback" not in rebuilt.stderr
        worker.start()
        await _restored(worker, settings.partitions)
        assert _sample(worker, "a2ui_validator_restores_total", 'way="changelog"') == 3
        assert _sample(worker, "a2ui_validator_restore_records_total", 'topic="log"') == 0
    finally:
        worker.stop()
    assert worker.crashes == 0
