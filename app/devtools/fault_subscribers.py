"""Many subscribers read by one consumer, for the fault scenarios (a resync storm needs
dozens or hundreds of them; one aiokafka consumer and producer pair each would measure the
client library, not the projector).

Shell module. Each subscriber is what ``app.shell.cli.subscriber_client.SubscriberClient`` is: a
registration, its own topic, a ``SubscriberView`` folded by
``app.core.projection.subscriber.receive`` (the same fail-closed core), and a resync request on any
frame that does not apply. Only the transport is shared.

``SseReader`` is the other kind of reader: one HTTP client of one run's SSE stream that behaves
as a browser's ``EventSource`` does (the ``id`` field sets its last event ID; when a stream ends
or its connection fails it connects again, sending ``Last-Event-ID``), to whichever worker
of the deployment is up, and notes every event it received across its connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from app.core.http.wire_ids import project_run_id
from app.core.projection.subscriber import receive
from app.core.projection.subscriber_view import Delivered, ResyncNeeded, SubscriberView
from app.core.projection.subscriptions import Subscription, encode_subscription
from app.core.projection.surfaces import Projection
from app.core.runlog.topic_plan import subscriber_topic
from app.devtools.fault_accounting import compare_surfaces
from app.devtools.fault_kit import RULES, topic_names
from app.shell.settings import Settings
from app.shell.wire import RESYNC_HEADER
from app.shell.worker.kafka_io import MAX_FETCH_BYTES
from app.shell.worker.topics_admin import ensure_topics, load_definitions

__all__ = ["SseReader", "SubscriberFleet", "wait_converged"]


@dataclass
class SubscriberFleet:
    bootstrap: str
    settings: Settings
    ids: Sequence[str]
    delta: Mapping[str, bool] = field(default_factory=dict)  # default: every other one
    runs: Mapping[str, frozenset[str] | None] = field(default_factory=dict)  # default: all
    full_every: int = 20
    views: dict[str, SubscriberView] = field(default_factory=dict)
    frames: Counter[str] = field(default_factory=Counter)  # by kind, all subscribers
    resyncs_requested: int = 0
    # the (partition, offset) of every resync request sent, and of every request an answer
    # frame names (its a2ui-resync header); answers counts every answer frame
    request_sources: set[tuple[int, int]] = field(default_factory=set)
    answered_sources: set[tuple[int, int]] = field(default_factory=set)
    answers: int = 0

    def __post_init__(self) -> None:
        definitions = load_definitions()
        self.specs = {
            sid: subscriber_topic(
                definitions,
                sid,
                prefix=self.settings.topic_prefix,
                replication=self.settings.replication,
            )
            for sid in self.ids
        }
        self.by_topic = {spec.name: sid for sid, spec in self.specs.items()}
        self.resync_topic = topic_names(self.settings)["resync"]
        self.views = {sid: SubscriberView() for sid in self.ids}
        self.delta = {sid: self.delta.get(sid, i % 2 == 0) for i, sid in enumerate(self.ids)}
        self.runs = {sid: self.runs.get(sid) for sid in self.ids}
        self.producer: AIOKafkaProducer | None = None

    async def register(self) -> None:
        """Create every subscriber topic, then publish every registration."""
        await ensure_topics(self.bootstrap, list(self.specs.values()))
        producer = await self._producer()
        registry = topic_names(self.settings)["subscriptions"]
        futures = [
            await producer.send(
                registry,
                encode_subscription(
                    Subscription(sid, self.runs[sid], self.delta[sid], self.full_every)
                ),
                key=sid.encode(),
            )
            for sid in self.ids
        ]
        await asyncio.gather(*futures)

    async def _producer(self) -> AIOKafkaProducer:
        if self.producer is None:
            self.producer = AIOKafkaProducer(
                bootstrap_servers=self.bootstrap, acks="all", linger_ms=5
            )
            await self.producer.start()
        return self.producer

    async def close(self) -> None:
        if self.producer is not None:
            with contextlib.suppress(Exception):
                await self.producer.stop()
            self.producer = None

    async def run(self, stopping: asyncio.Event) -> None:
        """Read every subscriber topic from its beginning until ``stopping`` is set."""
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            max_partition_fetch_bytes=MAX_FETCH_BYTES,
        )
        await consumer.start()
        try:
            tps = [
                TopicPartition(spec.name, p)
                for spec in self.specs.values()
                for p in range(spec.partitions)
            ]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            while not stopping.is_set():
                batch = await consumer.getmany(timeout_ms=200, max_records=5000)
                for tp, records in batch.items():
                    sid = self.by_topic[tp.topic]
                    for record in records:
                        if record.value is not None:
                            self._note_answer(record.headers)
                            await self._receive(sid, record.value)
        finally:
            with contextlib.suppress(Exception):
                await consumer.stop()

    def _note_answer(self, headers: Any) -> None:
        for name, value in headers or ():
            if name == RESYNC_HEADER:
                partition, _, offset = value.decode().partition(":")
                self.answered_sources.add((int(partition), int(offset)))
                self.answers += 1

    def unanswered(self) -> int:
        """Resync requests sent that no answer frame has named yet."""
        return len(self.request_sources - self.answered_sources)

    async def _receive(self, sid: str, frame: bytes) -> None:
        self.views[sid], outcome = receive(self.views[sid], frame, RULES)
        if isinstance(outcome, Delivered):
            self.frames[outcome.kind] += 1
        elif isinstance(outcome, ResyncNeeded):
            await self._request(outcome, sid)

    async def _request(self, need: ResyncNeeded, sid: str) -> None:
        request = need.request(sid)
        if request is None:
            return
        self.resyncs_requested += 1
        producer = await self._producer()
        sent = await producer.send(self.resync_topic, orjson.dumps(request), key=sid.encode())
        sent.add_done_callback(self._note_request)

    def _note_request(self, sent: asyncio.Future[Any]) -> None:
        if not sent.cancelled() and sent.exception() is None:
            metadata = sent.result()
            self.request_sources.add((metadata.partition, metadata.offset))

    def held(self) -> int:
        return sum(len(view.surfaces) for view in self.views.values())

    async def storm(self) -> int:
        """Every subscriber asks for a full frame of every surface it holds, all at once."""
        producer = await self._producer()
        futures = []
        for sid, view in self.views.items():
            for (run_id, surface_id), held in view.surfaces.items():
                need = ResyncNeeded(run_id, surface_id, "resync storm", held.sequence)
                request = need.request(sid)
                if request is not None:
                    futures.append(
                        await producer.send(
                            self.resync_topic, orjson.dumps(request), key=sid.encode()
                        )
                    )
        for metadata in await asyncio.gather(*futures):
            self.request_sources.add((metadata.partition, metadata.offset))
        self.resyncs_requested += len(futures)
        return len(futures)


async def wait_converged(
    materialized: Projection,
    views: Callable[[], Mapping[str, SubscriberView]],
    *,
    timeout: float,
    runs: Mapping[str, frozenset[str] | None] | None = None,
) -> dict[str, list[str]]:
    """Wait (bounded) until every subscriber's surfaces (``views()``, read afresh each time)
    equal the materialized ones of the runs it follows (``runs``; default all); return the
    remaining differences by subscriber (all empty when converged)."""
    follows = runs or {}
    deadline = time.monotonic() + timeout
    while True:
        differences = {
            sid: compare_surfaces(materialized, view, follows.get(sid))
            for sid, view in views().items()
        }
        if not any(differences.values()) or time.monotonic() > deadline:
            return differences
        await asyncio.sleep(0.5)


@dataclass
class SseReader:
    """One SSE client of run ``run_id`` (``/runs/{runId}/events?streamMode=debug``: every
    recorded event). ``bases()`` names the workers that are up, asked afresh at each connect;
    the client goes to the next one in turn (behind a load balancer a client lands on any
    worker; one that does not own the run forwards it to the owner). ``received`` holds
    ``(sequence, eventId)`` of every event in arrival order, over all connections."""

    run_id: str
    bases: Callable[[], Sequence[str]]
    token: str
    turn: int = 0
    last_event_id: str | None = None
    received: list[tuple[int, str]] = field(default_factory=list)
    connects: int = 0  # streams opened (200)
    resumes: int = 0  # ... of them with Last-Event-ID
    ended: int = 0  # streams the server ended (a moved partition closes its streams)
    failed: int = 0  # connections that failed (refused, reset, timed out)
    answers: Counter[int] = field(default_factory=Counter)  # non-200 statuses, retried
    # non-200 statuses other than 503 (unavailable, Retry-After) once the run had events: a
    # browser's EventSource does not reconnect after one, so the client would stop there
    refusals: Counter[int] = field(default_factory=Counter)

    @property
    def last_sequence(self) -> int:
        return self.received[-1][0] if self.received else -1

    async def run(self, session: aiohttp.ClientSession, stopping: asyncio.Event) -> None:
        path = f"/runs/{project_run_id(self.run_id)}/events?streamMode=debug"
        while not stopping.is_set():
            bases = self.bases()
            if not bases:
                await asyncio.sleep(0.5)
                continue
            base = bases[self.turn % len(bases)]
            self.turn += 1
            headers = {"Authorization": f"Bearer {self.token}", "Accept": "text/event-stream"}
            if self.last_event_id is not None:
                headers["Last-Event-ID"] = self.last_event_id
            try:
                async with session.get(base + path, headers=headers) as response:
                    if response.status != 200:
                        self.answers[response.status] += 1
                        if self.received and response.status != 503:
                            self.refusals[response.status] += 1
                        await response.read()
                        await asyncio.sleep(0.5)  # Retry-After: 1 on a 503; a 404 comes early
                        continue
                    self.connects += 1
                    self.resumes += "Last-Event-ID" in headers
                    await self._read(response)
                    self.ended += 1
            except (aiohttp.ClientError, TimeoutError, OSError):
                self.failed += 1
                await asyncio.sleep(0.5)

    async def _read(self, response: aiohttp.ClientResponse) -> None:
        """Dispatch each message as EventSource does (WHATWG HTML, server-sent events: fields
        by line, a blank line dispatches, a comment line is ignored)."""
        buffer = b""
        async for chunk in response.content.iter_any():
            buffer += chunk.replace(b"\r\n", b"\n")
            *messages, buffer = buffer.split(b"\n\n")
            for message in messages:
                self._dispatch(message)

    def _dispatch(self, message: bytes) -> None:
        data: list[bytes] = []
        for line in message.split(b"\n"):
            name, _, value = line.partition(b":")
            value = value[1:] if value.startswith(b" ") else value
            if name == b"id":
                self.last_event_id = value.decode()
            elif name == b"data":
                data.append(value)
        if data and self.last_event_id is not None:
            event = orjson.loads(b"\n".join(data))
            self.received.append((int(self.last_event_id), str(event.get("eventId"))))
