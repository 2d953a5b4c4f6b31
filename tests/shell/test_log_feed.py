"""The projector's records from the process's one log consumer (app/shell/worker/log_feed.py),
and the read side's tail that reads for both (app/shell/worker/run_index.py): each partition's
records reach the projector contiguously from the offset it followed, once per follow, and the
read side files each record once however often the tail reads it again for the projector. The
real-broker path is tests/integration/test_projection.py and the fault suite."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
from aiokafka import TopicPartition

from app.shell.worker.log_feed import LogFeed
from app.shell.worker.run_index import RunIndex
from tests.shell.test_run_index_ownership import DEAD, LOG, FetchedRecord, TailConsumer


def _rec(offset: int) -> FetchedRecord:
    return FetchedRecord(offset, b"t/r#0", b"{}", [])


def _recs(first: int, last: int) -> list[FetchedRecord]:
    return [_rec(n) for n in range(first, last + 1)]


def _offsets(batch: dict[int, list[Any]]) -> dict[int, list[int]]:
    return {p: [r.offset for r in records] for p, records in batch.items()}


async def test_records_are_handed_over_from_the_followed_offset_once_the_tail_sought_there() -> (
    None
):
    feed = LogFeed()
    feed.follow(0, 5)
    feed.offer(0, _recs(0, 9))  # fetched before the tail sought the partition: not handed
    feed.flush()
    assert await feed.get(timeout=0) == {}
    feed.applied([0])
    feed.offer(0, _recs(3, 7))  # read from below (the store's next): from 5 on
    feed.offer(0, _recs(8, 9))
    feed.offer(1, _recs(0, 3))  # not followed
    feed.flush()
    assert _offsets(await feed.get(timeout=0)) == {0: [5, 6, 7, 8, 9]}
    assert feed.starts({}) == {0: 10}


async def test_a_new_follow_drops_what_was_queued_under_the_old_one() -> None:
    """A re-follow (a refetch after a rebalance, or a take after a failed commit) goes back to
    an offset: the records queued since the last one are not handed over, so none is
    projected twice or out of order."""
    feed = LogFeed()
    feed.follow(0, 0)
    feed.follow(1, 0)
    feed.applied([0])
    feed.applied([1])
    feed.offer(0, _recs(0, 4))
    feed.offer(1, _recs(0, 1))
    feed.flush()
    feed.follow(0, 2)
    feed.offer(0, _recs(5, 6))  # still in flight from the old position: dropped
    feed.flush()
    assert _offsets(await feed.get(timeout=0)) == {1: [0, 1]}
    feed.applied([0])
    feed.offer(0, _recs(2, 6))
    feed.flush()
    feed.unfollow(1)
    feed.offer(1, _recs(2, 2))
    feed.flush()
    assert _offsets(await feed.get(timeout=0)) == {0: [2, 3, 4, 5, 6]}


async def test_the_tail_waits_while_the_projector_is_behind_and_never_for_a_stopped_one() -> None:
    feed = LogFeed(max_batches=2)
    feed.follow(0, 0)
    feed.applied([0])
    for n in range(2):
        feed.offer(0, _recs(n, n))
        feed.flush()
    waiting = asyncio.create_task(feed.room())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    assert _offsets(await feed.get(timeout=0)) == {0: [0, 1]}
    await asyncio.wait_for(waiting, 1)
    for n in range(2, 4):
        feed.offer(0, _recs(n, n))
        feed.flush()
    waiting = asyncio.create_task(feed.room())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    feed.close()
    await asyncio.wait_for(waiting, 1)
    assert feed.follows == {} and await feed.get(timeout=0) == {}


def _event(sequence: int) -> FetchedRecord:
    value = orjson.dumps(
        {"runId": "t/r", "sequence": sequence, "type": "run.started", "payload": {}}
    )
    return FetchedRecord(sequence, f"t/r#{sequence}".encode(), value, [("a2ui-source", b"0:1")])


async def test_the_tail_reads_for_both_sides_and_files_each_record_once(tmp_path: Path) -> None:
    """Partition 0 is owned and its store has read it to offset 4 when the projector follows
    it from 2 (its committed offset): the tail goes back to 2, the projector gets 2.. and the
    store files nothing twice. Partition 1, followed but not owned, is read from the
    projector's offset and not filed at all (its dead letters are not read)."""
    feed = LogFeed()
    index = RunIndex("127.0.0.1:9", LOG, DEAD, tmp_path / "store", feed=feed)
    index.warm_partitions()
    index.partitions = 6
    consumer = TailConsumer(lambda n: None)
    index.assigned(frozenset({0}))
    await index._apply_changes(consumer)
    index._ingest({TopicPartition(LOG, 0): [_event(n) for n in range(4)]})
    assert [e.sequence for e in index.store.events(0, "t/r")] == [0, 1, 2, 3]
    feed.follow(0, 2)
    feed.follow(1, 7)
    assert index._changed
    await index._apply_changes(consumer)
    assert consumer.seeks == {
        TopicPartition(LOG, 0): 2,
        TopicPartition(LOG, 1): 7,
        TopicPartition(DEAD, 0): 100,  # the dead letters' end when assigned
    }
    index._ingest(
        {
            TopicPartition(LOG, 0): [_event(n) for n in range(2, 6)],
            TopicPartition(LOG, 1): [_rec(7), _rec(8)],
        }
    )
    assert _offsets(await feed.get(timeout=0)) == {0: [2, 3, 4, 5], 1: [7, 8]}
    assert [e.sequence for e in index.store.events(0, "t/r")] == [0, 1, 2, 3, 4, 5]
    assert index.records_read == 6
    assert list(index.store.summaries(1)) == []
    index.store.close()


async def test_a_stuck_projector_is_dropped_after_the_stall_and_follows_again() -> None:
    """The tail waits ``stall_s`` for a projector that takes nothing, then drops what is queued
    and stops reading those partitions for it (the read side goes on); the partitions it
    follows again are handed over from the offset it gives."""
    feed = LogFeed(max_batches=1, stall_s=0.05)
    changes: list[int] = []
    feed.on_change = lambda: changes.append(1)
    for partition in (0, 1):
        feed.follow(partition, 0)
    feed.applied([0, 1])
    feed.offer(0, _recs(0, 2))
    feed.flush()
    await asyncio.wait_for(feed.room(), 1)
    assert feed.drops == 1 and feed.follows.keys() == {1} and feed.overflowed == {0}
    assert len(changes) == 3  # two follows, then the drop: the tail stops reading 0 for it
    assert await feed.get(timeout=0) == {}
    assert feed.take_overflowed() == {0} and feed.overflowed == set()
    feed.follow(0, 1)
    feed.applied([0])
    feed.offer(0, _recs(0, 3))
    feed.flush()
    assert _offsets(await feed.get(timeout=0)) == {0: [1, 2, 3]}
