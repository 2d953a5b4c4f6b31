"""What the validator did with each recent admission record, and the requests waiting to know.

Shell module, kept by ``app.shell.worker.run_index``: every validator output carries the
``a2ui-source`` header naming the admission record's partition and offset (docs/pipeline.md),
so an HTTP admission (which the owner publishes) can wait for the outcome of the record it
published (``app.shell.http.gateway``: ``RunIndex.outcome_of``). It imports nothing of the app
but ``run_log``.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from app.shell.worker.run_log import LoggedEvent

__all__ = ["RECENT_OUTCOMES", "Outcomes", "RecordOutcome"]

RECENT_OUTCOMES = 10_000  # a waiter registers microseconds after its publish returns


@dataclass(frozen=True, slots=True)
class RecordOutcome:
    """What the validator did with one admission record: the events it appended (``events``)
    or the dead letter it wrote (``letter``)."""

    events: tuple[LoggedEvent, ...] = ()
    letter: dict[str, Any] | None = None


class Outcomes:
    """The outcomes of the last ``RECENT_OUTCOMES`` admission records, by ``partition:offset``
    (their ``a2ui-source``), and the futures of those waiting for one not yet seen."""

    def __init__(self) -> None:
        self.recent: OrderedDict[str, RecordOutcome] = OrderedDict()
        self.waiters: dict[str, list[asyncio.Future[RecordOutcome]]] = {}

    def __getitem__(self, source: str) -> RecordOutcome:
        return self.recent[source]

    def awaited(self, source: str) -> bool:
        """Whether someone waits for the outcome of ``source``."""
        return source in self.waiters

    def note(self, source: str, outcome: RecordOutcome) -> None:
        earlier = self.recent.get(source)
        if earlier is not None and outcome.events:  # a command appends several events
            outcome = RecordOutcome(events=earlier.events + outcome.events)
        self.recent[source] = outcome
        self.recent.move_to_end(source)
        while len(self.recent) > RECENT_OUTCOMES:
            self.recent.popitem(last=False)
        for waiter in self.waiters.pop(source, ()):
            if not waiter.done():
                waiter.set_result(outcome)

    async def wait(self, source: str, timeout: float) -> RecordOutcome | None:
        """The outcome of ``source``, waiting at most ``timeout`` seconds (None: not seen in
        time)."""
        known = self.recent.get(source)
        if known is not None:
            return known
        waiter: asyncio.Future[RecordOutcome] = asyncio.get_running_loop().create_future()
        self.waiters.setdefault(source, []).append(waiter)
        try:
            return await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            return None
        finally:
            waiters = self.waiters.get(source)
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)
                if not waiters:
                    del self.waiters[source]
