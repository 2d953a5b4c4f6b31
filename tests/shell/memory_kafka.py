"""An in-memory double of the Kafka the validator loop talks to, for the shell tier: topics of
records with offsets, read_committed visibility, committed group offsets, and transactional
ids with epochs, so that a producer whose id another one initialized since is refused
(``ProducerFenced``) and its open transaction is aborted, as the broker does.

It models what the loop relies on and nothing more: no replication, no markers taking offsets,
no group protocol (the tests call the rebalance listener themselves, as aiokafka would). Gates
(asyncio events) hold an ``InitProducerId`` (by transactional id) or one producer's commits
where a test wants to interleave two members.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import ProducerFenced

__all__ = ["MemoryConsumer", "MemoryKafka", "MemoryProducer", "Rec"]


@dataclass
class Rec:
    """A record as aiokafka's ConsumerRecord shows it (the fields the loop reads)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    state: str = "committed"  # "pending" (in an open transaction) | "committed" | "aborted"

    def body(self) -> bytes:
        """The value of a record that has one (a tombstone has none: asking is a test's bug)."""
        assert self.value is not None, self
        return self.value


@dataclass
class _Txn:
    records: list[Rec] = field(default_factory=list)
    offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)


class MemoryKafka:
    def __init__(self) -> None:
        self.logs: dict[tuple[str, int], list[Rec]] = defaultdict(list)
        self.committed: dict[tuple[str, str, int], int] = {}  # (group, topic, partition)
        self.epochs: dict[str, int] = defaultdict(int)
        self.open: dict[str, _Txn] = {}
        self.init_gates: dict[str, asyncio.Event] = {}  # transactional id -> held until set
        self.inits: list[str] = []  # transactional ids, in the order they were initialized
        self.refuse: dict[str, int] = {}  # topic -> the next batches sent there that fail
        # batches sent still open: aiokafka holds such a batch for the producer's linger_ms
        self.open_batches_sent = 0
        self.offset_commits = 0  # transactions that carried offsets (send_offsets_to_transaction)

    def append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Iterable[tuple[str, bytes]] = (),
        state: str = "committed",
    ) -> Rec:
        records = self.logs[(topic, partition)]
        rec = Rec(topic, partition, len(records), key, value, list(headers), state)
        records.append(rec)
        return rec

    def visible(self, topic: str, partition: int) -> list[Rec]:
        """What a read_committed consumer reads."""
        return [r for r in self.logs[(topic, partition)] if r.state == "committed"]

    def tail(self, topic: str, partition: int, start: int) -> list[Rec]:
        """What a read_committed consumer reads from offset ``start`` on."""
        return [r for r in self.logs[(topic, partition)][start:] if r.state == "committed"]

    def pending(self, topic: str, partition: int) -> bool:
        return any(r.state == "pending" for r in self.logs[(topic, partition)])

    # -- transactions -------------------------------------------------------------------------

    async def init(self, tid: str) -> int:
        gate = self.init_gates.get(tid)
        if gate is not None:
            await gate.wait()
        self._abort(tid)  # the previous holder's open transaction
        self.epochs[tid] += 1
        self.inits.append(tid)
        return self.epochs[tid]

    def fence(self, tid: str) -> None:
        """What the broker does to a transaction past its timeout: abort it, bump the epoch."""
        self._abort(tid)
        self.epochs[tid] += 1

    def check(self, tid: str, epoch: int) -> None:
        if self.epochs[tid] != epoch:
            raise ProducerFenced()

    def _abort(self, tid: str) -> None:
        txn = self.open.pop(tid, None)
        for rec in txn.records if txn else ():
            rec.state = "aborted"

    def write(
        self,
        tid: str,
        epoch: int,
        rec_args: tuple[str, int, bytes | None, bytes | None, Iterable[tuple[str, bytes]]],
    ) -> None:
        self.check(tid, epoch)
        rec = self.append(*rec_args, state="pending")
        self.open.setdefault(tid, _Txn()).records.append(rec)

    def stage_offsets(self, tid: str, epoch: int, group: str, offsets: dict[Any, int]) -> None:
        self.check(tid, epoch)
        txn = self.open.setdefault(tid, _Txn())
        for tp, offset in offsets.items():
            txn.offsets[(group, tp.topic, tp.partition)] = offset

    def end(self, tid: str, epoch: int, commit: bool) -> None:
        self.check(tid, epoch)
        txn = self.open.pop(tid, _Txn())
        for rec in txn.records:
            rec.state = "committed" if commit else "aborted"
        if commit:
            self.committed.update(txn.offsets)


@dataclass(frozen=True)
class Metadata:
    offset: int


class _Builder:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
        self.size = 0
        self.closed = False

    def append(
        self, *, key: bytes | None, value: bytes | None, timestamp: Any, headers: Any
    ) -> Any:
        assert isinstance(headers, list)  # aiokafka's builder takes nothing else
        if self.closed:
            return None
        size = len(value or b"")
        if self.records and self.size + size > self.limit or size > self.limit:
            self.closed = True  # as aiokafka's BatchBuilder: a full batch closes itself
            return None
        self.records.append((key, value, headers))
        self.size += size
        return object()

    def close(self) -> None:
        self.closed = True

    def record_count(self) -> int:
        return len(self.records)


class _Transaction:
    def __init__(self, producer: MemoryProducer) -> None:
        self.producer = producer

    async def __aenter__(self) -> _Transaction:
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        producer = self.producer
        assert producer.tid is not None
        if exc_type is None:
            if producer.hold is not None:
                await producer.hold.wait()  # it stands still before its commit
            producer.kafka.end(producer.tid, producer.epoch, True)
        elif not isinstance(exc, ProducerFenced):
            producer.kafka.end(producer.tid, producer.epoch, False)


class MemoryProducer:
    def __init__(self, kafka: MemoryKafka, tid: str | None, *, batch_bytes: int = 1 << 20) -> None:
        self.kafka, self.tid, self.batch_bytes = kafka, tid, batch_bytes
        self.epoch = 0
        self.stopped = False
        self.hold: asyncio.Event | None = None  # set by a test: commits wait for it

    async def start(self) -> None:
        if self.tid is not None:
            self.epoch = await self.kafka.init(self.tid)

    async def stop(self) -> None:
        self.stopped = True

    def transaction(self) -> _Transaction:
        return _Transaction(self)

    def create_batch(self) -> _Builder:
        return _Builder(self.batch_bytes)

    async def send_batch(self, builder: _Builder, topic: str, *, partition: int) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if not builder.closed:
            self.kafka.open_batches_sent += 1
        if self.kafka.refuse.get(topic):
            self.kafka.refuse[topic] -= 1
            future.set_exception(ConnectionError("the broker went away"))
            return future
        try:
            first = len(self.kafka.logs[(topic, partition)])
            for key, value, headers in builder.records:
                if self.tid is None:
                    self.kafka.append(topic, partition, key, value, headers)
                else:
                    self.kafka.write(self.tid, self.epoch, (topic, partition, key, value, headers))
            future.set_result(Metadata(first))  # as aiokafka's: the batch's base offset
        except ProducerFenced as exc:
            future.set_exception(exc)
        return future

    async def send_offsets_to_transaction(self, offsets: dict[Any, int], group: str) -> None:
        assert self.tid is not None
        self.kafka.offset_commits += 1
        self.kafka.stage_offsets(self.tid, self.epoch, group, offsets)


class MemoryConsumer:
    """A group member whose assignment the test sets (``assign``/``revoke`` call the loop's
    rebalance listener the way aiokafka does)."""

    def __init__(self, kafka: MemoryKafka, group: str) -> None:
        self.kafka, self.group = kafka, group
        self.assigned: set[TopicPartition] = set()
        self.paused: set[TopicPartition] = set()
        self.positions: dict[TopicPartition, int] = {}
        self.listener: Any = None
        self.commit_failures = 0  # the next commits that fail (a broker going away)

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def subscribe(self, topics: list[str], listener: Any) -> None:
        self.listener = listener

    def assignment(self) -> set[TopicPartition]:
        return set(self.assigned)

    async def assign(self, tps: Iterable[TopicPartition]) -> None:
        tps = set(tps)
        self.assigned |= tps
        for tp in tps:
            self.positions[tp] = self.kafka.committed.get((self.group, tp.topic, tp.partition), 0)
        await self.listener.on_partitions_assigned(tps)

    async def revoke(self, tps: Iterable[TopicPartition]) -> None:
        tps = set(tps)
        await self.listener.on_partitions_revoked(tps)
        self.assigned -= tps
        self.paused -= tps

    def pause(self, tp: TopicPartition) -> None:
        self.paused.add(tp)

    def resume(self, tp: TopicPartition) -> None:
        self.paused.discard(tp)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    async def committed(self, tp: TopicPartition) -> int | None:
        return self.kafka.committed.get((self.group, tp.topic, tp.partition))

    def highwater(self, tp: TopicPartition) -> int:
        return len(self.kafka.logs[(tp.topic, tp.partition)])

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        if self.commit_failures:
            self.commit_failures -= 1
            raise ConnectionError("the broker went away")
        for tp, offset in offsets.items():
            self.kafka.committed[(self.group, tp.topic, tp.partition)] = offset

    async def getmany(
        self, *, timeout_ms: int, max_records: int
    ) -> dict[TopicPartition, list[Rec]]:
        out: dict[TopicPartition, list[Rec]] = {}
        for tp in sorted(self.assigned - self.paused):
            position = self.positions.get(tp, 0)
            records = self.kafka.logs[(tp.topic, tp.partition)][position : position + max_records]
            if records:
                out[tp] = records
                max_records -= len(records)
                self.positions[tp] = position + len(records)
        await asyncio.sleep(0 if out else 0.002)
        return out
