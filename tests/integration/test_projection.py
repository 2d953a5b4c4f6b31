"""The projector on a real broker: a full subscriber and a delta subscriber of the same run end
with exactly the surfaces the log materializes, and a resync brings one full frame."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from app.core.projection.surfaces import replay
from app.devtools.fault_kit import (
    Published,
    WorkerProcess,
    apply_topics,
    create,
    data,
    envelope,
    publish,
    wait_for_outcomes,
)
from app.shell.cli.broker import Broker
from app.shell.cli.subscriber_client import SubscriberClient
from app.shell.settings import Settings
from app.shell.worker.topics_admin import desired_for

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def _components(sid: str, texts: list[str]) -> dict:
    return {
        "version": "v0.9",
        "updateComponents": {
            "surfaceId": sid,
            "components": [
                {
                    "id": "root",
                    "component": "Column",
                    "children": [f"t{i}" for i in range(len(texts))],
                },
                *[{"id": f"t{i}", "component": "Text", "text": t} for i, t in enumerate(texts)],
            ],
        },
    }


def _v1(run: str, n: int, title: str) -> dict:
    rec = envelope(run, n, [], "unused")
    rec["envelope"]["schemaVersion"] = 1
    rec["envelope"]["payload"] = {
        "catalogVersion": "0.9.1",
        "surface": {
            "title": title,
            "components": [
                {"component": "heading", "text": title, "level": 2},
                {
                    "component": "action.button",
                    "id": "go",
                    "label": "Go",
                    "action": {"target": "resume"},
                },
            ],
        },
    }
    return rec


async def _collect(
    client: SubscriberClient, key: tuple[str, str], last: int, stop: asyncio.Event, out: dict
) -> None:
    """Record every delivered surface until ``key`` is delivered at sequence ``last``."""
    async for delivered in client.surfaces(stop):
        held = delivered.surface
        out[(held.run_id, held.surface_id)] = held
        out.setdefault("_kinds", []).append(delivered.kind)
        if (held.run_id, held.surface_id) == key and held.sequence >= last:
            stop.set()


async def test_full_and_delta_subscribers_reconstruct_the_same_surfaces(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    await apply_topics(broker, settings)
    # Floor 2 admits v2; the v1 leg of the projector is covered by the core tests.
    run = "run-projection"
    records = [envelope(run, 0, [create("s"), _components("s", ["a", "b"])], "s")]
    for n in range(1, 12):
        texts = [f"text {n}", "b", *(["extra"] if n % 3 == 0 else [])]
        records.append(envelope(run, n, [_components("s", texts), data("s", {"n": n})], "s"))
    published = [
        Published(run, run.encode(), orjson.dumps(r), r["envelope"]["correlationId"])
        for r in records
    ]
    worker = WorkerProcess(broker, settings, "w1", tmp_path)
    worker.start()
    full = SubscriberClient(
        broker.bootstrap, f"full-{settings.app_id}", runs=[run], settings=settings
    )
    delta = SubscriberClient(
        broker.bootstrap,
        f"delta-{settings.app_id}",
        runs=[run],
        delta=True,
        full_every=1000,
        settings=settings,
    )
    try:
        await full.register()
        await delta.register()
        await asyncio.sleep(0)  # the registrations are on the topic before any envelope
        await publish(
            broker.bootstrap,
            next(s.name for s in desired_for(settings) if s.id == "admission"),
            published,
        )
        observed = await wait_for_outcomes(
            broker, settings, len(records), timeout=120, workers=[worker]
        )
        got_full: dict = {}
        got_delta: dict = {}
        stop_full, stop_delta = asyncio.Event(), asyncio.Event()
        key = (run, "s")
        await asyncio.wait_for(
            asyncio.gather(
                _collect(full, key, len(records) - 1, stop_full, got_full),
                _collect(delta, key, len(records) - 1, stop_delta, got_delta),
            ),
            timeout=120,
        )
        # A delta that would smuggle an out-of-profile component in (RFC 0114's negative
        # example, v2 flavour): the client must fail closed, ask for a resync, and get exactly
        # the real surface back as one full frame.
        last = got_delta[key].sequence
        evil = {
            "kind": "delta",
            "runId": run,
            "surfaceId": "s",
            "surfaceRef": "evt-evil-000000000000",
            "baseSequence": last,
            "sequence": last + 1,
            "patch": [
                {
                    "op": "add",
                    "path": "/components/evil",
                    "value": {
                        "id": "evil",
                        "component": "Image",
                        "url": "https://evil.example/x.png",
                    },
                }
            ],
        }
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await producer.start()
        await producer.send_and_wait(delta.topic, orjson.dumps(evil), key=b"run/s")
        await producer.stop()
        after: dict = {}
        stop_after = asyncio.Event()
        await asyncio.wait_for(_collect_resync(delta, key, stop_after, after), timeout=120)
    finally:
        worker.stop()
    materialized = replay(observed.events)
    [surface] = materialized.surfaces_of(run)
    key = (run, "s")
    assert got_full[key].content == surface.content == got_delta[key].content
    assert got_full[key].sequence == got_delta[key].sequence == len(records) - 1
    # The delta subscriber really received deltas, and only validated surfaces were handed out.
    assert "delta" in got_delta["_kinds"]
    assert set(got_full["_kinds"]) == {"full"}
    assert got_delta[key].renderable and not got_delta[key].stale
    # After the poisoned delta: the only thing delivered is the resync's full frame, equal to
    # the materialized surface; the Image never reached the application.
    assert after["_kinds"] == ["full"]
    assert after[key].content == surface.content
    assert "evil" not in after[key].content["components"]
    assert delta.resyncs_requested == 1


async def _collect_resync(
    client: SubscriberClient, key: tuple[str, str], stop: asyncio.Event, out: dict
) -> None:
    """Read the subscriber topic again from its start with the view the client already holds:
    old frames are re-applied (idempotent or refused as out of date), then the poisoned delta,
    then the resync answer."""
    async for delivered in client.surfaces(stop):
        if client.resyncs_requested == 0:
            continue  # frames before the poison
        held = delivered.surface
        out[(held.run_id, held.surface_id)] = held
        out.setdefault("_kinds", []).append(delivered.kind)
        if (held.run_id, held.surface_id) == key and delivered.kind == "full":
            stop.set()


async def test_subscribe_command_prints_validated_surfaces(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    import signal
    import subprocess
    import sys
    import time

    await apply_topics(broker, settings)
    run = "run-subscribe-cli"
    worker = WorkerProcess(broker, settings, "w1", tmp_path)
    worker.start()
    out = open(tmp_path / "subscribe.out", "w+")  # noqa: SIM115
    cli = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.shell.cli",
            "subscribe",
            "--run",
            run,
            "--delta",
            "--id",
            "cli-test",
        ],
        env=worker.env(),
        stdout=out,
        stderr=subprocess.PIPE,
        text=True,
    )
    stderr = cli.stderr
    assert stderr is not None
    try:
        # Wait (bounded) until the registration is live, then publish two updates.
        deadline = time.monotonic() + 60
        while "subscribed as cli-test" not in (
            stderr.readline() if cli.poll() is None else "subscribed as cli-test"
        ):
            assert time.monotonic() < deadline
        records = [
            envelope(run, 0, [create("s"), _components("s", ["hello"])], "s"),
            envelope(run, 1, [_components("s", ["hello again"])], "s"),
        ]
        await publish(
            broker.bootstrap,
            next(s.name for s in desired_for(settings) if s.id == "admission"),
            [Published(run, run.encode(), orjson.dumps(r), None) for r in records],
        )
        lines: list[dict] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            out.seek(0)
            lines = [orjson.loads(line) for line in out.read().splitlines() if line.strip()]
            if any(line["sequence"] == 1 for line in lines):
                break
            await asyncio.sleep(0.3)
    finally:
        cli.send_signal(signal.SIGINT)
        cli.wait(timeout=30)
        stderr.close()
        out.close()
        worker.stop()
    last = [line for line in lines if line["sequence"] == 1][-1]
    assert last["surface"]["components"]["t0"]["text"] == "hello again"
    assert last["renderable"] is True and last["trust"] == "trusted"
    assert {line["frame"] for line in lines} <= {"full", "delta"}


async def test_a_late_subscriber_gets_the_current_surfaces_at_once(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    await apply_topics(broker, settings)
    run = "run-late"
    records = [
        envelope(run, 0, [create("s"), _components("s", ["early"])], "s"),
        envelope(run, 1, [_components("s", ["current"])], "s"),
    ]
    worker = WorkerProcess(broker, settings, "w1", tmp_path)
    worker.start()
    try:
        await publish(
            broker.bootstrap,
            next(s.name for s in desired_for(settings) if s.id == "admission"),
            [Published(run, run.encode(), orjson.dumps(r), None) for r in records],
        )
        await wait_for_outcomes(broker, settings, 2, timeout=120, workers=[worker])
        # Registered only now: no further change will come, yet the surface must arrive.
        late = SubscriberClient(
            broker.bootstrap, f"late-{settings.app_id}", runs=[run], delta=True, settings=settings
        )
        await late.register()
        got: dict = {}
        stop = asyncio.Event()
        await asyncio.wait_for(_collect(late, (run, "s"), 1, stop, got), timeout=90)
    finally:
        worker.stop()
    assert got[(run, "s")].content["components"]["t0"]["text"] == "current"
    assert got["_kinds"] == ["full"]


async def test_a_resync_request_sent_while_no_worker_runs_is_answered_by_the_next_owner(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    await apply_topics(broker, settings)
    run = "run-orphan-resync"
    names = {s.id: s.name for s in desired_for(settings)}
    records = [envelope(run, 0, [create("s"), _components("s", ["only"])], "s")]
    sub = SubscriberClient(
        broker.bootstrap, f"orphan-{settings.app_id}", runs=[run], delta=False, settings=settings
    )
    await sub.register()
    worker = WorkerProcess(broker, settings, "w1", tmp_path)
    worker.start()
    try:
        await publish(
            broker.bootstrap,
            names["admission"],
            [Published(run, run.encode(), orjson.dumps(r), None) for r in records],
        )
        await wait_for_outcomes(broker, settings, 1, timeout=120, workers=[worker])
    finally:
        worker.stop()
    # No worker runs: this request has no owner now, and the surface will never change again.
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    await producer.start()
    try:
        request = {
            "subscriberId": sub.subscriber_id,
            "runId": run,
            "surfaceId": "s",
            "reason": "test: asked while no worker ran",
            "sequence": 0,
        }
        sent = await producer.send_and_wait(
            names["resync"], orjson.dumps(request), key=sub.subscriber_id.encode()
        )
    finally:
        await producer.stop()
    wanted = f"{sent.partition}:{sent.offset}".encode()
    worker = WorkerProcess(broker, settings, "w2", tmp_path)
    worker.start()
    try:
        answers = await _frames_naming(broker.bootstrap, sub.spec.name, wanted, timeout=120)
    finally:
        worker.stop()
    assert len(answers) == 1
    frame = orjson.loads(answers[0])
    assert frame["kind"] == "full" and frame["runId"] == run and frame["surfaceId"] == "s"
    assert frame["surface"]["components"]["t0"]["text"] == "only"


async def _frames_naming(bootstrap: str, topic: str, source: bytes, timeout: float) -> list:
    """The frames on ``topic`` whose a2ui-resync header is ``source`` (waits for the first,
    then a few seconds more for any repeat)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    found: list = []
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                for record in records:
                    if ("a2ui-resync", source) in list(record.headers or ()):
                        found.append(record.value)
            if found and deadline - loop.time() > 5:
                deadline = loop.time() + 5
        return found
    finally:
        await consumer.stop()


async def _collect_all(
    client: SubscriberClient, last: dict[tuple[str, str], int], stop: asyncio.Event, out: dict
) -> None:
    """Record every delivered surface until each key of ``last`` reached its sequence."""
    async for delivered in client.surfaces(stop):
        held = delivered.surface
        out[(held.run_id, held.surface_id)] = held
        out.setdefault("_kinds", []).append(delivered.kind)
        if all(k in out and out[k].sequence >= s for k, s in last.items()):
            stop.set()


async def _three_subscribers_of(
    broker: Broker,
    settings: Settings,
    decider: WorkerProcess,
    name: str,
    runs: list[str],
    records: list[dict],
    last_sequence: int,
) -> tuple[Any, list[dict], dict]:
    """A full and a delta subscriber of ``runs`` registered, ``records`` published and decided
    by ``decider``'s validator, both subscribers' frames collected up to each run's event
    ``last_sequence``, then a subscriber registered afterwards (its catch-up rebuilds the
    evicted runs) and its frames collected: the outcomes, the two views and the late one."""
    subs = [
        SubscriberClient(
            broker.bootstrap,
            f"{kind}-{name}-{settings.app_id}",
            runs=runs,
            delta=kind == "delta",
            full_every=1000,
            settings=settings,
        )
        for kind in ("full", "delta")
    ]
    last = {(run, "s"): last_sequence for run in runs}
    for sub in subs:
        await sub.register()
    await asyncio.sleep(0)
    await publish(
        broker.bootstrap,
        next(s.name for s in desired_for(settings) if s.id == "admission"),
        [Published(r["runId"], r["runId"].encode(), orjson.dumps(r), None) for r in records],
    )
    observed = await wait_for_outcomes(
        broker, settings, len(records), timeout=120, workers=[decider]
    )
    got: list[dict] = [{}, {}]
    stops = [asyncio.Event(), asyncio.Event()]
    await asyncio.wait_for(
        asyncio.gather(
            *(_collect_all(s, last, e, g) for s, e, g in zip(subs, stops, got, strict=True))
        ),
        timeout=120,
    )
    late = SubscriberClient(
        broker.bootstrap, f"late-{name}-{settings.app_id}", runs=runs, settings=settings
    )
    await late.register()
    caught: dict = {}
    await asyncio.wait_for(_collect_all(late, last, asyncio.Event(), caught), timeout=120)
    return observed, got, caught


def _interleaved(runs: list[str], events: int, extra: bool) -> list[dict]:
    """``events`` envelopes of each run, taking turns: one surface, its text changed each
    time (and, with ``extra``, a second component every other event)."""
    records = []
    for n in range(events):
        for run in runs:
            messages = [create("s")] if n == 0 else []
            texts = [f"{run} {n}", *(["extra"] if extra and n % 2 else [])]
            records.append(envelope(run, n, [*messages, _components("s", texts)], "s"))
    return records


async def test_a_projector_with_room_for_one_surface_sends_the_same_surfaces(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    """Issue 15 item 3 on a real broker: with A2UI_STREAM_PROJECTOR_CACHE_SURFACES=1 three
    interleaved runs evict each other at every event and are rebuilt from the run store (or
    the log); a full and a delta subscriber, and a subscriber registered afterwards (its
    catch-up rebuilds the evicted runs), end with exactly the surfaces the log materializes."""
    await apply_topics(broker, settings)
    runs = [f"run-evict-{i}" for i in range(3)]
    records = _interleaved(runs, 6, extra=True)
    worker = WorkerProcess(
        broker, settings, "w1", tmp_path, {"A2UI_STREAM_PROJECTOR_CACHE_SURFACES": "1"}
    )
    worker.start()
    try:
        observed, got, caught = await _three_subscribers_of(
            broker, settings, worker, "evict", runs, records, 5
        )
        evictions = worker.counter("a2ui_projector_evictions_total")
        rebuilds = worker.counter("a2ui_projector_rebuilds_total")
        held = worker.counter("a2ui_projector_surfaces")
    finally:
        worker.stop()
    materialized = replay(observed.events)
    for run in runs:
        [surface] = materialized.surfaces_of(run)
        for view in (*got, caught):
            assert view[(run, "s")].content == surface.content
    assert "delta" in got[1]["_kinds"] and set(caught["_kinds"]) == {"full"}
    assert evictions > 0 and rebuilds > 0 and held == 1


async def test_a_projector_only_worker_is_fed_every_partition_it_projects(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    """The one log consumer per process (app/shell/worker/log_feed.py) on a real broker, where
    the read side owns nothing: a worker with the projector role alone, beside a worker with
    the validator alone. Its read side's tail reads every log partition for its projector
    only; with room for one surface a late subscriber's catch-up rebuilds the evicted runs
    from the log (its store holds none of them). A full, a delta and the late subscriber end
    with the surfaces the log materializes."""
    await apply_topics(broker, settings)
    runs = [f"run-fed-{i}" for i in range(3)]
    records = _interleaved(runs, 4, extra=False)
    validator = WorkerProcess(broker, settings, "v1", tmp_path, {"A2UI_STREAM_ROLES": "validator"})
    projector = WorkerProcess(
        broker,
        settings,
        "p1",
        tmp_path,
        {"A2UI_STREAM_ROLES": "projector", "A2UI_STREAM_PROJECTOR_CACHE_SURFACES": "1"},
    )
    validator.start()
    projector.start()
    try:
        observed, got, caught = await _three_subscribers_of(
            broker, settings, validator, "fed", runs, records, 3
        )
        fed = projector.counter("a2ui_projector_fed_records_total")
        from_log = projector.counter('a2ui_projector_rebuilds_total{source="log"}')
        runs_held = projector.counter("a2ui_http_runs")
    finally:
        projector.stop()
        validator.stop()
    materialized = replay(observed.events)
    for run in runs:
        [surface] = materialized.surfaces_of(run)
        for view in (*got, caught):
            assert view[(run, "s")].content == surface.content
    assert fed >= len(records) and from_log > 0 and runs_held == 0
