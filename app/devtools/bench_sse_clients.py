"""What the SSE bench publishes (a full v1 surface, then one-text updates) and who reads it: an
SSE ``Subscriber`` noting each event's receipt and bytes, and the baseline ``LogTail`` (a
plain aiokafka consumer of the log); delays, spreads and percentiles over them.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, cast

import orjson
from aiokafka import AIOKafkaConsumer

from app.core.runlog.keys import run_of_log_key, sequence_of_log_key
from app.devtools.bench_output import pct
from app.devtools.bench_projection import v1_component
from app.shell.worker.kafka_io import partitions_of

__all__ = [
    "LogTail",
    "NOW",
    "SseReader",
    "Subscriber",
    "admission_records",
    "bytes_per_subscriber",
    "delays_ms",
    "percentiles",
    "spreads_ms",
    "surfaces",
]


NOW = "2026-01-01T00:00:00Z"


def surfaces(components: int, events: int) -> list[dict[str, Any]]:
    """A full v1 payload, then ``events`` payloads that each change one text component."""
    items = [v1_component(i) for i in range(components)]
    texts = [i for i, c in enumerate(items) if c["component"] == "text"]
    out = [items]
    for n in range(events):
        k, changed = texts[n % len(texts)], list(out[-1])
        changed[k] = {**changed[k], "text": f"Update {n}"}
        out.append(changed)
    return [
        {"catalogVersion": "0.9.1", "surface": {"title": "Bench", "components": c}} for c in out
    ]


def admission_records(run_id: str, payloads: list[dict[str, Any]]) -> list[tuple[bytes, bytes]]:
    """Admission records ``{runId, envelope}``: schemaVersion-1 ``ui.a2ui-surface`` envelopes."""
    out, nonce = [], uuid.uuid4().hex[:8]
    for n, payload in enumerate(payloads):
        ids = {"envelopeId": f"env-sse-{nonce}-{n}", "correlationId": f"corr-sse-{nonce}-{n}"}
        envelope = {"type": "ui.a2ui-surface", "schemaVersion": 1, **ids, "payload": payload}
        envelope["meta"] = {"source": "ai-generation", "ts": NOW}
        out.append((run_id.encode(), orjson.dumps({"runId": run_id, "envelope": envelope})))
    return out


@dataclass
class Subscriber:
    """One SSE connection's accounting: per event id, (receipt time in s, bytes of the frame)."""

    delta: bool
    received: dict[int, tuple[float, int]] = field(default_factory=dict)
    status: int | None = None
    last: int = -1
    _buffer: bytes = b""

    def feed(self, chunk: bytes, now: float) -> None:
        """Account a chunk read at ``now``: a frame is received when its blank line arrives."""
        *frames, self._buffer = (self._buffer + chunk).split(b"\n\n")
        for frame in frames:
            if frame.startswith(b"id: "):  # not a keep-alive comment
                self.last = int(frame[4 : frame.index(b"\n")])
                self.received[self.last] = (now, len(frame) + 2)


class SseReader(asyncio.Protocol):
    """One SSE subscriber's connection, read as the bytes arrive: an HTTP/1.1 GET, its status
    and headers, then the chunked body de-chunked into ``Subscriber.feed`` with the time
    ``data_received`` was called (the delivery to this socket). The bench reads 500 streams
    in one process: through aiohttp's client each receipt cost about 35 µs of this process's
    CPU (the task woken per chunk, the stream reader, the parser), stamped once the reading
    task ran, so the last subscribers of an event were stamped late by the readers before
    them (measured: the bench process at 37% of a core beside the worker's 42%, docs/http.md).
    ``answered`` resolves when the status is read (or the connection ended before), ``done``
    when the subscriber has its last event or the connection ends."""

    def __init__(self, sub: Subscriber, request: bytes, last: int) -> None:
        self.sub, self.request, self.last = sub, request, last
        loop = asyncio.get_running_loop()
        self.answered: asyncio.Future[None] = loop.create_future()  # the status is read
        self.done: asyncio.Future[None] = loop.create_future()
        self.transport: asyncio.Transport | None = None
        self._head: bytes | None = b""  # None once the status and headers are read
        self._body = b""  # chunked bytes not de-chunked yet

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream socket's
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = time.time()
        if self._head is not None:
            head, found, rest = (self._head + data).partition(b"\r\n\r\n")
            if not found:
                self._head = head
                return
            self._head = None
            self.sub.status = int(head.split(b" ", 2)[1])
            self.answered.set_result(None)
            data = rest
        self._body += data
        payload = self._dechunk()
        if payload:
            self.sub.feed(payload, now)
        if self.sub.last >= self.last and self.transport is not None:
            self.transport.close()

    def _dechunk(self) -> bytes:
        """The payload of every whole chunk buffered (RFC 9112 §7.1), leaving the rest."""
        out, body, at = [], self._body, 0
        while True:
            end = body.find(b"\r\n", at)
            if end < 0:
                break
            size = int(body[at:end].split(b";", 1)[0], 16)
            if size == 0 or len(body) < end + 2 + size + 2:
                break
            out.append(body[end + 2 : end + 2 + size])
            at = end + 2 + size + 2
        self._body = body[at:]
        return b"".join(out)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.answered.done():
            self.answered.set_result(None)
        if not self.done.done():
            self.done.set_result(None)


def delays_ms(subs: list[Subscriber], appended_ms: dict[int, int]) -> list[float]:
    """Receipt minus append, in ms, for every (subscriber, expected event) pair received."""
    return [
        sub.received[seq][0] * 1000 - stamp
        for sub in subs
        for seq, stamp in appended_ms.items()
        if seq in sub.received
    ]


def spreads_ms(subs: list[Subscriber], seqs: list[int]) -> list[float]:
    """Per event: the last subscriber's receipt minus the first's (the fan-out's own span)."""
    out = []
    for seq in seqs:
        times = [s.received[seq][0] for s in subs if seq in s.received]
        if times:
            out.append((max(times) - min(times)) * 1000)
    return out


def bytes_per_subscriber(subs: list[Subscriber], seqs: list[int]) -> float:
    totals = [sum(s.received[q][1] for q in seqs if q in s.received) for s in subs]
    return sum(totals) / max(1, len(totals))


def percentiles(name: str, values: list[float]) -> dict[str, float | None]:
    return {
        f"{name}_ms_p50": pct(values, 0.5) if values else None,
        f"{name}_ms_p99": pct(values, 0.99) if values else None,
    }


class LogTail:
    """The baseline: a plain aiokafka consumer of the log topic from its end (read_committed);
    ``seen[(run, seq)] = (receipt s, append ms)``."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.seen: dict[tuple[str, int], tuple[float, int]] = {}

    async def run(self, started: asyncio.Event, stop: asyncio.Event) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, isolation_level="read_committed"
        )
        await consumer.start()
        try:
            tps = await partitions_of(consumer, self.topic)
            consumer.assign(tps)
            await consumer.seek_to_end(*tps)
            for tp in tps:  # resolve the lazy seek before anything is published
                await consumer.position(tp)
            started.set()
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=100)
                now = time.time()
                for records in batch.values():
                    for r in records:
                        key = (run_of_log_key(r.key), sequence_of_log_key(r.key))
                        self.seen[key] = (now, r.timestamp)
        finally:
            await consumer.stop()

    def of(self, run_id: str) -> dict[int, tuple[float, int]]:
        return {seq: v for (run, seq), v in self.seen.items() if run == run_id}
