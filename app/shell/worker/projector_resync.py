"""Resync requests as the projector answers them: one full frame of a surface, once per request.

Shell module, one of the projector's tails (``app.shell.worker.projector_loop`` runs
``follow_resyncs`` beside its batch loop; docs/projection.md). Every worker reads all the
resync requests, from ``RESYNC_LOOKBACK_SECONDS`` before it starts, and answers the ones for
runs it owns. A request published while no worker owned its run (a restart, a rebalance) is
answered by the next owner once it has taken the run's partition (``answer_missed_later``): it
answers the requests of the last ``RESYNC_LOOKBACK_SECONDS`` for that partition's runs. An
answer carries the request's ``a2ui-resync`` = ``partition:offset`` header and is marked
``resync: true`` in the frame (``frames.answer_resync``), so a subscriber that still cannot use
it holds the surface invalid instead of asking again (no request/answer pair repeats without a
change); a request the previous owner answered too gets a second full frame, which is
idempotent for the subscriber. Every decision is ``app.core.projection.projector_runs``'s
(``parse_resync``, ``answer_resync``).

Its functions take the loop. It imports ``app.core``, ``kafka_io`` and the projector's sibling
modules (``projector_cache``, ``projector_fanout``, ``projector_rebuild``); the loop's type only
for annotations.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer

from app.core.projection import projector_runs
from app.core.projection.projector_runs import RunSurfaces
from app.core.runlog.keys import partition_for_run
from app.shell.worker.kafka_io import partitions_of
from app.shell.worker.projector_cache import cache
from app.shell.worker.projector_fanout import send_all
from app.shell.worker.projector_rebuild import with_runs

if TYPE_CHECKING:
    from app.shell.worker.projector_loop import ProjectorLoop

__all__ = [
    "RESYNC_LOOKBACK_SECONDS",
    "answer",
    "answer_missed_later",
    "follow_resyncs",
]

log = logging.getLogger("a2ui_stream.projector")

# How far back a new owner of a partition looks for resync requests nobody answered: longer
# than a rebalance after a member's death (session timeout + join), short enough that a
# restart does not answer requests from long ago again.
RESYNC_LOOKBACK_SECONDS = 120.0


async def follow_resyncs(loop: ProjectorLoop, stopping: asyncio.Event) -> None:
    """Tail the resync topic from RESYNC_LOOKBACK_SECONDS ago: requests that were already
    there are only remembered (for a partition this worker is given later); new ones are
    answered at once when their run is owned here."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=loop.config.bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="latest",
    )
    await consumer.start()
    try:
        tps = await partitions_of(consumer, loop.config.resync_topic)
        consumer.assign(tps)
        lookback_ms = int(RESYNC_LOOKBACK_SECONDS * 1000)
        since = int(time.time() * 1000) - lookback_ms
        try:
            starts = await consumer.offsets_for_times({tp: since for tp in tps}) if tps else {}
        except Exception as exc:  # a broker without timestamp lookups: from the end
            log.warning("projector: resync lookback unavailable (%s)", type(exc).__name__)
            starts = {}
        for tp in tps:
            found = starts.get(tp)
            if found is None:
                await consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, found.offset)
        ends = await consumer.end_offsets(tps) if tps else {}
        loop.resync_consumer = consumer
        while not stopping.is_set():
            batch = await consumer.getmany(timeout_ms=200)
            for tp, records in batch.items():
                for record in records:
                    if record.value is None:
                        continue
                    source = (tp.partition, record.offset)
                    _remember(loop, record.timestamp, source, record.value)
                    if record.offset >= ends.get(tp, 0):
                        await answer(loop, record.value, source)
            for tp in tps:
                loop.resync_positions[tp.partition] = await consumer.position(tp)
            loop.resyncs_read.set()
            loop.resyncs_read = asyncio.Event()
    finally:
        await consumer.stop()


def _remember(loop: ProjectorLoop, timestamp: int, source: tuple[int, int], value: bytes) -> None:
    recent = loop.recent_resyncs
    run_id = projector_runs.run_of_request(value)
    recent.append((timestamp, source[0], source[1], run_id, value))
    horizon = timestamp - int(RESYNC_LOOKBACK_SECONDS * 1000)
    while recent and recent[0][0] < horizon:
        _ts, partition, offset, _run, _value = recent.popleft()
        loop.answered_resyncs.discard((partition, offset))


def answer_missed_later(loop: ProjectorLoop, partition: int) -> None:
    """After ``partition`` was taken: answer its missed requests in the background."""
    loop.tasks = [t for t in loop.tasks if not t.done()]
    loop.tasks.append(asyncio.create_task(_answer_missed_quietly(loop, partition)))


async def _answer_missed_quietly(loop: ProjectorLoop, partition: int) -> None:
    try:
        await _answer_missed(loop, partition)
    except Exception as exc:  # the broker is away: the live tail still answers new ones
        log.warning("projector: missed resync requests not re-checked (%s)", type(exc).__name__)


async def _answer_missed(loop: ProjectorLoop, partition: int) -> None:
    """After ``partition`` of the log was taken here: answer the recent resync requests
    for its runs, which may have been published while no worker owned them. Waits (at
    most a minute) until the resync tail has read up to the topic's end as of now."""
    deadline = asyncio.get_running_loop().time() + 60
    while loop.resync_consumer is None:  # the tail has not started yet
        if not await _next_tail_read(loop, deadline):
            log.warning("projector: resync tail not started; missed requests not re-checked")
            return
    consumer = loop.resync_consumer
    found = await consumer.end_offsets(list(consumer.assignment()))
    ends = {tp.partition: end for tp, end in found.items()}
    while any(loop.resync_positions.get(p, -1) < end for p, end in ends.items() if end > 0):
        if not await _next_tail_read(loop, deadline):
            log.warning("projector: resync tail behind; missed requests not re-checked")
            return
    for _ts, p, offset, run_id, value in list(loop.recent_resyncs):
        if run_id is not None and _partition_of(loop, run_id) == partition:
            await answer(loop, value, (p, offset))


def _partition_of(loop: ProjectorLoop, run_id: str) -> int:
    return partition_for_run(run_id, loop.config.partitions)


async def _next_tail_read(loop: ProjectorLoop, deadline: float) -> bool:
    """Wait for the resync tail's next pass (or ``deadline``, in loop time); False once the
    deadline has passed."""
    remaining = deadline - asyncio.get_running_loop().time()
    if remaining <= 0:
        return False
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(loop.resyncs_read.wait(), remaining)
    return True


async def answer(loop: ProjectorLoop, value: bytes, source: tuple[int, int]) -> None:
    """Issue 5 §4: one full frame for a resync request of a run this worker owns (once per
    request and worker; ``source`` is the request's partition and offset;
    ``projector_runs.answer_resync``). A run that is not cached is rebuilt for it (and
    kept: its subscriber is active)."""
    if source in loop.answered_resyncs:
        return
    request = projector_runs.parse_resync(value, loop.config.partitions)
    if request is None:
        log.warning("projector: ignored a malformed resync request")
        return
    if request.partition not in loop.partitions:
        return  # another worker owns this run (or it is being taken: answered after)
    run_id = request.run_id

    async def answer_rebuilt(rebuilt: dict[str, RunSurfaces]) -> None:
        # Checked again with the lock held: the live tail and a new owner's look back may
        # both reach one request.
        if source in loop.answered_resyncs:
            return
        planned = projector_runs.answer_resync(
            request,
            source,
            cached=loop.runs.get(run_id),
            rebuilt=rebuilt,
            registry=loop.registry,
            policy=loop.policy,
        )
        if planned is None:
            return  # the run has no recorded event
        if planned.cache is not None:
            cache(loop, request.partition, planned.cache)
        loop.runs[run_id].cursors.update(planned.cursors)
        if planned.record is None:
            return
        loop.answered_resyncs.add(source)
        loop.resyncs_answered += 1
        loop.drift_resyncs += planned.drift
        loop.fallbacks["resync"] += 1
        await send_all(loop, [planned.record], say=True)

    await with_runs(
        loop, request.partition, {run_id}.__contains__, frozenset({run_id}), answer_rebuilt
    )
