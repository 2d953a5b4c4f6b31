"""The read side's tail of the owned partitions (app.shell.worker.run_index) against the harness
broker: read-your-writes, restore from the store's checkpoint, and revocation."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from app.core.runlog.keys import log_key, partition_for_run
from app.shell.cli.broker import Broker
from app.shell.settings import Settings
from app.shell.worker.run_index import PartitionUnsure, RunIndex
from app.shell.worker.topics_admin import desired_for, ensure_topics

pytestmark = pytest.mark.broker

RUN = "tenant/run-index"


async def _topics(bootstrap: str, settings: Settings) -> dict[str, str]:
    specs = [s for s in desired_for(settings) if s.id in ("log", "deadletter")]
    await ensure_topics(bootstrap, specs)
    return {s.id: s.name for s in specs}


@contextlib.asynccontextmanager
async def _tailing(
    bootstrap: str, names: dict[str, str], store: Path, partitions: set[int]
) -> AsyncIterator[RunIndex]:
    index = RunIndex(bootstrap, names["log"], names["deadletter"], store)
    await index.start()
    stopping = asyncio.Event()
    tail = asyncio.create_task(index.run(stopping))
    index.assigned(frozenset(partitions))
    try:
        for _ in range(300):
            if partitions <= index.ready_partitions:
                break
            await asyncio.sleep(0.1)
        assert partitions <= index.ready_partitions
        yield index
    finally:
        stopping.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(tail, 5)
        await index.stop()


async def _append(bootstrap: str, topic: str, run: str, sequences: range, partitions: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for sequence in sequences:
            event = {"type": "ui.a2ui-surface", "runId": run, "sequence": sequence, "payload": {}}
            await producer.send_and_wait(
                topic,
                orjson.dumps(event),
                key=log_key(run, sequence),
                partition=partition_for_run(run, partitions),
            )
    finally:
        await producer.stop()


async def test_lookup_reads_to_the_log_end_before_answering_not_found(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    names = await _topics(broker.bootstrap, settings)
    partition = partition_for_run(RUN, settings.partitions)
    async with _tailing(broker.bootstrap, names, tmp_path / "store", {partition}) as index:
        await _append(broker.bootstrap, names["log"], RUN, range(1), settings.partitions)
        # acknowledged a moment ago: a lookup reads the partition to its end before answering
        looked = await index.lookup(RUN, timeout=30)
        assert looked is not None and looked.last_sequence == 0
        loop = asyncio.get_running_loop()
        started = loop.time()
        absent = "tenant/never-recorded"
        if partition_for_run(absent, settings.partitions) == partition:
            assert await index.lookup(absent, timeout=30) is None
            assert loop.time() - started < 15
        # a run of a partition this worker does not own is never answered from here
        other = next(
            f"tenant/o-{i}"
            for i in range(1000)
            if partition_for_run(f"tenant/o-{i}", settings.partitions) != partition
        )
        assert index.get(other) is None


async def test_a_restarted_index_resumes_from_its_checkpoint(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    """Issue 15: a worker's restore reads what it has not stored yet, not the whole log."""
    names = await _topics(broker.bootstrap, settings)
    partition = partition_for_run(RUN, settings.partitions)
    store = tmp_path / "store"
    await _append(broker.bootstrap, names["log"], RUN, range(50), settings.partitions)
    async with _tailing(broker.bootstrap, names, store, {partition}) as first:
        assert first.records_read == 50
        run = first.get(RUN)
        assert run is not None and run.last_sequence == 49
    await _append(broker.bootstrap, names["log"], RUN, range(50, 60), settings.partitions)
    async with _tailing(broker.bootstrap, names, store, {partition}) as second:
        assert second.records_read == 10  # from the checkpoint, not from the beginning
        run = second.get(RUN)
        assert run is not None and [e.sequence for e in run.events] == list(range(60))
        assert run.events[59].event["sequence"] == 59  # decoded on first use


async def test_a_revoked_partition_leaves_and_its_readers_are_told(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    names = await _topics(broker.bootstrap, settings)
    partition = partition_for_run(RUN, settings.partitions)
    await _append(broker.bootstrap, names["log"], RUN, range(3), settings.partitions)
    async with _tailing(broker.bootstrap, names, tmp_path / "store", {partition}) as index:
        held = index.get(RUN)
        assert held is not None
        changed = held.changed
        index.revoked(frozenset({partition}))
        assert changed.is_set() and held.moved  # an SSE stream on it ends; its client resumes
        assert index.get(RUN) is None and partition not in index.ready_partitions
        index.assigned(frozenset({partition}))  # back again: served once read up to the end
        for _ in range(300):
            if partition in index.ready_partitions:
                break
            await asyncio.sleep(0.1)
        again = index.get(RUN)
        assert again is not None and again.last_sequence == 2 and not again.moved


async def test_a_partition_revoked_while_a_lookup_waits_is_unsure_not_absent(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    """A rebalance during a lookup: the run may well be recorded (its new owner has it), so
    the answer is PartitionUnsure (HTTP 503 with Retry-After), never None (HTTP 404). Before:
    None, and bench scale's cancel of a recorded run answered 404 in CI."""
    names = await _topics(broker.bootstrap, settings)
    partition = partition_for_run(RUN, settings.partitions)
    await _append(broker.bootstrap, names["log"], RUN, range(1), settings.partitions)
    absent = next(
        f"tenant/a-{i}"
        for i in range(1000)
        if partition_for_run(f"tenant/a-{i}", settings.partitions) == partition
    )
    async with _tailing(broker.bootstrap, names, tmp_path / "store", {partition}) as index:
        waiting = asyncio.create_task(index.lookup(absent, timeout=30))
        await asyncio.sleep(0)  # the lookup is waiting on the partition's end offset
        index.revoked(frozenset({partition}))
        with pytest.raises(PartitionUnsure):
            await waiting
        with pytest.raises(PartitionUnsure):  # and a lookup after it, while away
            await index.lookup(RUN, timeout=1)


async def test_a_run_committed_a_moment_ago_is_found_not_absent(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    """Kafka answers a transaction's commit once the coordinator has logged it; the markers
    that make its records readable ``read_committed`` are written to the partitions after
    that (KIP-98), so for a moment the last stable offset still stops before them (measured:
    68 of 200 end-offset reads right after ``commit_transaction``). A lookup reads up to the
    partition's high watermark as of the request, so a run whose only records are in such a
    transaction (or one still open) is waited for, never answered "not recorded". Before:
    None at once, and bench scale's cancel of a run the validator had decided answered 404
    (2 of 4 CI runs, one worker, no rebalance)."""
    names = await _topics(broker.bootstrap, settings)
    run_id = "tenant/run-index-in-flight"
    partition = partition_for_run(run_id, settings.partitions)
    async with _tailing(broker.bootstrap, names, tmp_path / "store", {partition}) as index:
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, transactional_id=f"in-flight-{tmp_path.name}"
        )
        await producer.start()
        try:
            await producer.begin_transaction()
            event = {"type": "ui.a2ui-surface", "runId": run_id, "sequence": 0, "payload": {}}
            await producer.send_and_wait(
                names["log"], orjson.dumps(event), key=log_key(run_id, 0), partition=partition
            )
            waiting = asyncio.create_task(index.lookup(run_id, timeout=30))
            await asyncio.sleep(1.0)  # the tail has read to the last stable offset by now
            assert not waiting.done()
            await producer.commit_transaction()
            looked = await waiting
            assert looked is not None and looked.last_sequence == 0
            # a transaction that stays open past the lookup's wait: it cannot say
            await producer.begin_transaction()
            other = next(
                f"tenant/in-flight-{i}"
                for i in range(1000)
                if partition_for_run(f"tenant/in-flight-{i}", settings.partitions) == partition
            )
            await producer.send_and_wait(
                names["log"],
                orjson.dumps(
                    {"type": "ui.a2ui-surface", "runId": other, "sequence": 0, "payload": {}}
                ),
                key=log_key(other, 0),
                partition=partition,
            )
            with pytest.raises(PartitionUnsure):
                await index.lookup(other, timeout=1.5)
            await producer.abort_transaction()
            assert await index.lookup(other, timeout=30) is None  # aborted: never recorded
        finally:
            await producer.stop()
