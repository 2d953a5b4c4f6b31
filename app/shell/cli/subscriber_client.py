"""The subscriber client: register, consume a subscriber topic, hand out only validated surfaces.

Shell module, importable by user services::

    client = SubscriberClient(bootstrap, "ui-7", runs=["run-1"], delta=True)
    await client.register()            # creates the topic, writes the registry record
    async for delivered in client.surfaces(stop_event):
        render(delivered.surface)      # HeldSurface: validated content, trust, actions flags

Each frame goes through ``app.core.projection.subscriber.receive``: deltas are applied by the strict
RFC 6902 applier and the result is re-validated (v1 closed catalog, v2 profile) before it is
handed out; on any failure the surface is held as stale and a resync request is published, and
the projector answers with one full frame (docs/projection.md). Every ``full_every``-th delta
also carries a digest of the projector's surface: a held surface that drifted (e.g. one the
application mutated) is caught there and resynced the same way. Nothing unvalidated leaves.

The core decides when to ask (once per failing state, with an exponential backoff on repeats,
never again for a surface whose own full frame fails until it changes); this shell only sends
what it returns, at the time it says: the clock is read here and passed in, and the requests
the backoff held back are collected with ``due_resyncs`` each time the consumer's poll returns.
A surface that fails re-validation is reported once per state (``reports``, and ``on_report``
when given), with the surface, the rule, the pointer and the sequence; the run's other surfaces
keep being delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from app.core.admission.payload_rules import PayloadRules
from app.core.projection.frames import DEFAULT_FULL_EVERY
from app.core.projection.subscriber import receive
from app.core.projection.subscriber_resync import due_resyncs
from app.core.projection.subscriber_view import (
    Delivered,
    InvalidSurface,
    ResyncNeeded,
    SubscriberView,
)
from app.core.projection.subscriptions import Subscription, encode_subscription
from app.core.runlog.topic_plan import subscriber_topic
from app.shell.schema_files import load_schema_documents
from app.shell.settings import Settings, load_settings
from app.shell.worker.topics_admin import desired_for, ensure_topics, load_definitions

__all__ = ["MAX_REPORTS", "SubscriberClient"]

MAX_REPORTS = 1000  # reports kept on the client (each also goes to ``on_report``)


@dataclass
class SubscriberClient:
    bootstrap: str
    subscriber_id: str
    runs: Iterable[str] | None = None  # None: every run
    delta: bool = False
    full_every: int = DEFAULT_FULL_EVERY  # deltas between digest checks
    settings: Settings = field(default_factory=load_settings)
    view: SubscriberView = field(default_factory=SubscriberView)
    resyncs_requested: int = 0
    # invalid surfaces, one report per failing state (the core says when), the latest kept
    reports: deque[InvalidSurface] = field(default_factory=lambda: deque(maxlen=MAX_REPORTS))
    on_report: Callable[[InvalidSurface], None] | None = None
    clock: Callable[[], float] = time.monotonic  # the backoff's clock, read here only

    def __post_init__(self) -> None:
        self.rules = PayloadRules.from_documents(load_schema_documents())
        topics = {spec.id: spec.name for spec in desired_for(self.settings)}
        self.registry_topic = topics["subscriptions"]
        self.resync_topic = topics["resync"]
        self.spec = subscriber_topic(
            load_definitions(),
            self.subscriber_id,
            prefix=self.settings.topic_prefix,
            replication=self.settings.replication,
        )

    @property
    def topic(self) -> str:
        return self.spec.name

    async def register(self) -> None:
        """Create the subscriber topic, then publish the registration (key = subscriberId)."""
        await ensure_topics(self.bootstrap, [self.spec])
        runs = None if self.runs is None else frozenset(self.runs)
        record = encode_subscription(
            Subscription(self.subscriber_id, runs, self.delta, self.full_every)
        )
        await self._produce(self.registry_topic, self.subscriber_id.encode(), record)

    async def unregister(self) -> None:
        """A tombstone for the subscriberId: the projector stops writing to the topic."""
        await self._produce(self.registry_topic, self.subscriber_id.encode(), None)

    async def _produce(self, topic: str, key: bytes, value: bytes | None) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all")
        try:  # start inside: a broker that is away must not leave the client unclosed
            await producer.start()
            await producer.send_and_wait(topic, value, key=key)
        finally:
            with contextlib.suppress(Exception):
                await producer.stop()

    async def surfaces(self, stopping: asyncio.Event) -> AsyncIterator[Delivered]:
        """Validated surfaces, in frame order, until ``stopping`` is set."""
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            max_partition_fetch_bytes=8 * 1024 * 1024,
        )
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all")
        try:  # both closed whichever start fails (the broker away, a bad address)
            await consumer.start()
            await producer.start()
            tps = [TopicPartition(self.topic, p) for p in range(self.spec.partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            while not stopping.is_set():
                batch = await consumer.getmany(timeout_ms=200)  # also the backoff's tick
                for records in batch.values():
                    for record in records:
                        if record.value is None:
                            continue
                        now = self.clock()
                        self.view, outcome = receive(self.view, record.value, self.rules, now)
                        if isinstance(outcome, Delivered):
                            yield outcome
                            continue
                        if outcome.report is not None:
                            self._report(outcome.report)
                        if isinstance(outcome, ResyncNeeded):
                            await self._request_resync(producer, outcome)
                self.view, due = due_resyncs(self.view, self.clock())
                for need in due:
                    await self._request_resync(producer, need)
        finally:
            with contextlib.suppress(Exception):
                await consumer.stop()
            with contextlib.suppress(Exception):
                await producer.stop()

    def _report(self, report: InvalidSurface) -> None:
        self.reports.append(report)
        if self.on_report is not None:
            self.on_report(report)

    async def _request_resync(self, producer: AIOKafkaProducer, need: ResyncNeeded) -> None:
        request = need.request(self.subscriber_id)
        if request is None:
            return  # the frame did not say which surface it was for: nothing to ask for
        self.resyncs_requested += 1
        await producer.send_and_wait(
            self.resync_topic, orjson.dumps(request), key=self.subscriber_id.encode()
        )
