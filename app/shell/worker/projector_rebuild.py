"""Rebuilding the projector's runs that are not cached, from their recorded events.

Shell module, the projector's read path (``app.shell.worker.projector_loop``). A run that is not
in the cache when a new event, a resync request or a subscriber's catch-up needs it is rebuilt
from its recorded events (``app.core.projection.projector_runs.rebuild_run``), read from the read
side's run store when that holds them (``app.shell.worker.run_store``, the same worker's RocksDB)
and otherwise from the log partition (``ProjectorLoop.read_log``, which the shell tests replace),
one read per partition per batch. A rebuilt run equals the one that was never evicted (the
same fold over the same recorded events). ``a2ui_projector_rebuilds_total{source}`` counts
them (``ProjectorLoop.rebuilt``).

Its functions take the loop, whose store, cache and partitions they read. It imports
``app.core``; the loop's type only for annotations.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app.core.projection.projector_batch import Need
from app.core.projection.projector_runs import RunSurfaces, complete_prefix, rebuild_run
from app.core.runlog.events import RecordedEvent, parse_event
from app.core.runlog.keys import run_of_log_key

if TYPE_CHECKING:
    from app.shell.worker.projector_loop import ProjectorLoop

__all__ = [
    "logged_events",
    "rebuild_needed",
    "rebuilt_uncached",
    "stored_events",
    "stored_run_ids",
    "stored_uncached",
    "with_runs",
]

log = logging.getLogger("a2ui_stream.projector")


def stored_events(
    loop: ProjectorLoop, partition: int, wanted: dict[str, int | None], before: dict[str, int]
) -> dict[str, list[RecordedEvent]]:
    """The recorded events of the ``wanted`` runs of ``partition`` below their offset in
    ``before``, for those the run store can give completely: it has read the partition
    that far (its checkpoint), or it holds events ``0 .. n - 1`` of a run whose next
    event is ``n`` (``wanted``'s value, when known)."""
    store = loop.store()
    if store is None:
        return {}
    found: dict[str, list[RecordedEvent]] = {}
    try:
        checkpoint = store.checkpoint(partition)
        for run_id, sequence in wanted.items():
            limit = before[run_id]
            events = [e for e in store.events(partition, run_id) if e.offset < limit]
            covered = checkpoint is not None and checkpoint[0] >= limit
            if covered or (
                sequence is not None and complete_prefix([e.sequence for e in events], sequence)
            ):
                parsed = [parse_event(e.data) for e in events]
                if all(event is not None for event in parsed):  # else: the log has them
                    found[run_id] = [event for event in parsed if event is not None]
    except Exception as exc:  # closed at stop, or damaged: the log still has them
        log.warning("projector: run store unreadable (%s)", type(exc).__name__)
        return {}
    return found


def stored_run_ids(loop: ProjectorLoop, partition: int, before: int) -> list[str] | None:
    """Every run of ``partition`` with events below ``before``, if the store can say."""
    store = loop.store()
    if store is None:
        return None
    try:
        checkpoint = store.checkpoint(partition)
        if checkpoint is None or checkpoint[0] < before:
            return None
        return [summary.run_id for summary in store.summaries(partition)]
    except Exception as exc:
        log.warning("projector: run store unreadable (%s)", type(exc).__name__)
        return None


async def logged_events(
    loop: ProjectorLoop, partition: int, wanted: Callable[[str], bool], before: dict[str, int] | int
) -> dict[str, list[RecordedEvent]]:
    """The recorded events of the runs ``wanted`` keeps, read from the log partition
    below ``before`` (per run, or one offset for all)."""
    limit = before if isinstance(before, int) else max(before.values(), default=0)
    if limit <= 0:
        return {}

    def keep(record: Any) -> bool:
        return record.value is not None and wanted(run_of_log_key(record.key))

    found: dict[str, list[RecordedEvent]] = {}
    for record in await loop.read_log(partition, limit, keep):
        run_id = run_of_log_key(record.key)
        if isinstance(before, int) or record.offset < before[run_id]:
            event = parse_event(record.value)
            if event is not None:  # not a recorded event (never written so): not the run's
                found.setdefault(run_id, []).append(event)
    return found


async def rebuild_needed(loop: ProjectorLoop, needs: dict[str, Need]) -> dict[str, RunSurfaces]:
    """The runs a batch folds that are not cached, as they were before the batch: from
    the store, else from the log (one read per partition)."""
    found: dict[str, list[RecordedEvent]] = {}
    for partition in sorted({need.partition for need in needs.values()}):
        mine = {r: n for r, n in needs.items() if n.partition == partition}
        before = {r: n.offset for r, n in mine.items()}
        stored = stored_events(loop, partition, {r: n.sequence for r, n in mine.items()}, before)
        loop.rebuilt["store"] += len(stored)
        found.update(stored)
        missing = {r: o for r, o in before.items() if r not in stored}
        if missing:
            logged = await logged_events(loop, partition, missing.__contains__, missing)
            loop.rebuilt["log"] += len(missing)
            found.update({r: logged.get(r, []) for r in missing})
    return {run_id: rebuild_run(run_id, events) for run_id, events in found.items()}


async def with_runs(
    loop: ProjectorLoop,
    partition: int,
    wanted: Callable[[str], bool],
    named: frozenset[str] | None,
    action: Callable[[dict[str, RunSurfaces]], Any],
) -> None:
    """Call ``action`` with the lock held and the ``wanted`` runs of owned ``partition``
    that are not cached, rebuilt as of the partition's position (the cached ones are
    current in ``loop.runs``). ``named``: the runs, when known (else every run the
    partition holds). A log read runs outside the lock; if the partition moved on
    meanwhile it is done again, and after three tries with the lock held (rare: a busy
    partition the store does not hold)."""
    for attempt in range(4):
        last = attempt == 3
        async with loop.lock:
            owned = loop.partitions.get(partition)
            if owned is None:
                return
            position = owned.position
            stored = stored_uncached(loop, partition, wanted, named, position)
            if stored is not None:
                await action(stored)
                return
            if last:
                logged = await logged_events(loop, partition, wanted, position)
                await action(rebuilt_uncached(loop, logged, "log"))
                return
        logged = await logged_events(loop, partition, wanted, position)
        async with loop.lock:
            owned = loop.partitions.get(partition)
            if owned is None:
                return
            if owned.position == position:
                await action(rebuilt_uncached(loop, logged, "log"))
                return


def stored_uncached(
    loop: ProjectorLoop,
    partition: int,
    wanted: Callable[[str], bool],
    named: frozenset[str] | None,
    position: int,
) -> dict[str, RunSurfaces] | None:
    """``with_runs``'s store path (synchronous, so consistent with the cache), or None
    when the store has not read the partition to ``position``."""
    run_ids = stored_run_ids(loop, partition, position)
    if run_ids is None:
        return None
    if named is not None:
        run_ids = list(named)
    uncached: dict[str, int | None] = {r: None for r in run_ids if wanted(r) and r not in loop.runs}
    events = stored_events(loop, partition, uncached, dict.fromkeys(uncached, position))
    if len(events) != len(uncached):
        return None
    return rebuilt_uncached(loop, events, "store")


def rebuilt_uncached(
    loop: ProjectorLoop, events: dict[str, list[RecordedEvent]], source: str
) -> dict[str, RunSurfaces]:
    rebuilt = {r: rebuild_run(r, e) for r, e in events.items() if r not in loop.runs}
    loop.rebuilt[source] += len(rebuilt)
    return rebuilt
