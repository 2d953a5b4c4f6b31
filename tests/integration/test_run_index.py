"""The HTTP side's log tail (app.shell.run_index) against the harness broker.

A run another worker has just recorded must never read as "not found" on this worker merely
because this worker's tail is behind (read-your-writes across workers, docs/http.md).
"""

from __future__ import annotations

import asyncio
import contextlib

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from app.core.keys import log_key, partition_for_run
from app.shell.run_index import RunIndex
from app.shell.settings import Settings
from app.shell.topics_admin import desired_for, ensure_topics

pytestmark = pytest.mark.broker


async def _started_index(bootstrap: str, settings: Settings) -> tuple[RunIndex, dict[str, str]]:
    specs = [s for s in desired_for(settings) if s.id in ("log", "deadletter")]
    await ensure_topics(bootstrap, specs)
    names = {s.id: s.name for s in specs}
    index = RunIndex(bootstrap, names["log"], names["deadletter"])
    await index.start()
    return index, names


async def test_lookup_reads_to_the_log_end_before_answering_not_found(broker, settings) -> None:
    index, names = await _started_index(broker.bootstrap, settings)
    stopping = asyncio.Event()
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    await producer.start()
    tail: asyncio.Task[None] | None = None
    try:
        run = "tenant/run-index"
        event = {"type": "run.created", "runId": run, "sequence": 0}
        await producer.send_and_wait(
            names["log"],
            orjson.dumps(event),
            key=log_key(run, 0),
            partition=partition_for_run(run, settings.partitions),
        )
        # The record is acknowledged but this worker's tail has not read it yet (it is not
        # running): a plain read misses it, and a lookup waits instead of saying "not found".
        assert index.get(run) is None
        looking = asyncio.create_task(index.lookup(run, timeout=30))
        await asyncio.sleep(1.0)
        assert not looking.done()
        tail = asyncio.create_task(index.run(stopping))
        looked = await asyncio.wait_for(looking, 30)
        assert looked is not None and looked.last_sequence == 0
        # A run nobody recorded: None once read to the end, well before the timeout.
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await index.lookup("tenant/never-recorded", timeout=30) is None
        assert loop.time() - started < 15
    finally:
        await producer.stop()
        stopping.set()
        if tail is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(tail, 5)
        await index.stop()
