"""Which worker owns which partition: the validator's hook, and the owners topic written and
tailed (issue 15 item 2; docs/http.md, "Reading: the owner serves each run").

Shell module. The owner of partition p is the worker whose validator group member is assigned
admission partition p. The validator loop tells this worker's ``Ownership`` when its
assignment changes (two calls, never blocking the rebalance listener)::

    self.loop.ownership.assigned([tp.partition for tp in assigned], generation_of(consumer))
    self.loop.ownership.revoked([tp.partition for tp in revoked], generation_of(consumer))

and ``Ownership`` (1) tells the read side (``RunIndex``) at once, so it starts catching up the
partition's store, or drops it; (2) advertises the change on the compacted owners topic, keyed
by partition: ``{partition, workerId, instance, url, generation, at, owned}`` (Kafka Streams'
``application.server``, carried in a topic instead of the group's member metadata, which
aiokafka's assignors do not expose to the application); (3) tails that topic (it is tiny: one
live record per partition) from the beginning, folding it with ``app.core.runlog.ownership
.apply_owner``, so every worker knows every partition's owner and its advertised URL.

A worker without the validator role owns nothing and forwards every run request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from app.core.runlog.ownership import Owner, apply_owner, decode_owner, encode_owner

__all__ = ["NO_OWNERSHIP", "Ownership", "OwnershipHook", "generation_of"]

log = logging.getLogger("a2ui_stream.http")


def generation_of(consumer: Any) -> int:
    """The group generation ``consumer`` (an aiokafka group consumer) joined with, or -1.

    aiokafka keeps it on its coordinator and offers no public accessor; a missing attribute
    only costs the ordering guarantee of generations (the topic's order decides then)."""
    coordinator = getattr(consumer, "_coordinator", None)
    generation = getattr(coordinator, "generation", -1)
    return generation if isinstance(generation, int) and generation >= 0 else -1


class OwnershipHook:
    """What the validator loop calls. This base does nothing (a loop built without a worker's
    read side, e.g. in the fault kit or the benchmarks)."""

    def assigned(self, partitions: Iterable[int], generation: int = -1) -> None:
        """The validator was assigned ``partitions`` (admission partition numbers)."""

    def revoked(self, partitions: Iterable[int], generation: int = -1) -> None:
        """The validator lost ``partitions``."""


NO_OWNERSHIP = OwnershipHook()

Listener = Callable[[frozenset[int]], None]

# How long revoked partitions stay served here while the group decides the next assignment
# (a member that is dropped from the group gets no assignment at all).
RELEASE_GRACE_S = 30.0


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Ownership(OwnershipHook):
    """This worker's partitions, and every partition's advertised owner."""

    def __init__(self, bootstrap: str, owners_topic: str, worker_id: str, url: str) -> None:
        self.bootstrap = bootstrap
        self.owners_topic = owners_topic
        self.worker_id = worker_id
        self.url = url
        self.instance = uuid.uuid4().hex
        self.owned: set[int] = set()  # this worker's validator holds these (local truth)
        self.owners: dict[int, Owner] = {}  # the owners topic, folded
        self.ready = asyncio.Event()  # the owners topic read to its end as of start
        self.on_assigned: list[Listener] = []
        self.on_revoked: list[Listener] = []
        self._changed = asyncio.Event()
        self._outbox: asyncio.Queue[Owner] = asyncio.Queue()
        self._generation = -1
        self._releasing: frozenset[int] = frozenset()
        self._release_generation = -1
        self._release_timer: asyncio.TimerHandle | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None

    # -- the hook ---------------------------------------------------------------------------

    def assigned(self, partitions: Iterable[int], generation: int = -1) -> None:
        new = frozenset(partitions)
        self._generation = max(self._generation, generation)
        self._finish_release(self._releasing - new)
        self._releasing = frozenset()
        if self._release_timer is not None:
            self._release_timer.cancel()
            self._release_timer = None
        gained = new - self.owned
        self.owned |= new
        if gained:
            for listener in self.on_assigned:
                listener(gained)
            log.info("ownership: partitions %s assigned here", sorted(gained))
        for partition in sorted(new):  # a kept partition is claimed again at the new generation
            self._advertise(partition, owned=True, generation=generation)
        self._notify()

    def revoked(self, partitions: Iterable[int], generation: int = -1) -> None:
        """The partitions leave when the assignment that follows does not give them back (an
        eager rebalance revokes everything first, then assigns): until then, or for at most
        ``RELEASE_GRACE_S``, this worker keeps reading and serving them, so a rebalance that
        does not move a partition closes none of its streams. Serving meanwhile is safe: the
        read side tails the log itself, whoever writes it."""
        self._releasing |= frozenset(partitions) & self.owned
        self._release_generation = generation
        if self._releasing and self._release_timer is None:
            self._release_timer = asyncio.get_running_loop().call_later(
                RELEASE_GRACE_S, self._release_now
            )

    def _release_now(self) -> None:
        self._release_timer = None
        pending, self._releasing = self._releasing, frozenset()
        self._finish_release(pending)

    def _finish_release(self, lost: frozenset[int]) -> None:
        lost &= self.owned
        if not lost:
            return
        self.owned -= lost
        for listener in self.on_revoked:
            listener(lost)
        for partition in sorted(lost):
            self._advertise(partition, owned=False, generation=self._release_generation)
        self._notify()
        log.info("ownership: partitions %s revoked here", sorted(lost))

    def _advertise(self, partition: int, *, owned: bool, generation: int) -> None:
        self._outbox.put_nowait(
            Owner(partition, self.worker_id, self.instance, self.url, generation, _now(), owned)
        )

    # -- readers ----------------------------------------------------------------------------

    async def changed(self, timeout: float) -> None:
        """Return when the map or this worker's partitions change, or after ``timeout``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def claimed(self) -> set[int]:
        """The partitions some worker currently claims."""
        return {p for p, o in self.owners.items() if o.owned}

    def owner_urls(self) -> dict[str, str]:
        """Every other live owner's advertised URL, by instance."""
        return {
            o.instance: o.url
            for o in self.owners.values()
            if o.owned and o.instance != self.instance
        }

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        self._producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all")
        await self._producer.start()
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        await consumer.start()
        self._consumer = consumer
        tp = TopicPartition(self.owners_topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        self._end = (await consumer.end_offsets([tp]))[tp]

    async def run(self, stopping: asyncio.Event) -> None:
        """Publish this worker's claims and releases in order, and tail the owners topic."""
        publisher = asyncio.create_task(self._publish(stopping))
        try:
            await self._tail(stopping)
        finally:
            publisher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await publisher

    async def stop(self) -> None:
        """Release what this worker holds (a clean shutdown hands its partitions over without
        waiting for the group to notice), then close."""
        if self._release_timer is not None:
            self._release_timer.cancel()
        if self.owned and self._producer is not None:
            for partition in sorted(self.owned):
                key, value = encode_owner(
                    Owner(
                        partition,
                        self.worker_id,
                        self.instance,
                        self.url,
                        self._generation,
                        _now(),
                        False,
                    )
                )
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(
                        self._producer.send_and_wait(self.owners_topic, value, key=key), 5
                    )
        for client in (self._consumer, self._producer):
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.stop()

    async def _publish(self, stopping: asyncio.Event) -> None:
        assert self._producer is not None
        while not stopping.is_set():
            owner = await self._outbox.get()
            key, value = encode_owner(owner)
            delay = 0.2
            while not stopping.is_set():
                try:
                    await self._producer.send_and_wait(self.owners_topic, value, key=key)
                    break
                except Exception as exc:  # the broker is away: the claim must still go out
                    log.warning("ownership: advertising failed (%s)", type(exc).__name__)
                    await asyncio.sleep(delay)
                    delay = min(5.0, delay * 2)

    async def _tail(self, stopping: asyncio.Event) -> None:
        consumer = self._consumer
        assert consumer is not None
        tp = TopicPartition(self.owners_topic, 0)
        if self._end == 0:
            self.ready.set()
        while not stopping.is_set():
            try:
                batch = await consumer.getmany(timeout_ms=200, max_records=1000)
            except Exception as exc:
                log.warning("ownership: fetch failed (%s)", type(exc).__name__)
                await asyncio.sleep(0.5)
                continue
            changed = False
            for record in batch.get(tp, ()):
                update = decode_owner(record.key, record.value)
                if update is None:
                    continue
                after = apply_owner(self.owners.get(update.partition), update)
                if after is None:
                    self.owners.pop(update.partition, None)
                else:
                    self.owners[update.partition] = after
                changed = True
            if changed:
                self._notify()
            if not self.ready.is_set() and await consumer.position(tp) >= self._end:
                self.ready.set()
                self._notify()
