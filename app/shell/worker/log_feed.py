"""The log records a worker's one log consumer hands to its projector.

Shell module (issue 15; docs/architecture.md, "One log consumer per process"). A worker reads
the per-run log once: the read side's tail (``app.shell.worker.run_index``) is the only
consumer that fetches it. The projector (``app.shell.worker.projector_loop``) stays a member
of its consumer group, which decides the log partitions it projects and fences its offset
commits, but fetches nothing: it ``follow``s each partition it has taken from its committed
offset, and the tail, which then reads that partition too (from the lower of the store's next
offset and the projector's), ``offer``s every record it fetched of it. The projector ``get``s
them in batches, in partition order, from where it followed.

Kafka Streams' shape: one consumer per thread, every processor of a partition's task fed from
it. Decoding and fetching happen once per process; the read side's store has filed a record
before the projector sees it, so a run the projector rebuilds is read from the store, not the
log. The cost of sharing: the tail waits while ``MAX_BATCHES`` batches are queued for the
projector, so a projector that falls behind holds the read side back too, as one slow
processor does a Kafka Streams thread; but at most ``STALL_S`` per batch: then what is queued
is dropped and its partitions are no longer read for the projector (``overflowed``) until it
follows them again from where it stands, so a stuck projector (a long log read, a broker
that does not answer its frames) neither stops the reads nor grows the queue.

Each ``follow`` of a partition starts a new epoch; records queued under an older one (fetched
before the tail sought the partition to the new offset) are dropped, so the projector sees
each partition's records contiguously from the offset it followed at. It imports nothing of
the project.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_BATCHES", "LogFeed"]

MAX_BATCHES = 4  # tail batches queued for the projector before the tail waits
STALL_S = 2.0  # the longest the tail waits for the projector before it drops what is queued


@dataclass
class _Follow:
    next: int  # the next offset to hand over
    epoch: int
    applied: bool = False  # the tail has sought the partition to ``next`` for this epoch


class LogFeed:
    """The partitions the projector follows, and the records queued for it."""

    def __init__(self, max_batches: int = MAX_BATCHES, stall_s: float = STALL_S) -> None:
        self.max_batches = max_batches
        self.stall_s = stall_s
        self.overflowed: set[int] = set()  # dropped for a stuck projector: to follow again
        self.drops = 0
        self.follows: dict[int, _Follow] = {}
        self._epochs: dict[int, int] = {}
        self._pending: dict[int, tuple[int, list[Any]]] = {}
        self._queue: deque[dict[int, tuple[int, list[Any]]]] = deque()
        self._queued = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self.closed = False
        self.on_change: Callable[[], None] = lambda: None  # the tail's wake-up
        self.handed = 0  # records handed to the projector

    # -- the projector's side ---------------------------------------------------------------

    def follow(self, partition: int, offset: int) -> None:
        """Hand over ``partition``'s records from ``offset`` on (what was queued of it
        before is dropped)."""
        epoch = self._epochs[partition] = self._epochs.get(partition, 0) + 1
        self.follows[partition] = _Follow(offset, epoch)
        self.closed = False
        self.on_change()

    def unfollow(self, partition: int) -> None:
        if self.follows.pop(partition, None) is not None:
            self._epochs[partition] += 1
            self.on_change()

    def close(self) -> None:
        """The projector stopped: nothing is followed, nothing queued; the tail never waits."""
        for partition in list(self.follows):
            self.unfollow(partition)
        self._queue.clear()
        self._pending.clear()
        self.closed = True
        self._room.set()

    async def get(self, timeout: float) -> dict[int, list[Any]]:
        """Every record queued of the partitions followed, by partition in offset order;
        waits at most ``timeout`` seconds for some ({} then)."""
        if not self._queue:
            self._queued.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._queued.wait(), timeout)
        out: dict[int, list[Any]] = {}
        while self._queue:
            for partition, (epoch, records) in self._queue.popleft().items():
                if self._epochs[partition] == epoch:  # every unfollow or follow moves it
                    out.setdefault(partition, []).extend(records)
        self._room.set()
        self.handed += sum(len(records) for records in out.values())
        return out

    # -- the tail's side (app.shell.worker.run_index) ----------------------------------------

    def starts(self, own: Mapping[int, int]) -> dict[int, int]:
        """Where the tail reads each log partition from, given ``own``, the read side's next
        offset of each partition it owns: the owned ones and the followed ones, each from the
        lower of the two sides' offsets (each side skips what it has had)."""
        starts = dict(own)
        for partition, follow in self.follows.items():
            starts[partition] = min(follow.next, starts.get(partition, follow.next))
        return starts

    def applied(self, partitions: Iterable[int]) -> None:
        """The tail has sought these partitions to ``starts``' offsets: what it fetches of the
        followed ones from now on is handed over."""
        for partition in partitions:
            follow = self.follows.get(partition)
            if follow is not None:
                follow.applied = True

    def offer(self, partition: int, records: Sequence[Any]) -> None:
        """Records the tail fetched of log ``partition``, in offset order: those of a followed
        partition from its next offset on are queued (at ``flush``)."""
        follow = self.follows.get(partition)
        if follow is None or not follow.applied or not records:
            return
        if records[0].offset < follow.next:
            records = [r for r in records if r.offset >= follow.next]
            if not records:
                return
        follow.next = records[-1].offset + 1
        epoch, queued = self._pending.setdefault(partition, (follow.epoch, []))
        queued.extend(records)

    def flush(self) -> None:
        """The end of one tail batch: what it offered is queued for the projector."""
        if self._pending:
            self._queue.append(self._pending)
            self._pending = {}
            self._queued.set()

    def take_overflowed(self) -> set[int]:
        """The partitions dropped since last asked, which the projector follows again."""
        found, self.overflowed = self.overflowed, set()
        return found

    async def room(self) -> None:
        """Wait while ``max_batches`` batches are queued (the projector is behind), at most
        ``stall_s``: then drop them (``overflowed``)."""
        if self.closed or len(self._queue) < self.max_batches:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wait_room(), self.stall_s)
        if not self.closed and len(self._queue) >= self.max_batches:
            self._drop_queued()

    async def _wait_room(self) -> None:
        while not self.closed and len(self._queue) >= self.max_batches:
            self._room.clear()
            await self._room.wait()

    def _drop_queued(self) -> None:
        for batch in self._queue:
            for partition in batch:
                if self.follows.pop(partition, None) is not None:
                    self._epochs[partition] += 1
                    self.overflowed.add(partition)
        self._queue.clear()
        self._room.set()
        self.drops += 1
        self.on_change()
