"""The validator: admission topic -> per-run log or dead-letter topic, exactly once.

Shell module. It runs inside the Faust worker (started by ``app.shell.faust_app``) but uses its
own aiokafka consumer and producer on the hot path, for two measured reasons (docs/pipeline.md):
Faust's per-event stream machinery caps a worker near 6k events/s (../shared/spec/kafka.md),
and one Kafka transaction must span the log append, the dead letter and the admission offset.

For each consumed batch it calls ``app.core.validator.validate`` once per record, in partition
order, and then, atomically where the broker supports transactions:
  - appends the recorded events to the log (key ``runId#seq``, the run's partition),
  - appends the dead letters (same partition number: the topics are co-partitioned),
  - commits the admission offsets.

Run state is not stored anywhere else: on every partition assignment it is rebuilt from the
per-run log itself (``reduce(apply, log)``), read with ``read_committed``, so it cannot diverge
from the log. Every output carries the header ``a2ui-source: <partition>:<offset>``; records
past the committed offset whose source already appears in the log or the dead-letter topic are
skipped, which keeps "exactly one outcome per record" even on a broker without transactions
(tansu), where the offset commit and the appends are not atomic.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import (
    CorruptRecordException,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
)

from app.core.dead_letter import dead_letter, redact_bytes
from app.core.fold import apply
from app.core.host_commands import ForkSource, fork_source_of
from app.core.intake import Intake, read_admission
from app.core.keys import run_of_log_key
from app.core.payload_rules import PayloadRules
from app.core.policy import HostPolicy
from app.core.refusal import Violation
from app.core.run_state import RunState
from app.core.validator import (
    Append,
    AppendMany,
    Duplicate,
    Reject,
    SourceRecord,
    letter_secrets,
    validate,
)
from app.shell.kafka_io import group_consumer, read_range, read_topic
from app.shell.metrics import Metrics
from app.shell.ownership import NO_OWNERSHIP, generation_of

__all__ = ["SOURCE_HEADER", "ValidatorConfig", "ValidatorLoop", "now_rfc3339"]

log = logging.getLogger("a2ui_stream.validator")

SOURCE_HEADER = "a2ui-source"
ISOLATE_AFTER_FAILURES = 3
# How long a restore waits for the transactions pending on its log and dead-letter partitions
# to complete (their markers); past it, it reads what is visible, as before. A dead member's
# open transaction also holds them until its timeout (30 s): the wait is bounded for that.
STABLE_SECONDS = 10.0


def now_rfc3339() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class ValidatorConfig:
    bootstrap: str
    admission_topic: str
    log_topic: str
    deadletter_topic: str
    partitions: int
    group_id: str
    transactional_id: str
    transactions: str = "auto"  # "auto" | "on" | "off"
    max_record_bytes: int = 1_048_576
    resumes_topic: str = ""
    fast_groups: bool = False
    max_batch: int = 5000
    batch_ms: int = 10


@dataclass
class _PartitionState:
    runs: dict[str, RunState] = field(default_factory=dict)
    seen: set[int] = field(default_factory=set)  # source offsets with an outcome already


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, loop: ValidatorLoop) -> None:
        self.loop = loop

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        # Wait for the batch in flight to commit, then forget the partitions' state.
        async with self.loop.lock:
            self.loop.generation += 1
            for tp in revoked:
                self.loop.forget(tp)
            # issue 15 item 2: the read side follows (app.shell.ownership; never blocks)
            self.loop.ownership.revoked(
                [tp.partition for tp in revoked], generation_of(self.loop.consumer)
            )

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        # Never restore inside the listener: a restore can wait seconds for a pending
        # transaction, and a member that does not rejoin within the rebalance timeout is
        # dropped from the group while it still believes it owns its partitions. Its next
        # transaction (aiokafka's offset commit has no generation fencing) then decided records
        # the new owner decided too (found by `a2ui-stream soak`, rebalance-kill: 4,526 records
        # with two outcomes). The partitions stay paused until their restore is installed.
        async with self.loop.lock:
            self.loop.generation += 1
            for tp in assigned:
                self.loop.restore_later(tp)
            # issue 15 item 2: the read side follows (app.shell.ownership; never blocks)
            self.loop.ownership.assigned(
                [tp.partition for tp in assigned], generation_of(self.loop.consumer)
            )


class ValidatorLoop:
    def __init__(
        self, config: ValidatorConfig, policy: HostPolicy, rules: PayloadRules, metrics: Metrics
    ) -> None:
        self.config = config
        self.policy = policy
        self.rules = rules
        self.metrics = metrics
        self.lock = asyncio.Lock()
        self.partitions: dict[int, _PartitionState] = {}
        self.consumer: AIOKafkaConsumer | None = None
        self.producer: AIOKafkaProducer | None = None
        self.transactional = False
        self.ready = asyncio.Event()
        self.positions: dict[int, int] = {}  # next admission offset to process, per partition
        # Bumped by every assignment, revocation and rewind (each moves fetch positions): a
        # batch gathered across one is dropped and fetched again from the restored positions.
        self.generation = 0
        # partitions being restored in the background (paused until installed)
        self.restoring: dict[TopicPartition, asyncio.Task[None]] = {}
        self.ownership = NO_OWNERSHIP  # issue 15 item 2: the worker's (app.shell.faust_app)

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.producer = await self._start_producer()
        self.consumer = group_consumer(
            self.config.bootstrap, self.config.group_id, fast_groups=self.config.fast_groups
        )
        await self.consumer.start()
        self.consumer.subscribe([self.config.admission_topic], listener=_Rebalance(self))

    async def _start_producer(self) -> AIOKafkaProducer:
        common: dict[str, Any] = {
            "bootstrap_servers": self.config.bootstrap,
            "acks": "all",
            "linger_ms": 5,
            "max_batch_size": 256 * 1024,
            # The log and dead-letter topics take records up to 8 MiB (topics/topics.json).
            "max_request_size": 9 * 1024 * 1024,
        }
        if self.config.transactions != "off":
            producer = AIOKafkaProducer(
                transactional_id=self.config.transactional_id,
                transaction_timeout_ms=30000,
                **common,
            )
            try:
                # InitProducerId with our stable transactional id also fences (aborts) the open
                # transaction of a previous incarnation of this worker (e.g. after SIGKILL).
                await asyncio.wait_for(producer.start(), 30)
                self.transactional = True
                log.info("validator: transactional producer %s", self.config.transactional_id)
                return producer
            except Exception as exc:
                with contextlib.suppress(Exception):
                    await producer.stop()
                if self.config.transactions == "on":
                    raise
                log.warning(
                    "validator: the broker refused transactions (%s); exactly-once then rests "
                    "on source-offset idempotency (docs/pipeline.md)",
                    type(exc).__name__,
                )
        producer = AIOKafkaProducer(**common)
        await producer.start()
        return producer

    async def stop(self) -> None:
        for task in list(self.restoring.values()):
            task.cancel()
        await asyncio.gather(*self.restoring.values(), return_exceptions=True)
        self.restoring.clear()
        if self.consumer is not None:
            with contextlib.suppress(Exception):
                await self.consumer.stop()
        if self.producer is not None:
            with contextlib.suppress(Exception):
                await self.producer.stop()

    # -- state restore ------------------------------------------------------------------------

    def forget(self, tp: TopicPartition) -> None:
        """Drop partition ``tp``'s state (revoked), cancelling its restore if one runs."""
        task = self.restoring.pop(tp, None)
        if task is not None:
            task.cancel()
        self.partitions.pop(tp.partition, None)

    def restore_later(self, tp: TopicPartition) -> None:
        """Pause ``tp`` and rebuild its state in the background (``restore``); the partition
        is fetched again once the state is installed. Call with the lock held."""
        assert self.consumer is not None
        self.forget(tp)
        self.consumer.pause(tp)
        self.restoring[tp] = asyncio.create_task(self._restore_until_done(tp))

    async def _restore_until_done(self, tp: TopicPartition) -> None:
        delay = 0.5
        while True:
            try:
                await self.restore(tp)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the broker is away: try again
                log.error(
                    "validator: restore of partition %d failed (%s); retrying in %.1f s",
                    tp.partition,
                    type(exc).__name__,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(10.0, delay * 2)

    async def restore(self, tp: TopicPartition) -> None:
        """Rebuild partition ``tp``'s run states from the log, and the set of source offsets
        past the committed offset that already have an outcome; then, if ``tp`` is still ours,
        install them, move the fetch position to that offset and resume the partition.

        The log and dead letters are read until no transaction is pending on them (``stable``)
        and only then is the committed offset fetched, and the consumer is moved to it: after a
        broker restart the markers of our last acknowledged transaction arrive seconds late,
        and the consumer's own position came from a committed offset fetched before them.
        Reading the state early and fetching from that stale position decided records twice
        (found by `a2ui-stream soak`, broker-restart, docs/reliability.md). Outputs past a
        committed offset that is still stale are in ``seen`` and skipped."""
        assert self.consumer is not None
        state = _PartitionState()
        log_records, dead = await asyncio.gather(
            *(
                read_topic(
                    self.config.bootstrap,
                    topic,
                    isolation="read_committed",
                    partitions=[tp.partition],
                    timeout=300,
                    stable=STABLE_SECONDS,
                )
                for topic in (self.config.log_topic, self.config.deadletter_topic)
            )
        )
        committed = await self.consumer.committed(tp) or 0
        for record in log_records:
            if record.key is None:
                continue
            run_id = run_of_log_key(record.key)
            if record.value is None:  # a tombstone: `runs delete` removed this run's events
                state.runs.pop(run_id, None)
                continue
            event = orjson.loads(record.value)
            state.runs[run_id] = apply(state.runs.get(run_id) or RunState.initial(run_id), event)
            _note_source(state.seen, record, tp.partition, committed)
        for record in dead:
            _note_source(state.seen, record, tp.partition, committed)
        async with self.lock:
            if self.restoring.get(tp) is not asyncio.current_task():
                return  # revoked (or restored again) meanwhile
            del self.restoring[tp]
            self.partitions[tp.partition] = state
            self.positions[tp.partition] = committed
            self.generation += 1
            self.consumer.seek(tp, committed)
            self.consumer.resume(tp)
        log.info(
            "validator: partition %d restored: %d runs from %d log records, %d outcomes past "
            "offset %d",
            tp.partition,
            len(state.runs),
            len(log_records),
            len(state.seen),
            committed,
        )

    # -- the loop -----------------------------------------------------------------------------

    async def run(self, stopping: asyncio.Event) -> None:
        assert self.consumer is not None
        # The run states are many small long-lived objects; CPython's default GC thresholds
        # re-scan them every few hundred allocations (measured: a third of the decision time
        # on a 20k-record run). Collect young objects far less often.
        gc.set_threshold(100_000, 50, 50)
        self.ready.set()
        failures = 0
        while not stopping.is_set():
            generation = self.generation
            batch = await self._gather_batch()
            if not batch:
                continue
            async with self.lock:
                if generation != self.generation:
                    # A rebalance ran while this batch was gathered: the listener runs beside
                    # getmany, so the batch may hold records fetched before its restore moved
                    # the positions, and again after it. Fetch it again (found by CI:
                    # test_crash_safety_under_sigkill decided such records twice).
                    log.info("validator: dropping a batch gathered across a rebalance")
                    self._seek_to_positions()
                    continue
                try:
                    if failures >= ISOLATE_AFTER_FAILURES:
                        await self._process_isolated(batch)
                    else:
                        await self._process(batch)
                    failures = 0
                except Exception as exc:
                    failures += 1
                    # The type only: an exception's text may quote a producer's payload.
                    log.error(
                        "validator: batch failed (%s, %d in a row); rewinding to the "
                        "committed offsets",
                        type(exc).__name__,
                        failures,
                    )
                    await self._rewind_until_done(stopping)

    def _seek_to_positions(self) -> None:
        """Fetch every assigned partition again from the next offset to decide (records the
        dropped batch held past it are fetched again, none is skipped)."""
        assert self.consumer is not None
        for tp in self.consumer.assignment():
            position = self.positions.get(tp.partition)
            if position is not None and tp.partition in self.partitions:
                self.consumer.seek(tp, position)

    async def _rewind_until_done(self, stopping: asyncio.Event) -> None:
        """Rewind, retrying while the broker is away: rewinding starts a producer and reads
        the log, which fail until it is back. Found by `a2ui-stream soak` (broker-restart,
        docs/reliability.md): one failed rewind crashed the validator service and the worker
        exited, leaving its partitions undecided."""
        delay = 0.5
        while not stopping.is_set():
            try:
                await self._rewind()
                return
            except Exception as exc:
                log.error(
                    "validator: rewind failed (%s); retrying in %.1f s",
                    type(exc).__name__,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(10.0, delay * 2)

    async def _process_isolated(self, batch: dict[TopicPartition, list[Any]]) -> None:
        """After repeated failures: one record per transaction, so one record the broker will
        not take (e.g. a recorded event over the topic's size limit) cannot stall its
        partition. Such a record becomes a ``record_unrecordable`` dead letter that keeps the
        digest and size of its bytes but not the bytes (they are what could not be written)."""
        for tp, records in batch.items():
            for record in records:
                try:
                    await self._process({tp: [record]})
                except Exception as exc:
                    if not _the_records_fault(exc):
                        raise  # e.g. the broker is away: rewind and retry, record unjudged
                    log.error(
                        "validator: record %d:%d cannot be recorded (%s); dead-lettering "
                        "it without its bytes",
                        tp.partition,
                        record.offset,
                        type(exc).__name__,
                    )
                    await self._abort_quietly()
                    await self._dead_letter_unrecordable(tp, record, type(exc).__name__)

    async def _abort_quietly(self) -> None:
        if self.transactional and self.producer is not None:
            with contextlib.suppress(Exception):
                await self.producer.stop()
            self.producer = await self._start_producer()

    async def _dead_letter_unrecordable(self, tp: TopicPartition, record: Any, error: str) -> None:
        assert self.producer is not None
        secrets = letter_secrets(self.policy, None, record.key)
        letter = dead_letter(
            Violation(
                "record_unrecordable",
                "record-write",
                "",
                f"the outcome of this record could not be written to Kafka ({error}); "
                "its bytes are not kept, their sha256 and size are",
                {"error": error},
            ),
            record.value,
            topic=tp.topic,
            partition=tp.partition,
            offset=record.offset,
            now=now_rfc3339(),
            run_id=None,
            correlation_id=None,
            secrets=secrets,
            keep_bytes=False,
        )
        send = (
            self.config.deadletter_topic,
            tp.partition,
            redact_bytes(record.key, secrets) if record.key is not None else None,
            orjson.dumps(letter),
            [(SOURCE_HEADER, f"{tp.partition}:{record.offset}".encode())],
        )
        await self._send_and_commit([send], {tp: record.offset + 1})
        self.metrics.count("refused", "record_unrecordable")
        self.positions[tp.partition] = record.offset + 1

    async def _gather_batch(self) -> dict[TopicPartition, list[Any]]:
        """Up to ``max_batch`` records, collected for at most ``batch_ms``. One transaction (or
        one produce-then-commit round trip) per batch: the round trip, not the CPU, bounds a
        small batch, so batches are as large as the latency budget allows."""
        assert self.consumer is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.batch_ms / 1000
        batch: dict[TopicPartition, list[Any]] = {}
        count = 0
        while count < self.config.max_batch:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            got = await self.consumer.getmany(
                timeout_ms=max(1, int(remaining * 1000)),
                max_records=self.config.max_batch - count,
            )
            if not got:
                break
            for tp, records in got.items():
                batch.setdefault(tp, []).extend(records)
                count += len(records)
        return batch

    async def _process(self, batch: dict[TopicPartition, list[Any]]) -> None:
        assert self.consumer is not None and self.producer is not None
        now = now_rfc3339()
        sends: list[tuple[str, int, bytes | None, bytes, list[tuple[str, bytes]]]] = []
        offsets: dict[TopicPartition, int] = {}
        staged: dict[int, dict[str, RunState]] = {}
        counts: list[tuple[str, str | None]] = []
        fork_sources = await self._fetch_fork_sources(batch)
        for tp, records in batch.items():
            part = self.partitions.get(tp.partition)
            if part is None or not records:
                continue  # revoked while the batch was fetched
            runs = staged.setdefault(tp.partition, {})

            def state_of(
                run_id: str, runs: dict[str, RunState] = runs, part: _PartitionState = part
            ) -> RunState | None:
                return runs.get(run_id) or part.runs.get(run_id)

            # The next offset to decide: offsets only grow, so a record below it was decided
            # already (before the offset this partition's state was rebuilt for, or earlier in
            # this very batch after a fetch position moved back) and is never decided again.
            nxt = self.positions[tp.partition]
            for record in records:
                if record.offset < nxt or record.offset in part.seen:
                    # Decided already: see above, or its outcome is in the log or dead letters.
                    counts.append(("skipped", None))
                    nxt = max(nxt, record.offset + 1)
                    continue
                nxt = record.offset + 1
                source = SourceRecord(
                    tp.topic,
                    tp.partition,
                    record.offset,
                    record.key,
                    record.value,
                    tuple(record.headers or ()),
                )
                out = validate(
                    source,
                    state_of,
                    self.policy,
                    self.rules,
                    now=now,
                    partitions=self.config.partitions,
                    max_bytes=self.config.max_record_bytes,
                    fetched=fork_sources.get,
                )
                header = [(SOURCE_HEADER, f"{tp.partition}:{record.offset}".encode())]
                if isinstance(out, Append):
                    runs[out.run_id] = out.state
                    sends.append((self.config.log_topic, tp.partition, out.key, out.value, header))
                    counts.append(("admitted", None))
                    if out.drift is not None:
                        log.warning(
                            "envelope_schema_version_drift run=%s sequence=%d from=%d",
                            out.run_id,
                            out.sequence,
                            out.drift,
                        )
                elif isinstance(out, AppendMany):
                    runs[out.run_id] = out.state
                    for _sequence, key, value in out.records:
                        sends.append((self.config.log_topic, tp.partition, key, value, header))
                    for resumed in out.resumes:  # same transaction as the events (issue 7)
                        sends.append(
                            (
                                self.config.resumes_topic,
                                tp.partition,
                                out.run_id.encode(),
                                resumed,
                                header,
                            )
                        )
                    counts.append(("admitted", None))
                elif isinstance(out, Reject):
                    sends.append(
                        (self.config.deadletter_topic, tp.partition, out.key, out.value, header)
                    )
                    counts.append(("refused", out.code))
                elif isinstance(out, Duplicate):
                    counts.append(("deduplicated", None))
            offsets[tp] = nxt  # never below the committed offset, whatever the batch held
        if not offsets:
            return
        await self._send_and_commit(sends, offsets)
        # Only now, with the outputs and offsets committed, does the new state become ours.
        for partition, runs in staged.items():
            part = self.partitions.get(partition)
            if part is not None:
                part.runs.update(runs)
                nxt = offsets[_tp(self, partition)]
                part.seen = {o for o in part.seen if o >= nxt}
                self.positions[partition] = nxt
        for outcome, code in counts:
            self.metrics.count(outcome, code)

    async def _fetch_fork_sources(
        self, batch: dict[TopicPartition, list[Any]]
    ) -> dict[ForkSource, list[dict[str, Any]] | None]:
        """Read from the log itself the source events of every fork command in the batch
        (app.core.host_commands: a command names where they are, never carries them)."""
        found: dict[ForkSource, list[dict[str, Any]] | None] = {}
        for records in batch.values():
            for record in records:
                if record.value is None or b'"run.fork"' not in record.value:
                    continue
                intake = read_admission(
                    record.key, record.value, max_bytes=self.config.max_record_bytes
                )
                source = fork_source_of(intake.record) if isinstance(intake, Intake) else None
                if source is None or source in found:
                    continue
                found[source] = await self._read_source(source)
        return found

    async def _read_source(self, source: ForkSource) -> list[dict[str, Any]] | None:
        try:
            records = await read_range(
                self.config.bootstrap,
                self.config.log_topic,
                source.partition,
                source.first_offset,
                source.last_offset,
            )
        except (TimeoutError, OSError, ValueError) as exc:
            log.warning("validator: fork source unreadable (%s)", type(exc).__name__)
            return None
        by_sequence: dict[int, dict[str, Any]] = {}
        for record in records:
            if record.key is None or record.value is None:
                continue
            if run_of_log_key(record.key) != source.source_run_id:
                continue
            event = orjson.loads(record.value)
            if isinstance(event, dict) and isinstance(event.get("sequence"), int):
                by_sequence[event["sequence"]] = event
        return [by_sequence[i] for i in range(source.from_seq) if i in by_sequence]

    async def _send_and_commit(
        self,
        sends: list[tuple[str, int, bytes | None, bytes, list[tuple[str, bytes]]]],
        offsets: dict[TopicPartition, int],
    ) -> None:
        assert self.consumer is not None and self.producer is not None
        if self.transactional:
            async with self.producer.transaction():
                # Wait for every append INSIDE the transaction, before the offsets join it:
                # measured with aiokafka 0.14, a batch the broker refuses (e.g.
                # MessageSizeTooLarge) fails only its own future while commit_transaction still
                # commits the offsets, which would lose that record's outcome. An exception
                # here aborts the transaction instead.
                await asyncio.gather(*await self._send_batches(sends))
                await self.producer.send_offsets_to_transaction(offsets, self.config.group_id)
            return
        await asyncio.gather(*await self._send_batches(sends))
        await self.consumer.commit(offsets)

    async def _send_batches(
        self, sends: list[tuple[str, int, bytes | None, bytes, list[tuple[str, bytes]]]]
    ) -> list[asyncio.Future[Any]]:
        """Produce ``sends`` as whole record batches per topic-partition, in order: a batch
        per partition costs one accumulator round instead of one per record (measured: the
        per-record ``send`` was a third of the validator's CPU)."""
        assert self.producer is not None
        producer = self.producer
        builders: dict[tuple[str, int], Any] = {}
        futures: list[asyncio.Future[Any]] = []
        for topic, partition, key, value, headers in sends:
            builder = builders.get((topic, partition))
            if builder is None:
                builder = builders[(topic, partition)] = producer.create_batch()
            if builder.append(key=key, value=value, timestamp=None, headers=headers) is None:
                futures.append(await producer.send_batch(builder, topic, partition=partition))
                builder = builders[(topic, partition)] = producer.create_batch()
                if builder.append(key=key, value=value, timestamp=None, headers=headers) is None:
                    raise ValueError(f"a record of {len(value)} bytes exceeds the batch size")
        for (topic, partition), builder in builders.items():
            if builder.record_count():
                futures.append(await producer.send_batch(builder, topic, partition=partition))
        return futures

    async def _rewind(self) -> None:
        """After a failed batch: drop the staged work, rebuild state, resume at committed."""
        assert self.consumer is not None
        if self.transactional and self.producer is not None:
            with contextlib.suppress(Exception):
                await self.producer.stop()
            self.producer = await self._start_producer()
        # Each restore moves its partition's fetch position to the offset it rebuilt for.
        self.generation += 1
        for tp in list(self.consumer.assignment()):
            self.restore_later(tp)

    def lag(self) -> dict[int, int]:
        """Records not yet processed, per assigned admission partition (high watermark minus
        the next offset to process)."""
        consumer = self.consumer
        if consumer is None:
            return {}
        lags: dict[int, int] = {}
        for tp in consumer.assignment():
            high = consumer.highwater(tp)
            nxt = self.positions.get(tp.partition)
            if high is not None and nxt is not None:
                lags[tp.partition] = max(0, high - nxt)
        return lags


# What the broker refuses because of the record itself. Anything else (a connection lost, a
# timeout, a coordinator moving) says nothing about the record: dead-lettering it as
# unrecordable then would give a good record the wrong outcome.
_RECORD_FAULTS = (
    MessageSizeTooLargeError,
    RecordTooLargeError,
    RecordListTooLargeError,
    CorruptRecordException,
    ValueError,  # _send_batches: larger than a whole record batch
)


def _the_records_fault(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, _RECORD_FAULTS):
            return True
        seen = seen.__cause__
    return False


def _tp(loop: ValidatorLoop, partition: int) -> TopicPartition:
    return TopicPartition(loop.config.admission_topic, partition)


def _note_source(seen: set[int], record: Any, partition: int, committed: int) -> None:
    for name, value in record.headers or ():
        if name == SOURCE_HEADER:
            src_partition, _, offset = value.decode().partition(":")
            if int(src_partition) == partition and int(offset) >= committed:
                seen.add(int(offset))
