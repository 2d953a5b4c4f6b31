"""The projector's fan-out request on a real broker (app.shell.worker.frame_produce): every frame
lands once, in order per topic, with its key, value and headers; a frame the broker refuses is
reported, not raised, and the others still land."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from app.shell.cli.broker import Broker
from app.shell.worker.frame_produce import Frame, produce_frames
from app.shell.worker.kafka_io import read_topic

pytestmark = [pytest.mark.broker]


@pytest.fixture
async def producer(broker: Broker) -> AsyncIterator[AIOKafkaProducer]:
    started = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
    await started.start()
    try:
        yield started
    finally:
        await started.stop()


async def _topics(broker: Broker, specs: Mapping[str, tuple[int, Mapping[str, str]]]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [
                NewTopic(name, parts, 1, topic_configs=dict(cfg))
                for name, (parts, cfg) in specs.items()
            ]
        )
    finally:
        await admin.close()


async def test_one_request_writes_every_frame_once_in_order(
    broker: Broker, producer: AIOKafkaProducer
) -> None:
    prefix = f"frames-{uuid.uuid4().hex[:8]}"
    many = [f"{prefix}.s{i}" for i in range(40)]
    ordered, keyed = f"{prefix}.ordered", f"{prefix}.keyed"
    await _topics(broker, {t: (1, {}) for t in [*many, ordered]} | {keyed: (3, {})})
    shared = b'{"frame":"delta","n":1}'  # one value object, as in-sync subscribers get
    headers = (("a2ui-kind", b"delta"),)
    frames: list[Frame] = [(t, b"run-1/s", shared, headers) for t in many]
    frames += [(ordered, b"run-1/s", f"frame {n}".encode(), ()) for n in range(3)]
    frames += [(keyed, f"run-{n}/s".encode(), b"k", ()) for n in range(3)]
    partitions: dict[str, int | None] = {}

    first = await produce_frames(producer, frames, partitions)
    again = await produce_frames(producer, frames[:1], partitions)  # leaders known now

    assert first == [None] * len(frames) and again == [None]
    assert partitions[keyed] is None and partitions[ordered] == 0
    for n, topic in enumerate(many):
        records = await read_topic(broker.bootstrap, topic)
        assert [(r.key, r.value) for r in records] == [(b"run-1/s", shared)] * (2 if n == 0 else 1)
        assert [(k, bytes(v)) for k, v in records[0].headers] == [("a2ui-kind", b"delta")]
    in_order = await read_topic(broker.bootstrap, ordered)
    assert [r.value for r in in_order] == [b"frame 0", b"frame 1", b"frame 2"]
    by_key = await read_topic(broker.bootstrap, keyed)
    assert sorted(r.key for r in by_key) == [b"run-0/s", b"run-1/s", b"run-2/s"]


@pytest.mark.needs_topic_configs  # max.message.bytes
async def test_a_refused_frame_is_reported_and_the_others_land(
    broker: Broker, producer: AIOKafkaProducer
) -> None:
    prefix = f"frames-{uuid.uuid4().hex[:8]}"
    small, fine = f"{prefix}.small", f"{prefix}.fine"
    await _topics(broker, {small: (1, {"max.message.bytes": "2048"}), fine: (1, {})})
    partitions: dict[str, int | None] = {}
    await produce_frames(producer, [(fine, b"k", b"warm", ())], partitions)  # leaders known
    await produce_frames(producer, [(small, b"k", b"warm", ())], partitions)

    results = await produce_frames(
        producer, [(small, b"k", b"x" * 10_000, ()), (fine, b"k", b"ok", ())], partitions
    )

    assert isinstance(results[0], Exception) and results[1] is None
    assert [r.value for r in await read_topic(broker.bootstrap, fine)] == [b"warm", b"ok"]
    assert [r.value for r in await read_topic(broker.bootstrap, small)] == [b"warm"]
