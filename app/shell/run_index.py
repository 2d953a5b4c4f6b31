"""The HTTP side's view of the per-run log: every worker tails the WHOLE log topic.

Shell module. The OpenWOP HTTP endpoints (event stream, poll, event-log read, fork, status)
read runs from here. It is not a side store: it is the log itself, read with
``read_committed`` from the beginning by a consumer that is assigned every partition (no
consumer group), so any worker can answer for any run (issue 6 item 6; docs/http.md). Records
arrive in partition order, so each run's events arrive in sequence order.

It also tails the dead-letter topic (from its end) so that an HTTP admission can wait for the
outcome of the record it published: every validator output carries the ``a2ui-source`` header
naming the admission record's partition and offset (docs/pipeline.md).

Memory: each worker holds every live event of the log (bytes and the decoded document). That is
the price of "any worker answers any run" without a second store; see docs/http.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer

from app.core.keys import run_of_log_key, sequence_of_log_key
from app.core.run_lifecycle import INITIAL_STATUS, TERMINAL_STATUSES, status_after
from app.shell.kafka_io import MAX_FETCH_BYTES, partitions_of

__all__ = ["LoggedEvent", "Outcome", "RunIndex", "RunLog"]

log = logging.getLogger("a2ui_stream.http")

SOURCE_HEADER = "a2ui-source"
_RECENT_OUTCOMES = 100_000


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """One recorded event as the log holds it: its bytes (served as they are) and decoded."""

    sequence: int
    type: str
    data: bytes
    event: dict[str, Any]
    partition: int
    offset: int
    appended_ms: int  # the log record's Kafka timestamp


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the validator did with one admission record: the events it appended (``events``)
    or the dead letter it wrote (``letter``)."""

    events: tuple[LoggedEvent, ...] = ()
    letter: dict[str, Any] | None = None


@dataclass
class RunLog:
    run_id: str
    events: list[LoggedEvent] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    status: str = INITIAL_STATUS

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
        self.changed.set()
        self.changed = asyncio.Event()


class RunIndex:
    """Tails the log (from the beginning) and the dead letters (from the end)."""

    def __init__(self, bootstrap: str, log_topic: str, deadletter_topic: str) -> None:
        self.bootstrap = bootstrap
        self.log_topic = log_topic
        self.deadletter_topic = deadletter_topic
        self.runs: dict[str, RunLog] = {}
        self.ready = asyncio.Event()
        self.outcomes: OrderedDict[str, Outcome] = OrderedDict()
        self._outcome_waiters: dict[str, list[asyncio.Future[Outcome]]] = {}
        self._consumer: AIOKafkaConsumer | None = None
        self._log_tps: list[Any] = []
        self._progress = asyncio.Event()  # set (and replaced) after every fetch round
        self.partitions = 0

    async def start(self) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            isolation_level="read_committed",
            max_partition_fetch_bytes=MAX_FETCH_BYTES,
        )
        await consumer.start()
        self._consumer = consumer
        log_tps = await partitions_of(consumer, self.log_topic)
        dead_tps = await partitions_of(consumer, self.deadletter_topic)
        self.partitions = len(log_tps)
        self._log_tps = log_tps
        consumer.assign(log_tps + dead_tps)
        await consumer.seek_to_beginning(*log_tps)
        if dead_tps:
            await consumer.seek_to_end(*dead_tps)
        self._catch_up_to = await consumer.end_offsets(log_tps) if log_tps else {}

    async def stop(self) -> None:
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                await self._consumer.stop()

    async def run(self, stopping: asyncio.Event) -> None:
        consumer = self._consumer
        assert consumer is not None
        while not stopping.is_set():
            try:
                batch = await consumer.getmany(timeout_ms=200, max_records=10_000)
            except Exception as exc:  # a broker hiccup: keep tailing
                log.warning("run index: fetch failed (%s)", type(exc).__name__)
                await asyncio.sleep(0.5)
                continue
            touched: set[str] = set()
            for tp, records in batch.items():
                if tp.topic == self.log_topic:
                    for record in records:
                        self._on_log(tp.partition, record, touched)
                else:
                    for record in records:
                        self._on_dead_letter(record)
            for run_id in touched:
                found = self.runs.get(run_id)
                if found is not None:
                    found.notify()
            self._progress.set()
            self._progress = asyncio.Event()
            if not self.ready.is_set() and await self._caught_up(consumer):
                log.info("run index: caught up with the log (%d runs)", len(self.runs))
                self.ready.set()

    async def _caught_up(self, consumer: AIOKafkaConsumer) -> bool:
        for tp, end in self._catch_up_to.items():
            if await consumer.position(tp) < end:
                return False
        return True

    # -- records ----------------------------------------------------------------------------

    def _on_log(self, partition: int, record: Any, touched: set[str]) -> None:
        if record.key is None:
            return
        try:
            run_id = run_of_log_key(record.key)
            sequence = sequence_of_log_key(record.key)
        except ValueError:
            return
        if record.value is None:  # a tombstone (`runs delete`)
            self._drop(run_id, sequence)
            touched.add(run_id)
            return
        try:
            event = orjson.loads(record.value)
        except orjson.JSONDecodeError:
            log.error("run index: undecodable log record %d:%d", partition, record.offset)
            return
        logged = LoggedEvent(
            sequence,
            str(event.get("type", "")),
            record.value,
            event,
            partition,
            record.offset,
            int(record.timestamp or 0),
        )
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = RunLog(run_id)
        if run.events and sequence <= run.events[-1].sequence:
            # A re-appended sequence (never with transactions): the later record wins.
            run.events = [e for e in run.events if e.sequence != sequence]
            run.events.append(logged)
            run.events.sort(key=lambda e: e.sequence)
        else:
            run.events.append(logged)
        run.status = status_after(run.status, logged.type)
        touched.add(run_id)
        self._note(record, Outcome(events=(logged,)))

    def _drop(self, run_id: str, sequence: int) -> None:
        run = self.runs.get(run_id)
        if run is None:
            return
        run.events = [e for e in run.events if e.sequence != sequence]
        if not run.events:
            del self.runs[run_id]
            run.notify()

    def _on_dead_letter(self, record: Any) -> None:
        if record.value is None:
            return
        try:
            letter = orjson.loads(record.value)
        except orjson.JSONDecodeError:
            return
        if isinstance(letter, dict):
            self._note(record, Outcome(letter=letter))

    def _note(self, record: Any, outcome: Outcome) -> None:
        source = next((v.decode() for k, v in record.headers or () if k == SOURCE_HEADER), None)
        if source is None:
            return
        earlier = self.outcomes.get(source)
        if earlier is not None and outcome.events:  # a command appends several events
            outcome = Outcome(events=earlier.events + outcome.events)
        self.outcomes[source] = outcome
        self.outcomes.move_to_end(source)
        while len(self.outcomes) > _RECENT_OUTCOMES:
            self.outcomes.popitem(last=False)
        for waiter in self._outcome_waiters.pop(source, ()):
            if not waiter.done():
                waiter.set_result(outcome)

    # -- readers ----------------------------------------------------------------------------

    def get(self, run_id: str) -> RunLog | None:
        return self.runs.get(run_id)

    async def lookup(self, run_id: str, timeout: float) -> RunLog | None:
        """The run, or None only once this worker has read the log up to where it ended when
        asked. Read-your-writes across workers: a run that another worker has just recorded
        (and answered 201 for) is never "not found" here merely because this worker's tail is
        a few records behind. Known runs answer at once; waits at most ``timeout`` seconds."""
        found = self.runs.get(run_id)
        if found is not None:
            return found
        await self.read_to_end(timeout)
        return self.runs.get(run_id)

    async def read_to_end(self, timeout: float) -> bool:
        """Wait until every log partition has been read up to its last stable offset as of
        now (read_committed end offsets). False when that did not happen within ``timeout``."""
        consumer = self._consumer
        if consumer is None or not self._log_tps:
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            ends = await asyncio.wait_for(consumer.end_offsets(self._log_tps), timeout)
        except Exception as exc:  # the broker is away: answer from what has been read
            log.warning("run index: end offsets unavailable (%s)", type(exc).__name__)
            return False
        while True:
            behind = False
            for tp, end in ends.items():
                if await consumer.position(tp) < end:
                    behind = True
                    break
            if not behind:
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._progress.wait(), remaining)

    async def outcome_of(self, partition: int, offset: int, timeout: float) -> Outcome | None:
        """The outcome of the admission record at ``partition:offset``, waiting at most
        ``timeout`` seconds (None: not seen in time, e.g. an E2 deduplication writes nothing)."""
        source = f"{partition}:{offset}"
        known = self.outcomes.get(source)
        if known is not None:
            return known
        waiter: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._outcome_waiters.setdefault(source, []).append(waiter)
        try:
            return await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            return None
        finally:
            waiters = self._outcome_waiters.get(source)
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)
                if not waiters:
                    del self._outcome_waiters[source]
