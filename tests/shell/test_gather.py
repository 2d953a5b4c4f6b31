"""The batch time bound counts from where the previous batch was gathered (app.shell.worker.gather).

A consumer double hands out what a test queued and records every wait it was asked for; the
figures asserted are those waits (the gather's decisions), never a time measured.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.shell.worker.gather import gather

WINDOW_S = 0.010


class Consumer:
    """``getmany`` hands out ``buffered`` (already fetched) records at once; with nothing
    buffered it hands out the next of ``arrivals`` (a record that arrives while it waits),
    else returns nothing, as aiokafka does."""

    def __init__(self, buffered: list[Any], arrivals: list[Any] | None = None) -> None:
        self.buffered = list(buffered)
        self.arrivals = list(arrivals or [])
        self.waits: list[int] = []

    async def getmany(self, *, timeout_ms: int, max_records: int) -> dict[str, list[Any]]:
        self.waits.append(timeout_ms)
        await asyncio.sleep(0)
        if self.buffered:
            taken, self.buffered = self.buffered[:max_records], self.buffered[max_records:]
            return {"p0": taken}
        if timeout_ms > 0 and self.arrivals:
            return {"p0": [self.arrivals.pop(0)]}
        return {}


async def test_an_idle_gather_waits_the_whole_window() -> None:
    consumer = Consumer([], arrivals=["a"])
    batch = await gather(consumer, max_records=100, window_s=WINDOW_S, opened=None)
    assert batch == {"p0": ["a"]}
    assert consumer.waits[0] == pytest.approx(10, abs=1)


async def test_records_that_waited_out_a_long_commit_are_taken_with_one_more_fetch() -> None:
    # The previous batch was gathered a second ago (its commit took longer than the window):
    # what was fetched meanwhile is taken at once, then the one fetch that taking it lets the
    # consumer make, and the batch closes. Before, the gather waited a whole window again
    # (a first getmany of 10 ms, and more after it) on top of the commit.
    opened = asyncio.get_running_loop().time() - 1.0
    consumer = Consumer(["a", "b"], arrivals=["refetched", "later"])
    batch = await gather(consumer, max_records=100, window_s=WINDOW_S, opened=opened)
    assert batch == {"p0": ["a", "b", "refetched"]}
    assert consumer.waits[0] == 0
    assert len(consumer.waits) == 2


async def test_after_a_long_commit_with_nothing_fetched_the_gather_waits_as_an_idle_one() -> None:
    opened = asyncio.get_running_loop().time() - 1.0
    consumer = Consumer([], arrivals=["a"])
    batch = await gather(consumer, max_records=100, window_s=WINDOW_S, opened=opened)
    assert batch == {"p0": ["a"]}
    assert consumer.waits[0] == 0
    assert consumer.waits[1] == pytest.approx(10, abs=1)


async def test_a_window_opened_recently_is_waited_out_only_for_what_is_left_of_it() -> None:
    opened = asyncio.get_running_loop().time() - 0.006
    consumer = Consumer(["a"], arrivals=["b", "c"])
    batch = await gather(consumer, max_records=100, window_s=WINDOW_S, opened=opened)
    assert batch == {"p0": ["a", "b", "c"]}
    assert consumer.waits[0] == 0
    assert 0 < consumer.waits[2] <= 5


async def test_a_full_batch_closes_at_once() -> None:
    consumer = Consumer(list(range(7)), arrivals=["late"])
    batch = await gather(consumer, max_records=5, window_s=WINDOW_S, opened=None)
    assert batch == {"p0": [0, 1, 2, 3, 4]}
    assert len(consumer.waits) == 1
