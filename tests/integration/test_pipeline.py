"""The pipeline on a real broker: every admission record ends as exactly one log entry or one
dead letter (or an E2 deduplication), per-run order holds, across SIGKILLs and rebalances.

Each test checks the accounting against the oracle (the core deciding the same records in
publication order) and prints `published = admitted + refused + deduplicated`.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import orjson
import pytest

from app.devtools.fault_kit import (
    Published,
    WorkerProcess,
    account,
    apply_topics,
    corpus,
    create,
    data,
    envelope,
    expected_outcomes,
    observe,
    publish,
    wait_for_outcomes,
)
from app.shell.cli.broker import Broker
from app.shell.settings import Settings
from app.shell.worker.topics_admin import desired_for
from tests.integration.pipeline_kit import observe_settled

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def _admission(settings: Settings) -> str:
    return next(s.name for s in desired_for(settings) if s.id == "admission")


async def _both_own_partitions(
    first: WorkerProcess, second: WorkerProcess, partitions: int, timeout: float = 120
) -> None:
    """Wait (bounded) until the group has split the admission partitions between the two
    workers: each has restored a share, and together they hold all of them."""
    deadline = time.monotonic() + timeout
    while True:
        mine, theirs = await asyncio.gather(
            asyncio.to_thread(first.partitions), asyncio.to_thread(second.partitions)
        )
        if mine and theirs and len(set(mine) | set(theirs)) == partitions:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"no split after {timeout:.0f}s: w1 {mine}, w2 {theirs}\n{second.tail()}"
            )
        await asyncio.sleep(0.2)


async def test_every_record_has_exactly_one_outcome(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    await apply_topics(broker, settings)
    records = corpus(runs=6, per_run=60, seed=1)
    expected = expected_outcomes(records)
    worker = WorkerProcess(broker, settings, "w1", tmp_path)
    worker.start()
    try:
        await publish(broker.bootstrap, _admission(settings), records)
        observed = await wait_for_outcomes(
            broker,
            settings,
            sum(map(len, expected.admitted.values())) + expected.refused,
            timeout=120,
            workers=[worker],
        )
        print(account(records, expected, observed))
        metrics = worker.metrics()
        assert f"a2ui_admitted_total {len(observed.events)}" in metrics
        assert f"a2ui_deduplicated_total {expected.deduplicated}" in metrics
    finally:
        worker.stop()
    codes = {d["code"] for d in observed.dead_letters}
    assert {"record_not_utf8", "record_not_json", "envelope_invalid", "validation_error"} <= codes
    for letter in observed.dead_letters:
        assert letter["rule"] and letter["message"] and letter["source"]["topic"]
        assert letter["path"] == "" or letter["path"].startswith("/")


async def test_producer_retries_never_create_a_second_log_record(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    await apply_topics(broker, settings)
    run = "run-retries"
    first = envelope(run, 0, [create("s")], "s")
    second = envelope(run, 1, [data("s", 1)], "s")
    records = [
        Published(run, run.encode(), orjson.dumps(rec), rec["envelope"]["correlationId"])
        for rec in (first, first, second, first, second, second)
    ]
    worker = WorkerProcess(broker, settings, "w1", tmp_path)
    worker.start()
    try:
        await publish(broker.bootstrap, _admission(settings), records)
        expected = expected_outcomes(records)
        observed = await wait_for_outcomes(broker, settings, 2, timeout=120, workers=[worker])
        # Give any (wrong) second record time to show up: wait until the worker has counted
        # all six records, then look again.
        for _ in range(120):
            if "a2ui_deduplicated_total 4" in worker.metrics():
                break
            await asyncio.sleep(0.5)
        observed = await observe(broker, settings)
    finally:
        worker.stop()
    assert [e["causationId"] for e in observed.events] == [
        first["envelope"]["correlationId"],
        second["envelope"]["correlationId"],
    ]
    assert [e["sequence"] for e in observed.events] == [0, 1]
    print(account(records, expected, observed))


async def test_crash_safety_under_sigkill(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    """20,000 mixed envelopes across 50 runs while the worker is SIGKILLed and restarted."""
    await apply_topics(broker, settings)
    records = corpus(runs=50, per_run=400, seed=7)
    expected = expected_outcomes(records)
    total = sum(map(len, expected.admitted.values())) + expected.refused
    worker = WorkerProcess(broker, settings, "w1", tmp_path)
    worker.start()
    rng = random.Random(11)
    kills = 0
    published_at = -1  # kills when the last record had been published

    async def killer() -> None:
        nonlocal kills
        while True:
            await asyncio.sleep(rng.uniform(4.0, 9.0))
            worker.kill()
            kills += 1
            worker.start()

    chaos = asyncio.create_task(killer())
    try:
        await publish(broker.bootstrap, _admission(settings), records, pace=0.05)
        published_at = kills
        # Keep killing while the backlog drains (two more kills after the last record was
        # published), then let the last incarnation finish.
        deadline = time.monotonic() + 120
        while kills < published_at + 2:
            assert time.monotonic() < deadline, f"{kills - published_at} kills after publishing"
            await asyncio.sleep(0.2)
        chaos.cancel()
        await wait_for_outcomes(broker, settings, total, timeout=400, workers=[worker])
        # Every published record decided and committed, no transaction left open: any
        # duplicate is in this read, and the accounting would catch it.
        observed = await observe_settled(broker, settings, workers=[worker])
    finally:
        chaos.cancel()
        worker.stop()
    assert kills >= 2, "the test must actually kill the worker"
    print(
        f"SIGKILLs: {kills} ({kills - published_at} after publishing); "
        + account(records, expected, observed)
    )


async def test_two_workers_keep_per_run_order_across_a_rebalance(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    await apply_topics(broker, settings)
    records = corpus(runs=12, per_run=150, seed=3)
    expected = expected_outcomes(records)
    total = sum(map(len, expected.admitted.values())) + expected.refused
    first = WorkerProcess(broker, settings, "w1", tmp_path)
    second = WorkerProcess(broker, settings, "w2", tmp_path)
    first.start()
    try:
        half = len(records) // 2
        await publish(broker.bootstrap, _admission(settings), records[:half])
        second.start()  # joins the group: partitions move between workers mid-stream
        await publish(broker.bootstrap, _admission(settings), records[half:], pace=0.2)
        # The second has joined: the group split the partitions between the two workers.
        await _both_own_partitions(first, second, settings.partitions)
        first.stop()  # and back again: everything moves to the second worker
        observed = await wait_for_outcomes(
            broker, settings, total, timeout=240, workers=[first, second]
        )
    finally:
        first.stop()
        second.stop()
    print(account(records, expected, observed))


async def test_publish_command_prints_each_outcome(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    import subprocess
    import sys

    await apply_topics(broker, settings)
    run = "run-publish"
    good = envelope(run, 0, [create("s")], "s")
    bad = envelope(run, 1, [create("s")], "s")  # createSurface for a live surface: fold
    path = tmp_path / "records.jsonl"
    path.write_bytes(orjson.dumps(good) + b"\n" + orjson.dumps(bad) + b"\n")
    worker = WorkerProcess(broker, settings, "w1", tmp_path)
    worker.start()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "app.shell.cli", "publish", str(path), "--wait", "90"],
            env=worker.env(),
            capture_output=True,
            text=True,
            timeout=150,
            check=False,
        )
    finally:
        worker.stop()
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"0: admitted  run={run} sequence=0"
    assert lines[1].startswith("1: refused   envelope_invalid rule=fold path=/envelope/payload")


async def test_an_oversize_record_is_refused_before_parsing_with_its_bytes_kept(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    import base64
    import hashlib

    from aiokafka import AIOKafkaProducer

    await apply_topics(broker, settings)
    run = "run-oversize"
    huge = b'{"runId": "run-oversize", "pad": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    small = envelope(run, 1, [create("s")], "s")
    producer = AIOKafkaProducer(
        bootstrap_servers=broker.bootstrap, max_request_size=5 * 1024 * 1024
    )
    await producer.start()
    try:
        await producer.send_and_wait(_admission(settings), huge, key=run.encode())
        await producer.send_and_wait(_admission(settings), orjson.dumps(small), key=run.encode())
    finally:
        await producer.stop()
    worker = WorkerProcess(broker, settings, "w1", tmp_path)
    worker.start()
    try:
        observed = await wait_for_outcomes(broker, settings, 2, timeout=120, workers=[worker])
    finally:
        worker.stop()
    [letter] = observed.dead_letters
    assert letter["code"] == "record_too_large" and letter["rule"] == "record-size"
    assert letter["original"]["size"] == len(huge)
    assert letter["original"]["sha256"] == hashlib.sha256(huge).hexdigest()
    assert base64.b64decode(letter["original"]["base64"]) == huge
    assert [e["causationId"] for e in observed.events] == [small["envelope"]["correlationId"]]


@pytest.mark.needs_topic_configs
async def test_a_record_the_log_will_not_take_is_dead_lettered_and_does_not_stall(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    from dataclasses import replace as _replace

    from app.shell.worker.topics_admin import ensure_topics

    # A log topic that takes at most 20 kB per record: a valid 60 kB envelope is admitted by
    # the core but its recorded event cannot be written. It must not block the records after it.
    specs = [
        _replace(s, config={**s.config, "max.message.bytes": "20000"}) if s.id == "log" else s
        for s in desired_for(settings)
    ]
    await ensure_topics(broker.bootstrap, specs)
    run = "run-unrecordable"
    big = envelope(
        run,
        0,
        [
            create("s"),
            {
                "version": "v0.9",
                "updateComponents": {
                    "surfaceId": "s",
                    "components": [
                        {"id": f"t{i}", "component": "Text", "text": "x" * 4000} for i in range(15)
                    ],
                },
            },
        ],
        "s",
    )
    after = envelope(run, 1, [create("s2")], "s2")
    records = [
        Published(run, run.encode(), orjson.dumps(r), r["envelope"]["correlationId"])
        for r in (big, after)
    ]
    worker = WorkerProcess(broker, settings, "w1", tmp_path)
    worker.start()
    try:
        await publish(broker.bootstrap, _admission(settings), records)
        observed = await wait_for_outcomes(broker, settings, 2, timeout=180, workers=[worker])
    finally:
        worker.stop()
    [letter] = observed.dead_letters
    assert letter["code"] == "record_unrecordable"
    assert letter["original"]["size"] == len(records[0].value)
    assert letter["original"]["base64"] == ""
    # The next record of the run was still admitted, at sequence 0 (nothing was recorded before).
    assert [(e["causationId"], e["sequence"]) for e in observed.events] == [
        (after["envelope"]["correlationId"], 0)
    ]
