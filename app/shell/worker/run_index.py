"""The read side of the partitions this worker owns: the log's runs, tailed into a store.

Shell module (issue 15 item 2; docs/http.md, "Reading: the owner serves each run"). The OpenWOP
HTTP endpoints (event stream, poll, event-log read, fork, status, actions) read runs from here,
but only for the partitions this worker owns (``app.shell.worker.ownership``): a request for a
run on another worker's partition is forwarded to that owner (``app.shell.http.forward``). So a
worker's cost follows its partitions, not the whole log.

One consumer (no group) is assigned the owned partitions of the log and the dead letters. Each
fetched batch goes into the persistent store (``app.shell.worker.run_store``: the recorded bytes
per event, a summary per run and the partition's checkpoint, in one atomic write). On assignment
a partition resumes from its checkpoint, not from the beginning, and is *ready* once the store
has read the log up to the end it had when assigned; until then its runs are answered 503
(``app.core.runlog.ownership.route``). On revocation its runs leave memory and their readers are
told (an SSE stream closes, and its client resumes with ``Last-Event-ID`` at the new owner); the
files stay as a warm cache.

In memory: the runs someone is reading (a ``RunLog`` held by a stream or a poll, tracked
weakly) and a bounded LRU of recently read runs (``cache_bytes``; ``run_log.RunCache``); events
are decoded lazily, once per process (``LoggedEvent.event``; ``run_records`` files each fetched
record). Records arrive in partition order, so each run's events arrive in sequence order.

The dead letters of the owned partitions are tailed from their end at assignment, so an HTTP
admission (which the owner publishes) can wait for the outcome of the record it published:
every validator output carries the ``a2ui-source`` header naming the admission record's
partition and offset (docs/pipeline.md; ``run_outcomes``).

It is the process's one consumer of the log: it also reads the partitions the projector
follows and hands it their records (``app.shell.worker.log_feed``). This module is the index:
ownership, lifecycle, the tail and the readers. It imports ``app.core``, the shared shell
modules and ``app.shell.worker``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from app.core.runlog.keys import partition_for_run
from app.core.runlog.run_lifecycle import status_of
from app.shell.worker.kafka_io import MAX_FETCH_BYTES, partitions_of
from app.shell.worker.log_feed import LogFeed
from app.shell.worker.run_log import DECODED_FACTOR, LoggedEvent, RunCache, RunLog
from app.shell.worker.run_outcomes import Outcomes, RecordOutcome
from app.shell.worker.run_records import file_dead_letter, file_log_record
from app.shell.worker.run_store import RunStore, RunSummary

__all__ = ["PartitionUnsure", "RunIndex"]

log = logging.getLogger("a2ui_stream.http")

_CHECKPOINT_REFRESH_S = 60.0


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
        feed: LogFeed | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.log_topic = log_topic
        self.deadletter_topic = deadletter_topic
        self.store_path = store_path
        self._store: RunStore | None = None
        self.partitions = 0  # N, from the log topic's metadata
        self.owned: set[int] = set()  # partitions being tailed
        self.ready_partitions: set[int] = set()  # ... and read up to their end when assigned
        self.outcomes = Outcomes()  # of the recent admission records, and their waiters
        self.memory = RunCache(cache_bytes)  # the runs held in memory
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
        self.feed = LogFeed() if feed is None else feed
        self.feed.on_change = self._apply_later

    def _apply_later(self) -> None:
        """What the tail reads changed: applied before its next fetch."""
        self._changed = True
        self._wake.set()

    # -- ownership (called by app.shell.worker.ownership, synchronously) ----------------------

    def assigned(self, partitions: frozenset[int]) -> None:
        if partitions:
            self._wanted |= partitions
            self._apply_later()

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
        for run_id, run in list(self.memory.live.items()):
            if run.partition in partitions:
                run.moved = True
                self.memory.forget(run_id)
                run.notify()
        self._apply_later()

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
            # an offset below the log's start (retention) reads from its start, never skips
            auto_offset_reset="earliest",
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
                if not self.owned and not self.feed.follows:
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), 0.5)
                    continue
                batch = await consumer.getmany(timeout_ms=100, max_records=2000)
                self._ingest(batch)
                self._progress.set()
                self._progress = asyncio.Event()
                await self._check_ready(consumer)
                await self.feed.room()
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
        starts = self.feed.starts({p: self._log_next[p] for p in self.owned})
        tps = [TopicPartition(self.log_topic, p) for p in sorted(starts)]
        tps += [TopicPartition(self.deadletter_topic, p) for p in sorted(self.owned)]
        consumer.assign(tps)
        for partition, start in starts.items():
            consumer.seek(TopicPartition(self.log_topic, partition), start)
        for partition in self.owned:
            consumer.seek(
                TopicPartition(self.deadletter_topic, partition), self._dead_next[partition]
            )
        self.feed.applied(starts)

    async def _read_to(self, consumer: AIOKafkaConsumer, tp: TopicPartition) -> int:
        """How far the read side has read ``tp``: the consumer's position, or the store's next
        offset when further (the tail went back for the projector)."""
        position: int = await consumer.position(tp)
        if tp.topic == self.log_topic:
            return max(position, self._log_next.get(tp.partition, position))
        return position

    async def _check_ready(self, consumer: AIOKafkaConsumer) -> None:
        for partition, target in list(self._targets.items()):
            if await self._read_to(consumer, TopicPartition(self.log_topic, partition)) >= target:
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
                position = await self._read_to(consumer, TopicPartition(self.log_topic, partition))
                writer.advance(partition, position)
            writer.commit()

    # -- records ----------------------------------------------------------------------------

    def _ingest(self, batch: dict[TopicPartition, list[Any]]) -> None:
        writer = self.store.writer()
        touched: dict[str, RunLog] = {}
        for tp, records in batch.items():
            if tp.topic == self.log_topic:
                self.feed.offer(tp.partition, records)
            if tp.partition not in self.owned or not records:
                continue  # revoked while the batch was fetched, or only the projector's
            if tp.topic == self.log_topic:
                start = self._log_next.get(tp.partition, 0)
                if records[0].offset < start:  # read again for the projector: filed already
                    records = [r for r in records if r.offset >= start]
                self.records_read += len(records)
                for record in records:
                    file_log_record(
                        tp.partition, record, writer, touched, self.memory, self.outcomes
                    )
                if records:
                    self._log_next[tp.partition] = records[-1].offset + 1
                    writer.advance(tp.partition, records[-1].offset + 1)
            else:
                for record in records:
                    file_dead_letter(record, self.outcomes)
                if records:
                    self._dead_next[tp.partition] = records[-1].offset + 1
        writer.commit()
        self.feed.flush()
        for run in touched.values():
            run.notify()

    # -- the cache (run_log.RunCache) ---------------------------------------------------------

    @property
    def cached_bytes(self) -> int:
        return self.memory.cached_bytes

    def _load(self, run_id: str) -> RunLog | None:
        partition = partition_for_run(run_id, self.partitions) if self.partitions else -1
        if partition not in self.ready_partitions or self._store is None:
            return None
        found = self.memory.get(run_id)
        if found is not None:
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
        self.memory.hold(run, sum(len(e.data) for e in events) * DECODED_FACTOR)
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
        return len(self.memory.live)

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
                if await self._read_to(consumer, tp) < end:
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
        return await self.outcomes.wait(f"{partition}:{offset}", timeout)
