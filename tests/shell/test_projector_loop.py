"""The projector loop (app/shell/worker/projector_loop.py) driven with the in-memory Kafka double
(tests/shell/memory_kafka.py) through its rebalance edges and its bounded cache (issue 15
item 3): the listener never waits for a restore, a revoked partition's surfaces leave at once,
and with a cache of one surface every frame and every resync answer is the one the
never-evicted projector gives. The real-broker tests are tests/integration/test_projection.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import types
from typing import Any

import orjson
import pytest
from aiokafka import TopicPartition

import app.shell.worker.projector_loop as projector_loop
import app.shell.worker.projector_resync as projector_resync
from app.core.admission.policy import HostPolicy
from app.core.projection.subscriptions import register
from app.core.projection.surfaces import SurfaceKey, replay
from app.core.runlog.keys import log_key, partition_for_run
from app.shell.worker.log_feed import LogFeed
from app.shell.worker.projector_config import ProjectorConfig
from app.shell.worker.projector_loop import ProjectorLoop
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

    async def beginning_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return dict.fromkeys(tps, 0)


class Tail:
    """What the read side's tail does for the projector (app.shell.worker.run_index, the
    process's one log consumer): each round reads every partition the feed follows from where
    it stands (sought to the followed offset when that changed) and offers what it read."""

    def __init__(self, kafka: MemoryKafka, feed: LogFeed) -> None:
        self.kafka, self.feed = kafka, feed
        self.positions: dict[int, int] = {}

    def round(self) -> None:
        for partition, offset in self.feed.starts({}).items():
            if not self.feed.follows[partition].applied:
                self.positions[partition] = offset
                self.feed.applied([partition])
            position = self.positions[partition]
            records = self.kafka.visible(LOG, partition)[position : position + 2000]
            self.feed.offer(partition, records)
            self.positions[partition] = position + len(records)
        self.feed.flush()

    def behind(self) -> bool:
        return any(
            self.positions.get(p, offset) < len(self.kafka.visible(LOG, p))
            or not self.feed.follows[p].applied
            for p, offset in self.feed.starts({}).items()
        )


class _NoLeaders:
    """No partition leader known: ``frame_produce`` sends every frame by ``send``."""

    def leader_for_partition(self, tp: Any) -> None:
        return None

    def add_listener(self, listener: Any) -> None:  # called on metadata updates: none here
        pass


class Producer:
    def __init__(self, kafka: MemoryKafka) -> None:
        self.kafka = kafka
        self.client = types.SimpleNamespace(cluster=_NoLeaders())

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def partitions_for(self, topic: str) -> set[int]:
        return {0}

    async def send(
        self, topic: str, value: bytes, *, key: bytes, headers: Any = None, partition: Any = None
    ) -> Any:
        assert partition in (0, None)
        self.kafka.append(topic, 0, key, value, headers or [])
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future


def _loop(kafka: MemoryKafka, monkeypatch: pytest.MonkeyPatch, cache: int = 10_000) -> Any:
    fields = {f.name for f in dataclasses.fields(ProjectorConfig)}
    extra: dict[str, Any] = (
        {"partitions": PARTITIONS, "cache_surfaces": cache} if "partitions" in fields else {}
    )
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
    loop: Any = ProjectorLoop(config, HostPolicy())  # given a counter and two stand-ins below
    loop.consumer = Consumer(kafka, GROUP)
    loop.producer = Producer(kafka)
    loop.consumer.subscribe([LOG], listener=projector_loop._Rebalance(loop))
    loop.tail = Tail(kafka, loop.feed)
    loop.log_reads = 0

    async def topic(subscriber_id: str) -> str:
        return f"sub-{subscriber_id}"

    async def read_log(partition: int, before: int, keep: Any) -> list[Any]:
        loop.log_reads += 1
        return [r for r in kafka.visible(LOG, partition) if r.offset < before and keep(r)]

    async def read_topic(bootstrap: str, topic: str, **kw: Any) -> list[Any]:  # before the change
        return kafka.visible(topic, kw["partitions"][0])

    loop.subscriber_topic = topic
    loop.read_log = read_log
    monkeypatch.setattr(projector_loop, "read_topic", read_topic, raising=False)
    return loop


def _held(loop: Any) -> dict[Any, Any]:
    if hasattr(loop, "surfaces"):
        return dict(loop.surfaces())
    return dict(loop.projection.surfaces)  # the loop before issue 15 item 3


async def _taken(loop: Any) -> None:
    await asyncio.gather(*getattr(loop, "taking", {}).values())


async def _fetch(loop: Any) -> dict[int, list[Any]]:
    """One round of the tail, and what the feed then hands the projector."""
    loop.tail.round()
    batch: dict[int, list[Any]] = await loop.feed.get(timeout=0)
    return batch


async def _step(loop: Any) -> None:
    """One fetch and one batch, as the loop's own task does."""
    batch = await _fetch(loop)
    if batch:
        await loop._project_once(batch, loop.generation)


async def _drain(loop: Any) -> None:
    while loop.tail.behind():
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
    _subscribe(loop, "watcher", delta=False)  # a run nobody follows is not held
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
    _subscribe(loop, "watcher", delta=False)  # a run nobody follows is not held
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
    _subscribe(loop, "watcher", delta=False)  # a run nobody follows is not held
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
        frame = orjson.loads(record.body())
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
        sent[cache] = [r.body() for r in kafka.visible("sub-full", 0)]
        if cache == 1:
            assert loop.evicted > 0 and loop.rebuilt["log"] > 0
            # a resync for the run evicted longest ago, twice at once: one answer
            request = {"subscriberId": "delta", "runId": runs[0], "surfaceId": "s", "sequence": 0}
            value = orjson.dumps(request)
            assert runs[0] not in loop.runs
            await asyncio.gather(
                projector_resync.answer(loop, value, (0, 7)),
                projector_resync.answer(loop, value, (0, 7)),
            )
            answers = [
                orjson.loads(r.body())
                for r in kafka.visible("sub-delta", 0)
                if dict(r.headers).get("a2ui-resync") == b"0:7"
            ]
            assert len(answers) == 1
            assert answers[0]["surface"] == want.surfaces[SurfaceKey(runs[0], "s")].content
    # The full subscriber's stream is the same, frame for frame, with and without the bound.
    assert sent[1] == sent[10_000]


# -- the rebalance and restore edges of the split (issue 15 item 5) -------------------------


def _frames_of(kafka: MemoryKafka, topic: str) -> list[dict[str, Any]]:
    return [orjson.loads(r.body()) for r in kafka.visible(topic, 0)]


def _gate_log_reads(loop: Any) -> tuple[asyncio.Event, asyncio.Event]:
    """Hold every log read until ``gate`` is set; ``started`` is set when one begins."""
    started, gate = asyncio.Event(), asyncio.Event()
    read = loop.read_log

    async def gated(partition: int, before: int, keep: Any) -> list[Any]:
        started.set()
        await gate.wait()
        return list(await read(partition, before, keep))

    loop.read_log = gated
    return started, gate


async def test_a_partition_revoked_while_its_batch_rebuilds_is_not_projected_by_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch whose runs are being rebuilt (a log read, outside the lock) when a partition is
    revoked: the batch is dropped (the revoked partition's records sent nothing, its offset is
    not committed, its runs are not cached), the partition still owned is fetched again from
    its position and projected once."""
    kafka = MemoryKafka()
    mine, theirs = _run("kept", 0), _run("moved", 1)
    for n in range(3):
        _publish(kafka, mine, n, [f"m{n}"])
        _publish(kafka, theirs, n, [f"t{n}"])
    for p in (0, 1):
        kafka.committed[(GROUP, LOG, p)] = 2  # events 0 and 1 projected by a previous owner
    loop = _loop(kafka, monkeypatch)
    _subscribe(loop, "full", delta=False)
    await loop.consumer.assign({_tp(0), _tp(1)})
    await _taken(loop)
    started, gate = _gate_log_reads(loop)
    batch = await _fetch(loop)
    gathered = loop.generation
    assert set(batch) == {0, 1}
    projecting = asyncio.create_task(loop._project_once(batch, gathered))
    await started.wait()
    await loop.consumer.revoke({_tp(1)})
    gate.set()
    await projecting
    assert _frames_of(kafka, "sub-full") == []
    assert loop.runs == {} and loop.held == 0
    assert kafka.committed[(GROUP, LOG, 0)] == kafka.committed[(GROUP, LOG, 1)] == 2
    assert loop.feed.starts({}) == {0: 2}  # followed again from its position: fetched again
    await _drain(loop)
    sent = _frames_of(kafka, "sub-full")
    assert [(f["runId"], f["sequence"]) for f in sent] == [(mine, 2)]
    want = replay([e for e in _events(kafka) if e["runId"] == mine]).surfaces
    assert sent[0]["surface"] == want[SurfaceKey(mine, "s")].content
    assert kafka.committed[(GROUP, LOG, 0)] == 3 and kafka.committed[(GROUP, LOG, 1)] == 2
    assert set(loop.runs) == {mine}


async def test_a_batch_gathered_before_an_assignment_is_fetched_again_and_the_first_batch_rebuilds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Partition 0 is projected; a batch of it is gathered, then partition 1 is assigned and
    taken (each moves the generation): that batch is dropped and fetched again, so each event
    is framed once. Partition 1's first batch starts past what the previous owner committed:
    its run is rebuilt from the log, the full subscriber's frame carries the whole surface and
    the delta subscriber's first frame is full, its next one a delta."""
    kafka = MemoryKafka()
    here, given = _run("here", 0), _run("given", 1)
    for n in range(2):
        _publish(kafka, here, n, [f"h{n}"])
        _publish(kafka, given, n, [f"g{n}"])
    kafka.committed[(GROUP, LOG, 1)] = 1  # its event 0 projected by the previous owner
    loop = _loop(kafka, monkeypatch)
    _subscribe(loop, "full", delta=False)
    _subscribe(loop, "delta", delta=True)
    await loop.consumer.assign({_tp(0)})
    await _taken(loop)
    batch = await _fetch(loop)
    gathered = loop.generation
    await loop.consumer.assign({_tp(1)})
    await _taken(loop)
    await loop._project_once(batch, gathered)
    assert _frames_of(kafka, "sub-full") == [] and loop.runs == {}
    await _drain(loop)
    _publish(kafka, given, 2, ["g2"])
    await _drain(loop)
    full = [(f["runId"], f["sequence"]) for f in _frames_of(kafka, "sub-full")]
    assert sorted(full) == [(given, 1), (given, 2), (here, 0), (here, 1)]
    want = replay(_events(kafka)).surfaces
    assert (
        _last_full(kafka, "sub-full")[(given, "s")]["surface"]
        == want[SurfaceKey(given, "s")].content
    )
    delta = [
        (f["kind"], f["sequence"]) for f in _frames_of(kafka, "sub-delta") if f["runId"] == given
    ]
    assert delta == [("full", 1), ("delta", 2)]
    assert loop.rebuilt["log"] == 1
    assert kafka.committed[(GROUP, LOG, 0)] == 2 and kafka.committed[(GROUP, LOG, 1)] == 3


async def test_after_an_eviction_a_resync_caches_its_run_and_the_next_change_is_a_delta(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With room for one surface: run x is evicted by run y; a resync request for x rebuilds it
    (one log read) and caches it with the cursor its answer gave, so x's next event needs no
    rebuild and reaches the delta subscriber as a delta from the answer."""
    kafka = MemoryKafka()
    x, y = _run("x", 0), _run("y", 0)
    loop = _loop(kafka, monkeypatch, cache=1)
    _subscribe(loop, "delta", delta=True)
    await loop.consumer.assign({_tp(0)})
    await _taken(loop)
    _publish(kafka, x, 0, ["x0"])
    await _drain(loop)
    _publish(kafka, y, 0, ["y0"])
    await _drain(loop)
    assert set(loop.runs) == {y} and loop.evicted == 1
    request = {"subscriberId": "delta", "runId": x, "surfaceId": "s", "sequence": 0}
    await projector_resync.answer(loop, orjson.dumps(request), (0, 3))
    assert loop.log_reads == 1 and set(loop.runs) == {x, y}
    _publish(kafka, x, 1, ["x1"])
    await _drain(loop)
    assert loop.log_reads == 1  # x was cached by the answer
    of_x = [f for f in _frames_of(kafka, "sub-delta") if f["runId"] == x]
    assert [(f["kind"], f.get("resync"), f["sequence"]) for f in of_x] == [
        ("full", None, 0),
        ("full", True, 0),
        ("delta", None, 1),
    ]
    assert of_x[2]["baseSequence"] == 0
    assert set(loop.runs) == {x} and loop.evicted == 2  # y, least recently used, left


async def test_a_failed_commit_projects_the_partition_again_from_its_committed_offset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The offset commit fails after the frames were sent: the partition is taken again (its
    runs dropped) and projected again from its committed offset; the frames are repeated (at
    least once) and the surfaces end as the log's."""
    kafka = MemoryKafka()
    run = _run("a", 0)
    for n in range(3):
        _publish(kafka, run, n, [f"v{n}"])
    loop = _loop(kafka, monkeypatch)
    _subscribe(loop, "full", delta=False)
    await loop.consumer.assign({_tp(0)})
    await _taken(loop)
    loop.consumer.commit_failures = 1
    await _drain(loop)
    assert loop.runs == {} and loop.held == 0 and _tp(0) in loop.taking
    await _taken(loop)
    await _drain(loop)
    assert [f["sequence"] for f in _frames_of(kafka, "sub-full")] == [0, 1, 2, 0, 1, 2]
    assert kafka.committed[(GROUP, LOG, 0)] == 3 and loop.partitions[0].position == 3
    assert _held(loop) == dict(replay(_events(kafka)).surfaces)
    assert loop.held == len(_held(loop))


async def test_a_partition_the_tail_dropped_for_a_stuck_projector_is_framed_once_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tail dropped what was queued for the projector (it waited past the stall): the
    projector follows the partition again from where it stands, and every event reaches the
    full subscriber once, in order."""
    kafka = MemoryKafka()
    run = _run("a", 0)
    loop = _loop(kafka, monkeypatch)
    loop.feed.max_batches, loop.feed.stall_s = 1, 0.0
    _subscribe(loop, "full", delta=False)
    await loop.consumer.assign({_tp(0)})
    await _taken(loop)
    _publish(kafka, run, 0, ["v0"])
    await _drain(loop)
    for n in (1, 2):
        _publish(kafka, run, n, [f"v{n}"])
    loop.tail.round()  # queued for a projector that does not take it
    await loop.feed.room()
    assert loop.feed.drops == 1 and loop.feed.overflowed == {0}
    assert not loop.tail.behind()  # nothing followed: the tail reads no further for it
    await loop.follow_again()
    await _drain(loop)
    assert [f["sequence"] for f in _frames_of(kafka, "sub-full")] == [0, 1, 2]
    assert kafka.committed[(GROUP, LOG, 0)] == 3
