"""The projector loop (app/shell/projector_loop.py) driven with the in-memory Kafka double
(tests/shell/memory_kafka.py) through its rebalance edges and its bounded cache (issue 15
item 3): the listener never waits for a restore, a revoked partition's surfaces leave at once,
and with a cache of one surface every frame and every resync answer is the one the
never-evicted projector gives. The real-broker tests are tests/integration/test_projection.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import orjson
import pytest
from aiokafka import TopicPartition

import app.shell.projector_loop as projector_loop
from app.core.keys import log_key, partition_for_run
from app.core.policy import HostPolicy
from app.core.subscriptions import register
from app.core.surfaces import replay
from app.shell.projector_loop import ProjectorConfig, ProjectorLoop
from tests.core.projection_support import column, components, create, data, event, text, v2
from tests.shell.memory_kafka import MemoryConsumer, MemoryKafka

PARTITIONS = 2
LOG, GROUP = "log", "app-projector"


class Consumer(MemoryConsumer):
    """The double, plus what the projector also calls; ``hold`` gates ``committed`` per
    partition (a slow offset fetch), ``asked`` is set when it is called."""

    def __init__(self, kafka: MemoryKafka, group: str) -> None:
        super().__init__(kafka, group)
        self.hold: dict[int, asyncio.Event] = {}
        self.asked = asyncio.Event()

    async def committed(self, tp: TopicPartition) -> int | None:
        self.asked.set()
        gate = self.hold.get(tp.partition)
        if gate is not None:
            await gate.wait()
        return await super().committed(tp)

    async def seek_to_beginning(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self.positions[tp] = 0


class Producer:
    def __init__(self, kafka: MemoryKafka) -> None:
        self.kafka = kafka

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, topic: str, value: bytes, *, key: bytes, headers: Any = None) -> Any:
        self.kafka.append(topic, 0, key, value, headers or [])
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future


def _loop(kafka: MemoryKafka, monkeypatch: pytest.MonkeyPatch, cache: int = 10_000) -> Any:
    fields = {f.name for f in dataclasses.fields(ProjectorConfig)}
    extra = {"partitions": PARTITIONS, "cache_surfaces": cache} if "partitions" in fields else {}
    config = ProjectorConfig(
        bootstrap="memory",
        log_topic=LOG,
        subscriptions_topic="subs",
        resync_topic="resync",
        topic_prefix="",
        replication=1,
        group_id=GROUP,
        **extra,
    )
    loop = ProjectorLoop(config, HostPolicy())
    loop.consumer = Consumer(kafka, GROUP)
    loop.producer = Producer(kafka)
    loop.consumer.subscribe([LOG], listener=projector_loop._Rebalance(loop))
    loop.log_reads = 0

    async def topic(subscriber_id: str) -> str:
        return f"sub-{subscriber_id}"

    async def read_log(partition: int, before: int, keep: Any) -> list[Any]:
        loop.log_reads += 1
        return [r for r in kafka.visible(LOG, partition) if r.offset < before and keep(r)]

    async def read_topic(bootstrap: str, topic: str, **kw: Any) -> list[Any]:  # before the change
        return kafka.visible(topic, kw["partitions"][0])

    loop._subscriber_topic = topic
    loop._read_log = read_log
    monkeypatch.setattr(projector_loop, "read_topic", read_topic, raising=False)
    return loop


def _held(loop: Any) -> dict[Any, Any]:
    if hasattr(loop, "surfaces"):
        return dict(loop.surfaces())
    return dict(loop.projection.surfaces)  # the loop before issue 15 item 3


async def _taken(loop: Any) -> None:
    await asyncio.gather(*getattr(loop, "taking", {}).values())


async def _step(loop: Any) -> None:
    """One fetch and one batch, as the loop's own task does."""
    gathered = getattr(loop, "generation", 0)
    batch = await loop.consumer.getmany(timeout_ms=0, max_records=2000)
    if not batch:
        return
    if hasattr(loop, "_project_once"):
        await loop._project_once(batch, gathered)
    else:
        async with loop.lock:
            await loop._project_batch(batch)


async def _drain(loop: Any) -> None:
    while any(
        loop.consumer.positions.get(tp, 0) < loop.consumer.highwater(tp)
        for tp in loop.consumer.assigned - loop.consumer.paused
    ):
        await _step(loop)


def _run(name: str, partition: int) -> str:
    n = 0
    while partition_for_run(f"t/{name}-{n}", PARTITIONS) != partition:
        n += 1
    return f"t/{name}-{n}"


def _publish(kafka: MemoryKafka, run_id: str, sequence: int, texts: list[str]) -> None:
    messages = [] if sequence else [create("s")]
    body = v2(
        "s",
        *[m for m in messages],
        components("s", column("root", *[f"t{i}" for i in range(len(texts))])),
        *[components("s", text(f"t{i}", t)) for i, t in enumerate(texts)],
        data("s", path="/n", value=sequence),
    )
    # v2() takes whole messages: strip each one's version key into the body's list
    body["messages"] = [{k: v for k, v in m.items() if k != "version"} for m in body["messages"]]
    recorded = event(sequence, body, run_id=run_id)
    partition = partition_for_run(run_id, PARTITIONS)
    kafka.append(LOG, partition, log_key(run_id, sequence), orjson.dumps(recorded))


def _events(kafka: MemoryKafka) -> list[dict[str, Any]]:
    return [
        orjson.loads(r.value)
        for p in range(PARTITIONS)
        for r in kafka.visible(LOG, p)
        if r.value is not None
    ]


def _tp(partition: int) -> TopicPartition:
    return TopicPartition(LOG, partition)


async def test_the_listener_returns_before_the_partition_is_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression (issue 15 item 3): the listener took the partition's committed offset and
    replayed its log before returning, holding the group's rebalance for as long as that took.
    Here the offset fetch stands still: the listener must have returned by then."""
    kafka = MemoryKafka()
    run = _run("a", 0)
    for n in range(3):
        _publish(kafka, run, n, [f"v{n}"])
    kafka.committed[(GROUP, LOG, 0)] = 2  # projected up to event 2 by a previous owner
    loop = _loop(kafka, monkeypatch)
    loop.consumer.hold[0] = gate = asyncio.Event()
    listener = asyncio.create_task(loop.consumer.assign({_tp(0)}))
    await loop.consumer.asked.wait()
    assert listener.done(), "the rebalance listener is waiting for a restore"
    gate.set()
    await listener
    await _taken(loop)
    await _drain(loop)
    assert _held(loop) == dict(replay(_events(kafka)).surfaces)


async def test_a_revoked_partitions_surfaces_leave_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (issue 15 item 3): a revoked partition's surfaces stayed in memory for the
    life of the worker."""
    kafka = MemoryKafka()
    mine, theirs = _run("kept", 1), _run("moved", 0)
    for n in range(3):
        _publish(kafka, mine, n, [f"m{n}"])
        _publish(kafka, theirs, n, [f"t{n}"])
    loop = _loop(kafka, monkeypatch)
    await loop.consumer.assign({_tp(0), _tp(1)})
    await _taken(loop)
    await _drain(loop)
    assert {k.run_id for k in _held(loop)} == {mine, theirs}
    await loop.consumer.revoke({_tp(0)})
    assert {k.run_id for k in _held(loop)} == {mine}


async def test_one_partition_is_projected_while_another_is_being_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kafka = MemoryKafka()
    fast, slow = _run("fast", 0), _run("slow", 1)
    _publish(kafka, fast, 0, ["f"])
    _publish(kafka, slow, 0, ["s"])
    loop = _loop(kafka, monkeypatch)
    loop.consumer.hold[1] = gate = asyncio.Event()
    await loop.consumer.assign({_tp(0), _tp(1)})
    await asyncio.gather(loop.taking[_tp(0)])
    await _drain(loop)
    assert {k.run_id for k in _held(loop)} == {fast}
    gate.set()
    await _taken(loop)
    await _drain(loop)
    assert {k.run_id for k in _held(loop)} == {fast, slow}


def _subscribe(loop: Any, sid: str, delta: bool) -> None:
    doc = {"subscriberId": sid, "runs": "*", "delta": delta, "fullEvery": 3}
    loop.registry, why = register(loop.registry, sid.encode(), orjson.dumps(doc))
    assert why is None


def _last_full(kafka: MemoryKafka, topic: str) -> dict[tuple[str, str], dict[str, Any]]:
    last: dict[tuple[str, str], dict[str, Any]] = {}
    for record in kafka.visible(topic, 0):
        frame = orjson.loads(record.value)
        if frame["kind"] == "full":
            last[(frame["runId"], frame["surfaceId"])] = frame
    return last


async def test_a_cache_of_one_surface_sends_what_the_unbounded_one_sends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three runs on two partitions updated in turn, with room for one surface: every event
    of a run that was evicted rebuilds it from the log; a full subscriber's frames, and a
    resync answer for an evicted run, carry exactly the surfaces of the never-evicted
    projector (``replay``), and the cache never holds more than one run."""
    runs = [_run("x", 0), _run("y", 0), _run("z", 1)]
    sent: dict[int, list[bytes]] = {}
    for cache in (10_000, 1):
        kafka = MemoryKafka()
        loop = _loop(kafka, monkeypatch, cache=cache)
        _subscribe(loop, "full", delta=False)
        _subscribe(loop, "delta", delta=True)
        await loop.consumer.assign({_tp(0), _tp(1)})
        await _taken(loop)
        for n in range(6):
            for i, run in enumerate(runs):
                _publish(kafka, run, n, [f"{run} {n}", *(["extra"] if (n + i) % 2 else [])])
                await _drain(loop)
                assert len(loop.runs) <= (1 if cache == 1 else 3)
        want = replay(_events(kafka))
        full = _last_full(kafka, "sub-full")
        for key, surface in want.surfaces.items():
            assert full[(key.run_id, key.surface_id)]["surface"] == surface.content
        sent[cache] = [r.value for r in kafka.visible("sub-full", 0)]
        if cache == 1:
            assert loop.evicted > 0 and loop.rebuilt["log"] > 0
            # a resync for the run evicted longest ago, twice at once: one answer
            request = {"subscriberId": "delta", "runId": runs[0], "surfaceId": "s", "sequence": 0}
            value = orjson.dumps(request)
            assert runs[0] not in loop.runs
            await asyncio.gather(loop._answer(value, (0, 7)), loop._answer(value, (0, 7)))
            answers = [
                orjson.loads(r.value)
                for r in kafka.visible("sub-delta", 0)
                if dict(r.headers).get("a2ui-resync") == b"0:7"
            ]
            assert len(answers) == 1
            assert answers[0]["surface"] == want.surfaces[(runs[0], "s")].content
    # The full subscriber's stream is the same, frame for frame, with and without the bound.
    assert sent[1] == sent[10_000]
