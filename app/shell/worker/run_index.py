"""The read side of the partitions this worker owns: the log's runs, tailed into a store.

Shell module (issue 15 item 2; docs/http.md, "Reading: the owner serves each run"). The OpenWOP
HTTP endpoints (event stream, poll, event-log read, fork, status, actions) read runs from here,
but only for the partitions this worker owns (``app.shell.worker.ownership``): a request for a
run on another worker's partition is forwarded to that owner (``app.shell.http.forward``). So a
worker's cost follows its partitions, not the whole log.

One consumer (no consumer group) is assigned the owned partitions of the log topic, read with
``read_committed``, and of the dead-letter topic. Each fetched batch goes into the persistent
store (``app.shell.worker.run_store``: the recorded bytes per event, a summary per run and the
partition's checkpoint, in one atomic write). On assignment a partition resumes from its
checkpoint, not from the beginning, and is *ready* once the store has read the log up to the
end it had when assigned; until then its runs are answered 503 (``app.core.ownership.route``).
On revocation its runs leave memory and their readers are told (an SSE stream closes, and its
client resumes with ``Last-Event-ID`` at the new owner); the files stay as a warm cache.

In memory: the runs someone is reading (a ``RunLog`` held by a stream or a poll, tracked
weakly) and a bounded LRU of recently read runs (``cache_bytes``); events are decoded lazily,
once per process (``LoggedEvent.event``). Records arrive in partition order, so each run's
events arrive in sequence order.

The dead letters of the owned partitions are tailed from their end at assignment, so an HTTP
admission (which the owner publishes) can wait for the outcome of the record it published:
every validator output carries the ``a2ui-source`` header naming the admission record's
partition and offset (docs/pipeline.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from app.core.keys import partition_for_run, run_of_log_key, sequence_of_log_key
from app.core.run_lifecycle import INITIAL_STATUS, TERMINAL_STATUSES, status_after, status_of
from app.shell.wire import SOURCE_HEADER, TYPE_HEADER
from app.shell.worker.kafka_io import MAX_FETCH_BYTES, partitions_of
from app.shell.worker.run_store import RunStore, RunSummary

__all__ = ["LoggedEvent", "RecordOutcome", "RunIndex", "RunLog"]

log = logging.getLogger("a2ui_stream.http")

_RECENT_OUTCOMES = 10_000  # a waiter registers microseconds after its publish returns
_DECODED_FACTOR = 6  # a decoded event dict holds about 5.6x its JSON (measured, issue 15)
_CHECKPOINT_REFRESH_S = 60.0


class LoggedEvent:
    """One recorded event as the log holds it: its bytes (served as they are) and, decoded on
    first use, its document."""

    __slots__ = ("_event", "appended_ms", "data", "offset", "partition", "sequence", "type")

    def __init__(
        self,
        sequence: int,
        type: str,
        data: bytes,
        event: dict[str, Any] | None,
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
    def event(self) -> dict[str, Any]:
        found = self._event
        if found is None:
            decoded = orjson.loads(self.data)
            found = self._event = decoded if isinstance(decoded, dict) else {}
        return found

    def shown(self, data: bytes, event: dict[str, Any]) -> LoggedEvent:
        """The same event as a reader is shown it (its trust rewritten, app.core.sse_frames)."""
        return LoggedEvent(
            self.sequence, self.type, data, event, self.partition, self.offset, self.appended_ms
        )

    def __repr__(self) -> str:
        return f"LoggedEvent({self.sequence}, {self.type!r}, {self.partition}:{self.offset})"


@dataclass(frozen=True, slots=True)
class RecordOutcome:
    """What the validator did with one admission record: the events it appended (``events``)
    or the dead letter it wrote (``letter``)."""

    events: tuple[LoggedEvent, ...] = ()
    letter: dict[str, Any] | None = None


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
        self.changed.set()
        self.changed = asyncio.Event()
        for waker in self.wakers:
            if not waker.done():
                waker.set_result(True)
        self.wakers.clear()


def _source_of(record: Any) -> str | None:
    """The ``a2ui-source`` header: the admission record a validator output is the outcome of."""
    return _headers_of(record)[0]


def _parsed(partition: int, record: Any) -> dict[str, Any] | None:
    """A log record's event, or None (logged) when its value is not a JSON object."""
    try:
        event = orjson.loads(record.value)
    except orjson.JSONDecodeError:
        log.error("run index: undecodable log record %d:%d", partition, record.offset)
        return None
    return event if isinstance(event, dict) else None


def _headers_of(record: Any) -> tuple[str | None, str | None]:
    """A log record's ``a2ui-source`` and ``a2ui-type`` headers (None where absent: a record
    written before the validator wrote its type is parsed for it)."""
    source = event_type = None
    for name, value in record.headers or ():
        if name == SOURCE_HEADER:
            source = bytes(value).decode(errors="replace")
        elif name == TYPE_HEADER:
            event_type = bytes(value).decode(errors="replace")
    return source, event_type


class PartitionUnsure(Exception):
    """A lookup that can say neither "here it is" nor "not recorded": the run's partition is
    not (or no longer) owned and read here, or its tail did not catch up in time."""


class RunIndex:
    """Tails the owned partitions of the log (into the store) and of the dead letters."""

    def __init__(
        self,
        bootstrap: str,
        log_topic: str,
        deadletter_topic: str,
        store_path: Path,
        *,
        cache_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.bootstrap = bootstrap
        self.log_topic = log_topic
        self.deadletter_topic = deadletter_topic
        self.store_path = store_path
        self._store: RunStore | None = None
        self.cache_bytes = cache_bytes
        self.partitions = 0  # N, from the log topic's metadata
        self.owned: set[int] = set()  # partitions being tailed
        self.ready_partitions: set[int] = set()  # ... and read up to their end when assigned
        self.outcomes: OrderedDict[str, RecordOutcome] = OrderedDict()
        self._outcome_waiters: dict[str, list[asyncio.Future[RecordOutcome]]] = {}
        self._live: weakref.WeakValueDictionary[str, RunLog] = weakref.WeakValueDictionary()
        self._cache: OrderedDict[str, RunLog] = OrderedDict()
        self._cached_bytes = 0
        self._consumer: AIOKafkaConsumer | None = None
        self._appended: AIOKafkaConsumer | None = None  # read_uncommitted: high watermarks
        # What the group assigned last (set at once by assigned/revoked): the truth that
        # _apply_changes converges the tail to, also across the awaits it makes meanwhile;
        # ``_changed``: it moved since the tail last converged.
        self._wanted: set[int] = set()
        self._changed = False
        self._wake = asyncio.Event()
        self._progress = asyncio.Event()  # set (and replaced) after every fetch round
        self._targets: dict[int, int] = {}  # log end offset to reach before a partition is ready
        self._log_next: dict[int, int] = {}
        self._dead_next: dict[int, int] = {}
        self._refreshed = 0.0
        self.loaded_runs = 0  # runs read from the store (cache misses), for /metrics
        self.records_read = 0  # log records tailed since start

    # -- ownership (called by app.shell.worker.ownership, synchronously) ----------------------

    def assigned(self, partitions: frozenset[int]) -> None:
        if partitions:
            self._wanted |= partitions
            self._changed = True
            self._wake.set()

    def revoked(self, partitions: frozenset[int]) -> None:
        """The partitions leave at once: no read is answered for them from here on, and their
        runs' readers are woken to stop (the consumer is reassigned by the tail loop)."""
        if not partitions:
            return
        self._wanted -= partitions
        self.owned -= partitions
        self.ready_partitions -= partitions
        for partition in partitions:
            self._targets.pop(partition, None)
        for run_id, run in list(self._live.items()):
            if run.partition in partitions:
                run.moved = True
                self._uncache(run_id)
                self._live.pop(run_id, None)
                run.notify()
        self._changed = True
        self._wake.set()

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def store(self) -> RunStore:
        assert self._store is not None, "run index not started"
        return self._store

    def opened_store(self) -> RunStore | None:
        """The store once started (the projector rebuilds runs from it), else None."""
        return self._store

    def warm_partitions(self) -> frozenset[int]:
        """The log partitions this worker's store holds warm (a fresh checkpoint): offered to
        the consumer groups' assignment (app.shell.worker.assignor), which may come before
        ``start``, so the store is opened here when it is not yet."""
        if self._store is None:
            self._store = RunStore.open(self.store_path, self.log_topic)
        return self._store.checkpointed()

    async def start(self) -> None:
        """Open the store (``RunStore.open``: rebuilt when damaged; ``StoreLockedError`` when
        another process holds it), unless ``warm_partitions`` did, and the consumer."""
        if self._store is None:
            self._store = RunStore.open(self.store_path, self.log_topic)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            isolation_level="read_committed",
            max_partition_fetch_bytes=MAX_FETCH_BYTES,
        )
        await consumer.start()
        self._consumer = consumer
        # Only asked for end offsets: with read_uncommitted they are the high watermarks,
        # which include the records of a transaction that has committed but whose markers
        # are not written yet (read_to_end).
        appended = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        await appended.start()
        self._appended = appended
        self.partitions = len(await partitions_of(consumer, self.log_topic))

    async def stop(self) -> None:
        for client in (self._consumer, self._appended):
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.stop()
        if self._store is not None:
            self._store.close()

    async def run(self, stopping: asyncio.Event) -> None:
        consumer = self._consumer
        assert consumer is not None
        while not stopping.is_set():
            try:
                if self._changed:
                    await self._apply_changes(consumer)
                if not self.owned:
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), 0.5)
                    continue
                batch = await consumer.getmany(timeout_ms=100, max_records=2000)
                self._ingest(batch)
                self._progress.set()
                self._progress = asyncio.Event()
                await self._check_ready(consumer)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a broker hiccup: keep tailing
                log.warning("run index: fetch failed (%s)", type(exc).__name__)
                await asyncio.sleep(0.5)

    async def _apply_changes(self, consumer: AIOKafkaConsumer) -> None:
        """Tail what the group assigned last (``_wanted``). A change that comes while this
        awaits the broker (the rebalance listener runs beside the tail) is respected: a
        partition revoked meanwhile is not tailed, one assigned again is applied next round."""
        self._changed = False
        for partition in set(self._log_next) - self._wanted:
            self._log_next.pop(partition, None)
            self._dead_next.pop(partition, None)
        gained: set[int] = set()
        for partition in sorted(self._wanted - self.owned):
            log_tp = TopicPartition(self.log_topic, partition)
            dead_tp = TopicPartition(self.deadletter_topic, partition)
            ends = await consumer.end_offsets([log_tp, dead_tp])
            if partition not in self._wanted:
                continue  # revoked while its end offsets were asked for
            gained.add(partition)
            start = self.store.resume_offset(partition, ends[log_tp])
            self._log_next[partition] = start
            self._dead_next[partition] = ends[dead_tp]
            self._targets[partition] = ends[log_tp]
            log.info(
                "run index: partition %d assigned: reading the log from offset %d to %d",
                partition,
                start,
                ends[log_tp],
            )
        self.owned = (self.owned | gained) & self._wanted
        for partition in gained - self.owned:  # revoked after its offsets were read
            self._targets.pop(partition, None)
            self._log_next.pop(partition, None)
            self._dead_next.pop(partition, None)
        tps: list[TopicPartition] = []
        for partition in sorted(self.owned):
            tps.append(TopicPartition(self.log_topic, partition))
            tps.append(TopicPartition(self.deadletter_topic, partition))
        consumer.assign(tps)
        for partition in self.owned:
            consumer.seek(TopicPartition(self.log_topic, partition), self._log_next[partition])
            consumer.seek(
                TopicPartition(self.deadletter_topic, partition), self._dead_next[partition]
            )

    async def _check_ready(self, consumer: AIOKafkaConsumer) -> None:
        for partition, target in list(self._targets.items()):
            if await consumer.position(TopicPartition(self.log_topic, partition)) >= target:
                del self._targets[partition]
                if partition in self.owned:
                    self.ready_partitions.add(partition)
                    log.info("run index: partition %d is ready", partition)
        now = time.monotonic()
        if now - self._refreshed > _CHECKPOINT_REFRESH_S:
            # keep the checkpoints' age current while idle (RunStore.resume_offset's rule)
            self._refreshed = now
            writer = self.store.writer()
            for partition in self.owned:
                position = await consumer.position(TopicPartition(self.log_topic, partition))
                writer.advance(partition, position)
            writer.commit()

    # -- records ----------------------------------------------------------------------------

    def _ingest(self, batch: dict[TopicPartition, list[Any]]) -> None:
        writer = self.store.writer()
        touched: dict[str, RunLog] = {}
        for tp, records in batch.items():
            if tp.partition not in self.owned:
                continue  # revoked while the batch was fetched
            if tp.topic == self.log_topic:
                self.records_read += len(records)
                for record in records:
                    self._on_log(tp.partition, record, writer, touched)
                if records:
                    self._log_next[tp.partition] = records[-1].offset + 1
                    writer.advance(tp.partition, records[-1].offset + 1)
            else:
                for record in records:
                    self._on_dead_letter(record)
                if records:
                    self._dead_next[tp.partition] = records[-1].offset + 1
        writer.commit()
        for run in touched.values():
            run.notify()

    def _on_log(self, partition: int, record: Any, writer: Any, touched: dict[str, RunLog]) -> None:
        if record.key is None:
            return
        try:
            run_id = run_of_log_key(record.key)
            sequence = sequence_of_log_key(record.key)
        except (ValueError, UnicodeDecodeError):
            return
        if "\x00" in run_id:  # never admitted (app.core.identifiers); the store's separator
            return
        run = self._live.get(run_id)
        if record.value is None:  # a tombstone (`runs delete`)
            gone = writer.delete(partition, run_id, sequence)
            if run is not None:
                run.events = [e for e in run.events if e.sequence != sequence]
                if gone or not run.events:
                    self._uncache(run_id)
                    self._live.pop(run_id, None)
                touched[run_id] = run
            return
        source, event_type = _headers_of(record)
        # Only a run someone reads, or an outcome someone waits for, keeps the decoded event;
        # anything else keeps at most the bytes (decoded if ever read: lazily, once). The type
        # comes from the record's header, so an event nobody reads is never parsed here.
        wanted = run is not None or (source is not None and source in self._outcome_waiters)
        event: dict[str, Any] | None = None
        if wanted or event_type is None:
            event = _parsed(partition, record)
            if event is None:
                return
            if event_type is None:
                event_type = str(event.get("type", ""))
        appended = int(record.timestamp or 0)
        writer.put(partition, run_id, sequence, event_type, record.value, record.offset, appended)
        logged = LoggedEvent(
            sequence,
            event_type,
            record.value,
            event if wanted else None,
            partition,
            record.offset,
            appended,
        )
        if run is not None:
            self._append(run, logged)
            touched[run_id] = run
        if source is not None:
            self._note(source, RecordOutcome(events=(logged,)))

    def _append(self, run: RunLog, logged: LoggedEvent) -> None:
        if run.events and logged.sequence <= run.events[-1].sequence:
            # A re-appended sequence (never with transactions): the later record wins.
            run.events = [e for e in run.events if e.sequence != logged.sequence]
            run.events.append(logged)
            run.events.sort(key=lambda e: e.sequence)
        else:
            run.events.append(logged)
        run.status = status_after(run.status, logged.type)
        if run.run_id in self._cache:
            self._charge(run, len(logged.data) * _DECODED_FACTOR)

    def _on_dead_letter(self, record: Any) -> None:
        if record.value is None:
            return
        try:
            letter = orjson.loads(record.value)
        except orjson.JSONDecodeError:
            return
        source = _source_of(record)
        if isinstance(letter, dict) and source is not None:
            self._note(source, RecordOutcome(letter=letter))

    def _note(self, source: str, outcome: RecordOutcome) -> None:
        earlier = self.outcomes.get(source)
        if earlier is not None and outcome.events:  # a command appends several events
            outcome = RecordOutcome(events=earlier.events + outcome.events)
        self.outcomes[source] = outcome
        self.outcomes.move_to_end(source)
        while len(self.outcomes) > _RECENT_OUTCOMES:
            self.outcomes.popitem(last=False)
        for waiter in self._outcome_waiters.pop(source, ()):
            if not waiter.done():
                waiter.set_result(outcome)

    # -- the cache ----------------------------------------------------------------------------

    def _charge(self, run: RunLog, amount: int) -> None:
        run.charge += amount
        self._cached_bytes += amount
        while self._cached_bytes > self.cache_bytes and len(self._cache) > 1:
            oldest = next(iter(self._cache))
            if oldest == run.run_id:
                self._cache.move_to_end(oldest)
                oldest = next(iter(self._cache))
                if oldest == run.run_id:
                    break
            self._uncache(oldest)

    def _uncache(self, run_id: str) -> None:
        found = self._cache.pop(run_id, None)
        if found is not None:
            self._cached_bytes -= found.charge
            found.charge = 0

    @property
    def cached_bytes(self) -> int:
        return self._cached_bytes

    def _load(self, run_id: str) -> RunLog | None:
        partition = partition_for_run(run_id, self.partitions) if self.partitions else -1
        if partition not in self.ready_partitions or self._store is None:
            return None
        found = self._live.get(run_id)
        if found is not None:
            if run_id in self._cache:
                self._cache.move_to_end(run_id)
            return found
        stored = self.store.events(partition, run_id)
        if not stored:
            return None
        self.loaded_runs += 1
        events = [
            LoggedEvent(e.sequence, e.type, e.data, None, partition, e.offset, e.appended_ms)
            for e in stored
        ]
        run = RunLog(run_id, events, status=status_of(e.type for e in events), partition=partition)
        self._live[run_id] = run
        self._cache[run_id] = run
        self._charge(run, sum(len(e.data) for e in events) * _DECODED_FACTOR)
        return run

    # -- readers ----------------------------------------------------------------------------

    def get(self, run_id: str) -> RunLog | None:
        """The run, if its partition is owned here and ready and it has a recorded event."""
        return self._load(run_id)

    def summaries(self) -> Iterator[RunSummary]:
        """Every run of the ready partitions, from the store (the viewer's listing)."""
        for partition in sorted(self.ready_partitions):
            yield from self.store.summaries(partition)

    def in_memory(self) -> int:
        """Runs held in memory (cached, or held by a reader)."""
        return len(self._live)

    async def lookup(self, run_id: str, timeout: float) -> RunLog | None:
        """The run, or None only once this worker has read its partition of the log up to
        where it ended when asked and still owns it (read-your-writes: a run recorded a
        moment ago by a write this worker did not see is never "not found" merely because the
        tail is behind); PartitionUnsure when it cannot say. Known runs answer at once; waits
        at most ``timeout`` seconds."""
        found = self._load(run_id)
        if found is not None:
            return found
        if not self.partitions:
            raise PartitionUnsure("the log's partitions are not known yet")
        partition = partition_for_run(run_id, self.partitions)
        complete = await self.read_to_end([partition], timeout)
        found = self._load(run_id)
        if found is not None:
            return found
        if partition not in self.ready_partitions or partition not in self.owned:
            raise PartitionUnsure(f"partition {partition} moved while the request waited")
        if not complete:
            raise PartitionUnsure(f"partition {partition} was not read to its end in time")
        return None

    async def read_to_end(
        self, partitions: Iterable[int], timeout: float, *, dead_letters: bool = False
    ) -> bool:
        """Wait until these owned partitions of the log (and of the dead letters too, with
        ``dead_letters``) have been read past every record appended to them as of now: up to
        their high watermark, not their last stable offset. Kafka answers a transaction's
        commit once its coordinator has logged it and writes the markers that make its records
        readable afterwards (KIP-98), so right after the validator committed, the last stable
        offset can still stop before records it has decided (measured: 68 of 200 reads right
        after a commit); a record of a transaction still open is waited for too, since it may
        commit. False when that did not happen within ``timeout``."""
        consumer, appended = self._consumer, self._appended
        topics = (self.log_topic, self.deadletter_topic) if dead_letters else (self.log_topic,)
        tps = [TopicPartition(t, p) for t in topics for p in partitions if p in self.owned]
        if consumer is None or appended is None or not tps:
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            ends = await asyncio.wait_for(appended.end_offsets(tps), timeout)
        except Exception as exc:  # the broker is away: answer from what has been read
            log.warning("run index: end offsets unavailable (%s)", type(exc).__name__)
            return False
        while True:
            behind = False
            for tp, end in ends.items():
                if tp.partition not in self.owned:
                    return False
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

    async def progress(self, timeout: float) -> None:
        """Return after the next fetch round (or ``timeout``)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._progress.wait(), timeout)

    async def outcome_of(self, partition: int, offset: int, timeout: float) -> RecordOutcome | None:
        """The outcome of the admission record at ``partition:offset``, waiting at most
        ``timeout`` seconds (None: not seen in time, e.g. an E2 deduplication writes nothing)."""
        source = f"{partition}:{offset}"
        known = self.outcomes.get(source)
        if known is not None:
            return known
        waiter: asyncio.Future[RecordOutcome] = asyncio.get_running_loop().create_future()
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
