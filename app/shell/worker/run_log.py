"""A run as the read side holds it in memory: its recorded events and the readers waiting on it.

Shell module, the values of ``app.shell.worker.run_index`` that the HTTP handlers read
(``app.shell.http.streams``, ``run_reads``, ``admission``, ``lifecycle``): a ``RunLog`` is one
run's events in sequence order, its status, and the wakers of the SSE streams waiting for its
next change; a ``LoggedEvent`` is one recorded event, its bytes served as they are and its
document decoded on first use (once per process). Records arrive in partition order, so each
run's events arrive in sequence order.

``RunCache`` is which runs are in memory: the runs someone is reading (a ``RunLog`` held by a
stream or a poll, tracked weakly) and a bounded LRU of recently read runs (``cache_bytes``).
It imports ``app.core``.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from app.core.runlog.events import RecordedEvent, parse_event, unreadable_event
from app.core.runlog.run_lifecycle import INITIAL_STATUS, TERMINAL_STATUSES

__all__ = ["DECODED_FACTOR", "LoggedEvent", "RunCache", "RunLog"]

DECODED_FACTOR = 6  # a decoded event dict holds about 5.6x its JSON (measured, issue 15)


class LoggedEvent:
    """One recorded event as the log holds it: its bytes (served as they are) and, decoded on
    first use, its document."""

    __slots__ = ("_event", "appended_ms", "data", "offset", "partition", "sequence", "type")

    def __init__(
        self,
        sequence: int,
        type: str,
        data: bytes,
        event: RecordedEvent | None,
        partition: int,
        offset: int,
        appended_ms: int,
    ) -> None:
        self.sequence = sequence
        self.type = type
        self.data = data
        self._event = event
        self.partition = partition
        self.offset = offset
        self.appended_ms = appended_ms  # the log record's Kafka timestamp

    @property
    def event(self) -> RecordedEvent:
        found = self._event
        if found is None:
            decoded = parse_event(self.data)
            if decoded is None:
                decoded = unreadable_event(self.sequence, self.type)
            found = self._event = decoded
        return found

    def shown(self, data: bytes, event: RecordedEvent) -> LoggedEvent:
        """The same event as a reader is shown it (its trust rewritten,
        app.core.projection.sse_frames)."""
        return LoggedEvent(
            self.sequence, self.type, data, event, self.partition, self.offset, self.appended_ms
        )

    def __repr__(self) -> str:
        return f"LoggedEvent({self.sequence}, {self.type!r}, {self.partition}:{self.offset})"


@dataclass(eq=False)
class RunLog:
    run_id: str
    events: list[LoggedEvent] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    status: str = INITIAL_STATUS
    partition: int = -1
    moved: bool = False  # the partition left this worker: readers stop and resume elsewhere
    charge: int = 0  # bytes counted against the cache
    # Bumped by every notify: a stream that read ``version`` before writing what was pending
    # knows whether it missed a change while it wrote (app.shell.http.streams.KeepAlive).
    version: int = 0
    # One future per waiting SSE stream (KeepAlive.wait), resolved True by notify: a stream
    # waits on its run and on the shared keep-alive timer with one future and no timer of its
    # own. Polls wait on ``changed``.
    wakers: set[asyncio.Future[bool]] = field(default_factory=set)
    # What an SSE stream in a given state writes for the events it has not seen, and its
    # state after them, shared by every stream in that state until the next ``notify``
    # (app.shell.http.streams.RunStreams.step): every change of ``events`` is followed by
    # ``notify`` in the same synchronous step, which forgets them.
    steps: dict[Any, Any] = field(default_factory=dict)

    @property
    def last_sequence(self) -> int:
        return self.events[-1].sequence if self.events else -1

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def after(self, sequence: int) -> list[LoggedEvent]:
        """Events with a sequence greater than ``sequence`` (an exclusive cursor, §9)."""
        start = max(0, sequence + 1)
        if start < len(self.events) and self.events[start].sequence == sequence + 1:
            return self.events[start:]
        return [e for e in self.events if e.sequence > sequence]

    def notify(self) -> None:
        self.version += 1
        self.steps.clear()
        self.changed.set()
        self.changed = asyncio.Event()
        for waker in self.wakers:
            if not waker.done():
                waker.set_result(True)
        self.wakers.clear()


class RunCache:
    """The runs held in memory: ``live``, every run someone holds (weakly: a run leaves when
    its last reader lets go of it), and ``recent``, the recently read ones, least recently
    used first, kept while their estimated decoded size (``charge``) fits ``cache_bytes``."""

    def __init__(self, cache_bytes: int) -> None:
        self.cache_bytes = cache_bytes
        self.live: weakref.WeakValueDictionary[str, RunLog] = weakref.WeakValueDictionary()
        self.recent: OrderedDict[str, RunLog] = OrderedDict()
        self.cached_bytes = 0

    def get(self, run_id: str) -> RunLog | None:
        """The run if it is in memory (a read: a cached run moves to the recent end)."""
        found = self.live.get(run_id)
        if found is not None and run_id in self.recent:
            self.recent.move_to_end(run_id)
        return found

    def hold(self, run: RunLog, charge: int) -> None:
        """``run``, just read from the store, into memory, charged ``charge`` bytes."""
        self.live[run.run_id] = run
        self.recent[run.run_id] = run
        self.charge(run, charge)

    def charge(self, run: RunLog, amount: int) -> None:
        """Count ``amount`` more bytes against cached ``run``; the least recently used other
        runs leave the cache until it fits (one run is always kept)."""
        run.charge += amount
        self.cached_bytes += amount
        while self.cached_bytes > self.cache_bytes and len(self.recent) > 1:
            oldest = next(iter(self.recent))
            if oldest == run.run_id:
                self.recent.move_to_end(oldest)
                oldest = next(iter(self.recent))
                if oldest == run.run_id:
                    break
            self.uncache(oldest)

    def uncache(self, run_id: str) -> None:
        """``run_id`` out of the LRU (a reader still holding it keeps it live)."""
        found = self.recent.pop(run_id, None)
        if found is not None:
            self.cached_bytes -= found.charge
            found.charge = 0

    def forget(self, run_id: str) -> None:
        """``run_id`` out of memory: out of the LRU and no longer found live."""
        self.uncache(run_id)
        self.live.pop(run_id, None)
