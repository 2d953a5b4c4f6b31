"""Sending the projector's frames: each to its subscriber's topic, keyed ``runId/surfaceId``.

Shell module, the projector's write path (``app.shell.worker.projector_loop`` and its helpers
``projector_resync`` and ``projector_registry`` send what the core planned through it). Frames
are delivered at least once: the loop commits a batch's log offsets after its sends, a repeated
delta fails the client's base check and brings a resync, a repeated full frame is idempotent
(docs/projection.md). ``a2ui-stream bench projection`` times what ``send_all`` calls
(``frame_produce.produce_frames``) beside ``send_frame`` (one ``producer.send`` per frame, the
way before).

Its functions take the loop (its producer, its counters, ``ProjectorLoop.subscriber_topic``,
which the shell tests replace). It imports the core's frame record and ``frame_produce``; the
loop's type only for annotations.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from app.core.projection.projector_runs import FrameRecord
from app.shell.worker.frame_produce import Frame, partition_of, produce_frames

if TYPE_CHECKING:
    from app.shell.worker.projector_loop import ProjectorLoop

__all__ = ["send_all", "send_frame"]

log = logging.getLogger("a2ui_stream.projector")


async def send_all(
    loop: ProjectorLoop, records: Iterable[FrameRecord], *, say: bool = False
) -> None:
    """Send ``records`` and wait for the broker, one Produce request per broker for them all
    (``frame_produce.produce_frames``: the batch of a frame that many subscribers get is built
    once). Counted by kind (``a2ui_frames_sent_total``) and digest check. A frame the broker
    refuses (e.g. over the topic's size limit) must not stall every other subscriber: it is
    counted (and logged when ``say``) and dropped; that subscriber sees a sequence gap on its
    next frame and asks for a resync (docs/projection.md)."""
    assert loop.producer is not None
    frames: list[Frame] = []
    names = loop.topic_names
    kinds: dict[str, int] = {}
    digests = 0
    for record in records:
        sid, key, value, kind, reason, headers = record
        topic = names.get(sid)
        if topic is None:
            topic = await loop.subscriber_topic(sid)
        kinds[kind] = kinds.get(kind, 0) + 1
        digests += reason == "digest"
        frames.append((topic, key, value, headers))
    loop.sent.update(kinds)
    loop.digest_checks += digests
    for result in await produce_frames(loop.producer, frames, loop.frame_partitions):
        if result is not None:
            loop.failed[type(result).__name__] += 1
            if say:
                log.error("projector: a frame could not be written (%s)", type(result).__name__)


async def send_frame(
    producer: Any,
    topic: str,
    value: bytes,
    key: bytes,
    headers: list[tuple[str, bytes]] | None,
    partitions: dict[str, int | None],
) -> asyncio.Future[Any]:
    """One frame to a subscriber topic through ``producer.send``, keyed ``runId/surfaceId``
    (the future of its acknowledgement): the way every frame went before ``send_all`` wrote
    them together, kept as ``bench projection``'s baseline. A topic of one partition (the
    subscriber template's) is sent to partition 0 outright: aiokafka's default partitioner
    hashes every key in Python to find the only partition there is (murmur2: 5.2 µs a frame,
    measured, of a send's 12-36 µs).
    ``partitions``: the answer per topic, asked of the producer's metadata once; a topic of
    more partitions keeps the key's partition (None)."""
    future: asyncio.Future[Any] = await producer.send(
        topic,
        value,
        key=key,
        headers=headers,
        partition=await partition_of(producer, topic, partitions),
    )
    return future
