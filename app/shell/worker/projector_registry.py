"""The subscription registry as the projector follows it, and a new subscriber's catch-up.

Shell module, one of the projector's tails (``app.shell.worker.projector_loop`` runs
``follow_registry`` beside its batch loop). Every worker reads the whole compacted registry
from the beginning (``app.core.projection.subscriptions.register`` folds each record); a subscriber
that registers or changes while runs it follows already have surfaces gets one full frame of each
(``catch_up``). ``tail`` is the plain tail of a topic (all partitions, no group) it reads with.

Its functions take the loop. It imports ``app.core``, ``kafka_io`` and the projector's sibling
modules (``projector_fanout``, ``projector_rebuild``); the loop's type only for annotations.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaConsumer

from app.core.projection import projector_runs
from app.core.projection.projector_runs import RunSurfaces
from app.core.projection.subscriptions import register
from app.shell.worker.kafka_io import partitions_of
from app.shell.worker.projector_fanout import send_all
from app.shell.worker.projector_rebuild import with_runs

if TYPE_CHECKING:
    from app.shell.worker.projector_loop import ProjectorLoop

__all__ = ["catch_up", "follow_registry", "tail"]

log = logging.getLogger("a2ui_stream.projector")


async def follow_registry(loop: ProjectorLoop, stopping: asyncio.Event) -> None:
    """Fold every registration into ``loop.registry``; a live change catches its subscriber
    up."""
    async for key, value, live in tail(
        loop.config.bootstrap, loop.config.subscriptions_topic, stopping, from_beginning=True
    ):
        sid = key.decode("utf-8", "replace") if key is not None else ""
        before = loop.registry.get(sid)
        loop.registry, why = register(loop.registry, key, value)
        if why is not None:
            log.warning("projector: ignored a registration: %s", why)
        after = loop.registry.get(sid)
        if live and after is not None and after != before:
            await catch_up(loop, after)


async def catch_up(loop: ProjectorLoop, sub: Any) -> None:
    """A subscriber that registers (or changes) while runs it follows already have
    surfaces gets one full frame of each now (``projector_runs.plan_catch_up``), not only
    at the next change. Runs that are not cached are rebuilt for it and not kept (a
    subscriber of every run would otherwise fill the cache with idle runs); their next
    frame is a full one."""
    named = frozenset(sub.runs) if sub.runs is not None else None
    for partition in sorted(loop.partitions):

        async def send_planned(rebuilt: dict[str, RunSurfaces], partition: int = partition) -> None:
            planned = projector_runs.plan_catch_up(sub, partition, loop.runs, rebuilt, loop.policy)
            for run_id, cursors in planned.cursors.items():
                loop.runs[run_id].cursors.update(cursors)
            await send_all(loop, planned.sends)

        await with_runs(loop, partition, sub.follows, named, send_planned)


async def tail(
    bootstrap: str, topic: str, stopping: asyncio.Event, *, from_beginning: bool
) -> AsyncIterator[tuple[bytes | None, bytes | None, bool]]:
    """Yield ``(key, value, live)`` for every record of ``topic`` (all partitions, no group);
    ``live`` is false for records that were already there when the tail started."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest" if from_beginning else "latest",
    )
    await consumer.start()
    try:
        tps = await partitions_of(consumer, topic)
        consumer.assign(tps)
        if from_beginning:
            await consumer.seek_to_beginning(*tps)
        else:
            await consumer.seek_to_end(*tps)
        # Measured: asking for the end offsets BEFORE seeking lost the records already on the
        # topic (the position reset raced the seek), so the ends are read after it.
        ends = await consumer.end_offsets(tps) if tps else {}
        while not stopping.is_set():
            batch = await consumer.getmany(timeout_ms=200)
            for tp, records in batch.items():
                for record in records:
                    yield record.key, record.value, record.offset >= ends.get(tp, 0)
    finally:
        await consumer.stop()
