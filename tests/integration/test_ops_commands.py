"""The operators' commands on a real broker, run exactly as operators run them: a worker
records and refuses a few envelopes, then `a2ui-stream log`, `deadletter list|show|replay` and
`runs delete` run as subprocesses and their output and effects are checked."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from app.core.admission.ops import run_events
from app.core.runlog.keys import partition_for_run, run_of_log_key
from app.core.runlog.topic_plan import TopicSpec
from app.devtools.fault_kit import (
    Observed,
    Published,
    WorkerProcess,
    apply_topics,
    create,
    data,
    envelope,
    observe,
    publish,
    wait_for_outcomes,
)
from app.shell.cli.broker import Broker
from app.shell.settings import Settings
from app.shell.worker.kafka_io import read_topic
from app.shell.worker.topics_admin import desired_for, ensure_topics

pytestmark = pytest.mark.broker


def _names(settings: Settings) -> dict[str, str]:
    return {s.id: s.name for s in desired_for(settings)}


def cli(broker: Broker, settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    """`a2ui-stream ARGS` in a subprocess with no terminal (stdin is /dev/null)."""
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP": broker.bootstrap,
        "A2UI_STREAM_TOPIC_PREFIX": settings.topic_prefix,
        "A2UI_STREAM_PARTITIONS": str(settings.partitions),
        "A2UI_STREAM_APP_ID": settings.app_id,
    }
    return subprocess.run(
        [sys.executable, "-m", "app.shell.cli", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def pub(rec: dict[str, Any]) -> Published:
    run = rec["runId"]
    return Published(run, run.encode(), orjson.dumps(rec), rec["envelope"]["correlationId"])


async def wait_until(
    broker: Broker,
    settings: Settings,
    done: Callable[[Observed], bool],
    *,
    timeout: float,
    worker: WorkerProcess,
) -> Observed:
    """Poll the log and dead letters until ``done`` holds (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        observed = await observe(broker, settings)
        if done(observed):
            return observed
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met after {timeout:.0f}s\n{worker.tail()}")
        await asyncio.sleep(0.5)


async def log_records_of(broker: Broker, settings: Settings, run: str) -> list[Any]:
    """The run's raw log records (tombstones included) on its partition, read_uncommitted."""
    records = await read_topic(
        broker.bootstrap,
        _names(settings)["log"],
        partitions=[partition_for_run(run, settings.partitions)],
    )
    return [r for r in records if r.key is not None and run_of_log_key(r.key) == run]


async def test_log_and_deadletter_list_show_replay(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    await apply_topics(broker, settings)
    names = _names(settings)
    run, other = "ops-run-a", "ops-run-b"
    good = [
        envelope(run, 0, [create("s1")], "s1"),
        envelope(run, 1, [data("s1", 1)], "s1"),
        envelope(run, 2, [data("s1", 2)], "s1"),
    ]
    no_surface = envelope(run, 3, [data("s2", 3)], "s2")  # envelope_invalid: s2 never created
    live_again = envelope(run, 4, [create("s1")], "s1")  # envelope_invalid: s1 is live
    shapeless = envelope(other, 0, [create("s9")], "s9")
    del shapeless["envelope"]["meta"]["source"]  # validation_error
    records = [pub(r) for r in (*good, no_surface, live_again, shapeless)]
    records.append(Published(other, other.encode(), b"\xff not json", None))
    # Published to the wrong partition (a custom partitioner): record_key_mismatch. Its bytes
    # are fine, so replaying them with key = runId is the fix.
    misplaced = envelope(other, 1, [create("s1")], "s1")
    wrong = (partition_for_run(other, settings.partitions) + 1) % settings.partitions

    worker = WorkerProcess(broker, settings, "ops1", tmp_path)
    worker.start()
    try:
        await publish(broker.bootstrap, names["admission"], records)
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(
                names["admission"], orjson.dumps(misplaced), key=other.encode(), partition=wrong
            )
        finally:
            await producer.stop()
        observed = await wait_for_outcomes(broker, settings, 3 + 5, timeout=120, workers=[worker])

        # -- log: the run's events in order, ids and kinds only ------------------------------
        lines = ok(cli(broker, settings, "log", run)).splitlines()
        assert [line.split()[0] for line in lines] == ["0", "1", "2"]
        assert [line.split()[6] for line in lines] == [
            f"causation=corr-{run}-{n}" for n in range(3)
        ]
        assert lines[0].endswith("surface=s1 [createSurface]")
        assert lines[1].endswith("surface=s1 [updateDataModel]")
        assert [
            ln.split()[0]
            for ln in ok(cli(broker, settings, "log", run, "--from", "1")).splitlines()
        ] == ["1", "2"]
        as_json = [
            orjson.loads(x) for x in ok(cli(broker, settings, "log", run, "--json")).splitlines()
        ]
        assert as_json == [e for e in observed.events if e["runId"] == run]
        empty = cli(broker, settings, "log", "no-such-run")
        assert ok(empty) == "" and "no recorded events" in empty.stderr

        # -- deadletter list ------------------------------------------------------------------
        def sources(code: str) -> set[str]:
            return {
                f"{d['source']['partition']}:{d['source']['offset']}"
                for d in observed.dead_letters
                if d["code"] == code
            }

        invalid = sources("envelope_invalid")
        assert len(invalid) == 2
        listed = ok(cli(broker, settings, "deadletter", "list", "--code", "envelope_invalid"))
        assert {line.split()[0] for line in listed.splitlines()} == invalid
        assert all(
            "  envelope_invalid  fold  " in line and f"  {run}  " in line
            for line in listed.splitlines()
        )
        everything = ok(cli(broker, settings, "deadletter", "list")).splitlines()
        assert len(everything) == len(observed.dead_letters) == 5
        of_other = [
            orjson.loads(x)
            for x in ok(
                cli(broker, settings, "deadletter", "list", "--run", other, "--json")
            ).splitlines()
        ]
        assert sorted(d["code"] for d in of_other) == ["record_key_mismatch", "validation_error"]

        # -- deadletter show: the record and the original bytes decoded ------------------------
        unreadable = next(d for d in observed.dead_letters if d["code"] == "record_not_utf8")
        where = f"{unreadable['source']['partition']}:{unreadable['source']['offset']}"
        shown = ok(cli(broker, settings, "deadletter", "show", where))
        assert '"code": "record_not_utf8"' in shown
        assert "not redacted" in shown and "\ufffd not json" in shown
        missing = cli(broker, settings, "deadletter", "show", "0:999999")
        assert missing.returncode == 2 and "no dead letter" in missing.stderr

        # -- deadletter replay --source P:O --file: a corrected record -> a new log record ------
        refused = next(
            d
            for d in observed.dead_letters
            if d["code"] == "envelope_invalid" and d["correlationId"] == f"corr-{run}-3"
        )
        at = f"{refused['source']['partition']}:{refused['source']['offset']}"
        # Same correlationId: a refusal caches nothing, so the corrected envelope is admitted.
        corrected = envelope(run, 3, [create("s2")], "s2")
        path = tmp_path / "corrected.json"
        path.write_bytes(orjson.dumps(corrected))
        dry = ok(
            cli(
                broker,
                settings,
                "deadletter",
                "replay",
                "--source",
                at,
                "--file",
                str(path),
                "--dry-run",
            )
        )
        assert dry.startswith(f"would re-submit {at} (corrected record")
        replayed = ok(
            cli(broker, settings, "deadletter", "replay", "--source", at, "--file", str(path))
        )
        assert replayed.startswith(f"re-submitted {at} (corrected record")
        assert f"as {names['admission']} {partition_for_run(run, settings.partitions)}:" in replayed

        # -- deadletter replay --code: the original bytes, now keyed by runId -------------------
        by_code = ok(cli(broker, settings, "deadletter", "replay", "--code", "record_key_mismatch"))
        assert by_code.startswith("re-submitted") and "(original bytes" in by_code

        observed = await wait_until(
            broker,
            settings,
            lambda o: (
                {(e["runId"], e["causationId"]) for e in o.events}
                >= {(run, f"corr-{run}-3"), (other, f"corr-{other}-1")}
            ),
            timeout=90,
            worker=worker,
        )
        event = next(e for e in observed.events if e["causationId"] == f"corr-{run}-3")
        assert event["sequence"] == 3
        lines = ok(cli(broker, settings, "log", run)).splitlines()
        assert lines[-1].startswith("3 ") and lines[-1].endswith("surface=s2 [createSurface]")
    finally:
        worker.stop()


async def test_replay_refuses_a_redacted_original(broker: Broker, settings: Settings) -> None:
    """A dead letter whose original was SR-1 redacted is not replayed (its marker would be
    recorded, not the value); the message names the --file way instead."""
    await apply_topics(broker, settings)
    names = _names(settings)
    letter = {
        "code": "validation_error",
        "rule": "shape",
        "path": "",
        "message": "m",
        "details": {},
        "runId": "r",
        "correlationId": None,
        "source": {"topic": names["admission"], "partition": 0, "offset": 5},
        "timestamp": "2026-11-30T05:00:00.000Z",
        "original": {
            "base64": "W1JFREFDVEVEOmtd",
            "sha256": "0" * 64,
            "size": 12,
            "redacted": True,
        },
    }
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(
            names["deadletter"], orjson.dumps(letter), key=b"r", partition=0
        )
    finally:
        await producer.stop()
    single = cli(broker, settings, "deadletter", "replay", "--source", "0:5")
    assert single.returncode == 2
    assert "SR-1 redacted" in single.stderr and "--file" in single.stderr
    bulk = cli(broker, settings, "deadletter", "replay", "--code", "validation_error")
    assert bulk.returncode == 1
    assert "not replayed 0:5" in bulk.stderr and bulk.stdout == ""
    shown = ok(cli(broker, settings, "deadletter", "show", "0:5"))
    assert "REDACTED" in shown and "[REDACTED:k]" in shown
    admission = await read_topic(broker.bootstrap, names["admission"])
    assert admission == [], "nothing may be re-submitted"


async def _record_a_run(
    broker: Broker, settings: Settings, worker: WorkerProcess, run: str, n: int
) -> None:
    names = _names(settings)
    records = [pub(envelope(run, 0, [create("s")], "s"))]
    records += [pub(envelope(run, i, [data("s", i)], "s")) for i in range(1, n)]
    keep = "ops-keep"  # another run: never touched by the delete
    records.append(pub(envelope(keep, 0, [create("s")], "s")))
    await publish(broker.bootstrap, names["admission"], records)
    await wait_for_outcomes(broker, settings, n + 1, timeout=120, workers=[worker])


async def test_runs_delete_writes_one_tombstone_per_event(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    await apply_topics(broker, settings)
    run = "ops-delete-me"
    worker = WorkerProcess(broker, settings, "ops2", tmp_path)
    worker.start()
    try:
        await _record_a_run(broker, settings, worker, run, 4)
        # No terminal and no --yes: refused, nothing written.
        refused = cli(broker, settings, "runs", "delete", run)
        assert refused.returncode == 2 and "--yes" in refused.stderr
        assert all(r.value is not None for r in await log_records_of(broker, settings, run))

        out = ok(cli(broker, settings, "runs", "delete", run, "--yes"))
        assert f"run {run}: wrote 4 tombstones" in out
        raw = await log_records_of(broker, settings, run)
        tombstones = [r.key for r in raw if r.value is None]
        assert sorted(tombstones) == sorted(f"{run}#{i}".encode() for i in range(4))
        gone = cli(broker, settings, "log", run)
        assert ok(gone) == "" and "no recorded events" in gone.stderr
        assert ok(cli(broker, settings, "log", "ops-keep")).startswith("0 ")
        # ... and the validator's run-state changelog forgets the run too (issue 15 item 1)
        state = await read_topic(
            broker.bootstrap,
            _names(settings)["runstate"],
            partitions=[partition_for_run(run, settings.partitions)],
        )
        assert [r.value for r in state if r.key == run.encode()][-1] is None
        again = ok(cli(broker, settings, "runs", "delete", run, "--yes"))
        assert "nothing to delete" in again

        # A worker that restores the partition drops the run: it starts again at sequence 0
        # (docs/operations.md), and its old correlationIds are no longer remembered.
        worker.stop()
        worker.start()
        await publish(
            broker.bootstrap,
            _names(settings)["admission"],
            [pub(envelope(run, 0, [create("s")], "s"))],
        )
        deadline = time.monotonic() + 120
        while not run_events(
            [(r.key, r.value) for r in await log_records_of(broker, settings, run)], run
        ):
            assert time.monotonic() < deadline, f"no new event for {run}\n{worker.tail()}"
            await asyncio.sleep(0.5)
        lines = ok(cli(broker, settings, "log", run)).splitlines()
        assert len(lines) == 1 and lines[0].startswith("0 ")
        assert f"causation=corr-{run}-0" in lines[0]
    finally:
        worker.stop()


def _fast_compacting_log(settings: Settings) -> TopicSpec:
    # As tests/integration/test_kafka_features.py::_log_spec: the real per-run log definition
    # with small segments, so the cleaner runs within seconds.
    spec = next(s for s in desired_for(settings) if s.id == "log")
    fast = {"segment.ms": "200", "min.cleanable.dirty.ratio": "0.001", "delete.retention.ms": "100"}
    return replace(spec, config={**spec.config, **fast})


@pytest.mark.needs_compaction
async def test_compaction_removes_a_deleted_run(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    log_spec = _fast_compacting_log(settings)
    await ensure_topics(broker.bootstrap, [log_spec])  # before the worker creates the rest
    await apply_topics(broker, settings)
    run = "ops-compact-me"
    partition = partition_for_run(run, settings.partitions)
    worker = WorkerProcess(broker, settings, "ops3", tmp_path)
    worker.start()
    try:
        await _record_a_run(broker, settings, worker, run, 5)
    finally:
        worker.stop()
    out = ok(cli(broker, settings, "runs", "delete", run, "--yes"))
    assert "wrote 5 tombstones" in out
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    await producer.start()
    try:
        deadline = time.monotonic() + 90
        remaining = await log_records_of(broker, settings, run)
        assert len(remaining) == 10  # 5 events + 5 tombstones, until the cleaner runs
        filler = 0
        while remaining:
            assert time.monotonic() < deadline, (
                f"{len(remaining)} records of the deleted run are still in the log after 90s"
            )
            # Appends roll the active segment (segment.ms); the cleaner reads closed ones only.
            # The filler is itself a tombstone, so it never becomes a recorded event.
            await producer.send_and_wait(
                log_spec.name, None, key=f"ops-filler#{filler}".encode(), partition=partition
            )
            filler += 1
            await asyncio.sleep(0.5)  # the polling interval; the wait is on the condition
            remaining = await log_records_of(broker, settings, run)
    finally:
        await producer.stop()
    keep = ok(cli(broker, settings, "log", "ops-keep"))
    assert keep.startswith("0 "), "compaction must leave the other runs' events"
