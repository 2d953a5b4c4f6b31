"""The projector's fan-out on the wire: one Produce request per broker for many subscriber topics,
one record batch per distinct frame.

Shell module, the write path of ``projector_fanout.send_all`` (and what ``bench projection``
times). One update to N in-sync subscribers is N records of the same key, value and headers,
each to its own one-partition topic (``a2ui.subscriber.{id}``). Sent one ``producer.send`` each,
aiokafka builds a batch buffer, a future and a request entry per record, and decodes the
response in pure Python: 56-67 µs of CPU per subscriber until acknowledged (measured,
docs/projection.md). Here the batch of each distinct frame is built once and its bytes are
shared by every topic that gets it alone; the request is encoded and its response decoded
with ``struct`` (the Produce v3-v7 layout, which does not change between those versions but
for the response's ``log_start_offset`` from v5), and it goes through the producer's own
client (its connection, its negotiated version, its metadata).

At least once, as before: a topic whose partition answers an error, a request that fails or
times out, a topic of more than one partition or without a known leader is sent again (or
sent) through ``producer.send``, which retries and refreshes metadata as it always did; a
frame sent twice is harmless (docs/projection.md). Records to one topic keep their order:
they go in one batch, appended atomically, and a caller awaits a call before the next.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Sequence
from io import BytesIO
from typing import Any, ClassVar
from weakref import WeakKeyDictionary

from aiokafka import TopicPartition
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.produce import ProduceRequest_v3
from aiokafka.record.default_records import DefaultRecordBatchBuilder

__all__ = ["Frame", "decode_errors", "encode_request", "partition_of", "produce_frames"]

# (topic, key, value, headers): one frame to one topic
Frame = tuple[str, bytes, bytes, tuple[tuple[str, bytes], ...]]

ACKS_ALL = -1
TIMEOUT_MS = 30_000
# A request's records, at most (the producer's max_request_size is larger; several requests
# to one broker go out together).
REQUEST_BYTES = 1 << 20
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_ERROR = struct.Struct(">ih")
_ONE_PARTITION_0 = _I32.pack(1) + _I32.pack(0)
_NULL_TRANSACTIONAL_ID = _I16.pack(-1)


def encode_request(entries: Sequence[tuple[bytes, bytes]], timeout_ms: int = TIMEOUT_MS) -> bytes:
    """A Produce v3-v7 request body: no transactional id, acks all, and for each entry (the
    topic's encoded name, a record batch) that batch to the topic's partition 0."""
    parts = [part for name, batch in entries for part in (topic_head(name), _sized(batch))]
    return _encode_parts(parts, len(entries), timeout_ms)


def _sized(batch: bytes) -> bytes:
    """A record batch as a request carries it: its size, then its bytes."""
    return _I32.pack(len(batch)) + batch


def topic_head(name: bytes) -> bytes:
    """What a Produce v3-v7 request writes before a topic's one batch (to its partition 0)."""
    return _I16.pack(len(name)) + name + _ONE_PARTITION_0


def _encode_parts(parts: list[bytes], topics: int, timeout_ms: int = TIMEOUT_MS) -> bytes:
    """A Produce v3-v7 request body (no transactional id, acks all) of ``topics`` topics laid
    out in ``parts``: each topic's head (``topic_head``), then its sized batch (``_sized``)."""
    head = _NULL_TRANSACTIONAL_ID + _I16.pack(ACKS_ALL) + _I32.pack(timeout_ms)
    return head + _I32.pack(topics) + b"".join(parts)


def decode_errors(body: bytes, version: int) -> list[tuple[str, int, int]]:
    """(topic, partition, error code) of each partition a Produce v3-v7 response answers with
    an error (the others were appended)."""
    partition_bytes = 30 if version >= 5 else 22  # + log_start_offset (v5)
    errors = []
    (topics,) = _I32.unpack_from(body, 0)
    at = 4
    for _ in range(topics):
        (size,) = _I16.unpack_from(body, at)
        name_at = at + 2
        at = name_at + size
        (partitions,) = _I32.unpack_from(body, at)
        at += 4
        for _ in range(partitions):
            partition, code = _PARTITION_ERROR.unpack_from(body, at)
            if code:
                errors.append((body[name_at : name_at + size].decode(), partition, code))
            at += partition_bytes
    return errors


class _Answer:
    """A decoded response: the partitions that answered an error."""

    def __init__(self, errors: list[tuple[str, int, int]]) -> None:
        self.errors = errors


def _response(version: int) -> type[Response]:
    class _FramesResponse(Response):  # type: ignore[misc]
        API_KEY = 0
        API_VERSION = version
        SCHEMA = None

        @classmethod
        def decode(cls, data: BytesIO | bytes) -> Any:
            body = data.read() if isinstance(data, BytesIO) else data
            return _Answer(decode_errors(body, version))

    return _FramesResponse


def _struct(version: int) -> type[RequestStruct]:
    class _FramesStruct(RequestStruct):  # type: ignore[misc]
        API_KEY = 0
        API_VERSION = version
        RESPONSE_TYPE = _response(version)
        SCHEMA = ProduceRequest_v3.SCHEMA  # the same layout v3-v7; ``encode`` is ours

        def __init__(self, body: bytes) -> None:
            self.body = body

        def encode(self) -> bytes:
            return self.body

        def __repr__(self) -> str:  # aiokafka's debug log formats each request
            return f"FramesProduce_v{version}({len(self.body)} bytes)"

    return _FramesStruct


_STRUCTS = tuple(_struct(v) for v in range(3, 8))


class _FramesRequest(Request[RequestStruct]):  # type: ignore[misc]
    API_KEY = 0
    _CLASSES: ClassVar[tuple[type[RequestStruct], ...]] = ()

    def __init__(self, body: bytes) -> None:
        self.body = body

    def build(self, request_struct_class: type[Any]) -> Any:
        return request_struct_class(self.body)


_FramesRequest._CLASSES = _STRUCTS  # after __init_subclass__, which sets aiokafka's own


class _Batches:
    """The encoded record batch of each distinct (key, value, headers), built once per call,
    with its size in front (as a request carries it)."""

    def __init__(self) -> None:
        self.timestamp = int(time.time() * 1000)
        self.built: dict[tuple[int, bytes, tuple[tuple[str, bytes], ...]], bytes] = {}

    def of(self, records: list[Frame]) -> bytes:
        if len(records) == 1:
            _, key, value, headers = records[0]
            shared = (id(value), key, headers)  # the value object is held by the caller
            found = self.built.get(shared)
            if found is None:
                found = self.built[shared] = self._build(records)
            return found
        return self._build(records)

    def _build(self, records: list[Frame]) -> bytes:
        size = sum(len(k) + len(v) + sum(len(a) + len(b) for a, b in h) for _, k, v, h in records)
        builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, size + 1024 + 64 * len(records))
        for offset, (_, key, value, headers) in enumerate(records):
            builder.append(offset, self.timestamp, key, value, list(headers))
        return _sized(bytes(builder.build()))


async def partition_of(producer: Any, topic: str, partitions: dict[str, int | None]) -> int | None:
    """0 when ``topic`` has one partition, None when it has more (the key's partition then):
    asked of the producer's metadata once per topic and kept in ``partitions``."""
    if topic not in partitions:
        found = await producer.partitions_for(topic)
        partitions[topic] = 0 if len(found) == 1 else None
    return partitions[topic]


_HEADS: dict[str, bytes] = {}  # topic -> topic_head of its encoded name


def _head(topic: str) -> bytes:
    found = _HEADS.get(topic)
    if found is None:
        if len(_HEADS) >= 100_000:  # subscriber topics come and go: bounded
            _HEADS.clear()
        found = _HEADS[topic] = topic_head(topic.encode())
    return found


_LEADERS: WeakKeyDictionary[Any, dict[str, int]] = WeakKeyDictionary()


def _leaders(cluster: Any) -> dict[str, int]:
    """Topic -> the node leading its partition 0, as ``cluster`` (a producer's metadata) last
    said: asked once per topic, forgotten whenever the metadata is updated (its listener)."""
    found = _LEADERS.get(cluster)
    if found is None:
        found = _LEADERS[cluster] = {}
        cluster.add_listener(lambda _cluster: found.clear())
    return found


def _by_topic(frames: Sequence[Frame]) -> dict[str, list[Frame]]:
    """The frames of each topic, in their order."""
    by_topic: dict[str, list[Frame]] = {}
    for frame in frames:
        found = by_topic.get(frame[0])
        if found is None:
            by_topic[frame[0]] = [frame]
        else:
            found.append(frame)
    return by_topic


def _leader(cluster: Any, leaders: dict[str, int], topic: str) -> int | None:
    """The node leading ``topic``'s partition 0 (None or -1: unknown), kept when known."""
    node: int | None = cluster.leader_for_partition(TopicPartition(topic, 0))
    if node is not None and node >= 0:
        leaders[topic] = node
    return node


async def produce_frames(
    producer: Any, frames: Sequence[Frame], partitions: dict[str, int | None]
) -> list[BaseException | None]:
    """Write ``frames`` and wait for the broker; per frame, None or why it was not written.
    ``partitions``: per topic, 0 when it has one partition (asked of the producer's metadata
    once), None when it has more (those frames go through ``producer.send``, by key)."""
    by_topic = _by_topic(frames)
    for topic in by_topic:
        if topic not in partitions:  # (a known topic costs no coroutine: measured per frame)
            await partition_of(producer, topic, partitions)
    cluster = producer.client.cluster
    leaders = _leaders(cluster)
    batches = _Batches()
    requests: dict[int, list[list[bytes]]] = {}
    sizes: dict[int, int] = {}
    topics_of: dict[int, list[list[str]]] = {}
    others: list[str] = []
    for topic, records in by_topic.items():
        node = leaders.get(topic)
        if node is None:
            node = _leader(cluster, leaders, topic)
        if partitions[topic] != 0 or node is None or node < 0:
            others.append(topic)
            continue
        sized = batches.of(records)
        if node not in requests or sizes[node] + len(sized) > REQUEST_BYTES:
            requests.setdefault(node, []).append([])
            topics_of.setdefault(node, []).append([])
            sizes[node] = 0
        parts = requests[node][-1]
        parts.append(_head(topic))
        parts.append(sized)
        topics_of[node][-1].append(topic)
        sizes[node] += len(sized)
    sent = [
        (node, parts, topics)
        for node in requests
        for parts, topics in zip(requests[node], topics_of[node], strict=True)
    ]
    answers = await asyncio.gather(
        *(
            producer.client.send(node, _FramesRequest(_encode_parts(parts, len(topics))))
            for node, parts, topics in sent
        ),
        return_exceptions=True,
    )
    for (_, _, topics), answer in zip(sent, answers, strict=True):
        if isinstance(answer, BaseException):
            others += topics
        else:
            others += [topic for topic, _, _ in answer.errors]
    if not others:
        return [None] * len(frames)
    failed = await _send_each(producer, [f for t in others for f in by_topic[t]], partitions)
    return [failed.get(id(frame)) for frame in frames]


async def _send_each(
    producer: Any, frames: list[Frame], partitions: dict[str, int | None]
) -> dict[int, BaseException]:
    """``frames`` through ``producer.send`` (aiokafka's own retries); what failed, by id."""
    futures = [
        await producer.send(
            topic, value, key=key, headers=list(headers) or None, partition=partitions.get(topic)
        )
        for topic, key, value, headers in frames
    ]
    results = await asyncio.gather(*futures, return_exceptions=True)
    return {
        id(frame): result
        for frame, result in zip(frames, results, strict=True)
        if isinstance(result, BaseException)
    }
