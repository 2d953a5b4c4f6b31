"""Broker features our guarantees rest on, proven against the broker the harness started.

On tansu these skip by name (it neither compacts nor runs transactions); in CI, against Apache
Kafka, a skip here is a failure (A2UI_STREAM_REQUIRE_KAFKA=1).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from aiokafka import AIOKafkaProducer

from app.core.runlog.keys import log_key, partition_for_run
from app.core.runlog.topic_plan import TopicSpec
from app.shell.cli.broker import Broker
from app.shell.settings import Settings
from app.shell.worker.kafka_io import read_topic
from app.shell.worker.topics_admin import desired_for, ensure_topics

pytestmark = pytest.mark.broker


async def _read_all(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> list:
    return await read_topic(bootstrap, topic, isolation=isolation)


def _log_spec(settings: Settings) -> TopicSpec:
    spec = next(s for s in desired_for(settings) if s.id == "log")
    # The real per-run log definition, plus small segments so the cleaner runs within seconds.
    fast = {"segment.ms": "200", "min.cleanable.dirty.ratio": "0.001", "delete.retention.ms": "100"}
    return replace(spec, config={**spec.config, **fast})


@pytest.mark.needs_compaction
async def test_per_run_log_topic_is_compacted(broker: Broker, settings: Settings) -> None:
    spec = _log_spec(settings)
    assert spec.config["cleanup.policy"] == "compact"
    await ensure_topics(broker.bootstrap, [spec])
    run = "run-compaction"
    partition = partition_for_run(run, spec.partitions)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    await producer.start()
    try:
        # Ten recorded events, then the same ten keys overwritten, then a tombstone for key 0:
        # compaction must leave one record per live key and drop the tombstoned one.
        for round_ in range(2):
            for seq in range(10):
                await producer.send_and_wait(
                    spec.name, f"v{round_}".encode(), key=log_key(run, seq), partition=partition
                )
        await producer.send_and_wait(spec.name, None, key=log_key(run, 0), partition=partition)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 90
        compacted = False
        filler = 0
        while loop.time() < deadline:
            # New records roll the active segment (segment.ms); the cleaner only reads closed ones.
            await asyncio.sleep(0.5)
            await producer.send_and_wait(
                spec.name,
                b"filler",
                key=log_key("run-filler", filler % 3),
                partition=partition_for_run("run-filler", spec.partitions),
            )
            filler += 1
            records = [
                r
                for r in await _read_all(broker.bootstrap, spec.name)
                if r.key is not None and r.key.startswith(run.encode() + b"#")
            ]
            if 0 < len(records) <= 10:
                compacted = True
                break
    finally:
        await producer.stop()
    assert compacted, "the per-run log topic kept overwritten records: it is not compacted"
    by_key = {r.key: r.value for r in records}
    assert all(value == b"v1" for value in by_key.values() if value is not None)
    assert set(by_key) >= {log_key(run, seq) for seq in range(1, 10)}


@pytest.mark.needs_transactions
async def test_aborted_records_are_invisible_to_read_committed(
    broker: Broker, settings: Settings, unique: str
) -> None:
    spec = TopicSpec("tx", f"{settings.topic_prefix}tx", 1, 1, {"cleanup.policy": "delete"})
    await ensure_topics(broker.bootstrap, [spec])
    producer = AIOKafkaProducer(
        bootstrap_servers=broker.bootstrap, transactional_id=f"a2ui-test-tx-{unique}"
    )
    await producer.start()
    try:
        async with producer.transaction():
            for i in range(5):
                await producer.send(spec.name, f"committed-{i}".encode(), key=b"k")
        await producer.begin_transaction()
        for i in range(7):
            await producer.send(spec.name, f"aborted-{i}".encode(), key=b"k")
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send(spec.name, b"committed-last", key=b"k")
    finally:
        await producer.stop()
    committed = [r.value for r in await _read_all(broker.bootstrap, spec.name, "read_committed")]
    everything = [r.value for r in await _read_all(broker.bootstrap, spec.name)]
    assert committed == [f"committed-{i}".encode() for i in range(5)] + [b"committed-last"]
    # The aborted records are really in the log (read_uncommitted sees them): the isolation
    # level, not their absence, is what hides them.
    assert sum(v.startswith(b"aborted-") for v in everything) == 7
