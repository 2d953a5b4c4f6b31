"""Issue 14 item 2 (second half), on a real broker: a recorded surface that fails the
subscriber's re-validation must not start a resync loop.

The log is written by hand, bypassing the validator, the way a log written by an older version
(or another host's bug) could hold it: a surface whose component id is ``[REDACTED:glob]`` (SR-1
replaced a registered secret used as an id, which the profile's id pattern refuses), and a
valid second surface in the same run. The projector and two subscribers (full and delta) run
for a window measured in resync round trips of the valid surface, not in seconds: each probe
is a resync request for ``good`` that the test sends and waits to see answered, so the window
is as long as that many request/answer cycles of the invalid surface would take if it looped
(the loop runs at the same pace). Then the resync topic is counted.

The surface is then fixed (sequence 2) and must be delivered: a later change resumes normal
handling. Measured on the code before the fix: 12 and 12 requests for the invalid surface with
a window of 10 probes, 42 and 42 with 40 (a loop: it grows with the window, and stops only when
the surface is fixed). After: 1 (full subscriber) and 2 (delta subscriber) with either window:
the first failing full frame asks once, its answer fails the same way so the surface is held
invalid at sequence 0, and the delta subscriber asks once more for sequence 2, which it cannot
apply a delta to (it holds no valid base).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from app.core.admission.decision import RECORDED_EVENT_SCHEMA_VERSION, event_id_for
from app.core.runlog.keys import log_key, partition_for_run
from app.devtools.fault_kit import BASIC, WorkerProcess, apply_topics
from app.shell.cli.broker import Broker
from app.shell.cli.subscriber_client import SubscriberClient
from app.shell.settings import Settings
from app.shell.worker.kafka_io import read_topic
from app.shell.worker.topics_admin import desired_for

pytestmark = [pytest.mark.broker, pytest.mark.slow]

REDACTED_ID = "[REDACTED:glob]"  # what SR-1 made of a registered secret used as a component id
PROBES = 10  # the window: this many resync round trips of the valid surface
MAX_REQUESTS = 2  # resync requests per subscriber for the invalid surface, at most


def _recorded(
    run: str, sequence: int, surface_id: str, items: list[dict[str, Any]], recreate: bool = False
) -> bytes:
    """A recorded event as app.core.admission.decision's ``_record`` writes it
    (schemas/recorded-event): createSurface and updateComponents
    (after a deleteSurface with ``recreate``)."""
    messages: list[dict[str, Any]] = [
        {"version": "v0.9", "createSurface": {"surfaceId": surface_id, "catalogId": BASIC}},
        {"version": "v0.9", "updateComponents": {"surfaceId": surface_id, "components": items}},
    ]
    if recreate:
        messages.insert(0, {"version": "v0.9", "deleteSurface": {"surfaceId": surface_id}})
    envelope = {
        "type": "ui.a2ui-surface",
        "schemaVersion": 2,
        "envelopeId": f"env-{run}-{sequence}",
        "correlationId": f"corr-{run}-{sequence}",
        "payload": {
            "version": "v0.9",
            "catalogId": BASIC,
            "surfaceId": surface_id,
            "messages": messages,
        },
        "meta": {"source": "ai-generation", "ts": "2026-11-30T00:00:00Z"},
    }
    event = {
        "eventId": event_id_for(run, sequence),
        "runId": run,
        "sequence": sequence,
        "type": "ui.a2ui-surface",
        "schemaVersion": RECORDED_EVENT_SCHEMA_VERSION,
        "timestamp": "2026-11-30T00:00:00Z",
        "causationId": envelope["correlationId"],
        "contentTrust": "trusted",
        "payload": {"envelope": envelope, "version": 2, "trust": "trusted"},
    }
    return orjson.dumps(event)


def _column(*children: str) -> dict[str, Any]:
    return {"id": "root", "component": "Column", "children": list(children)}


class _Watch:
    """What one subscriber's loop delivered: full frames of each surface, counted, with an event
    the probe waits on."""

    def __init__(self, client: SubscriberClient) -> None:
        self.client = client
        self.full: Counter[str] = Counter()
        self.delivered: dict[str, Any] = {}
        self.changed = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        async for delivered in self.client.surfaces(stop):
            held = delivered.surface
            self.delivered[held.surface_id] = held
            if delivered.kind == "full":
                self.full[held.surface_id] += 1
            self.changed.set()

    async def until(self, done: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{self.client.subscriber_id}: not reached in {timeout:.0f}s"
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), remaining)


async def test_an_invalid_recorded_surface_does_not_loop_and_the_run_keeps_rendering(
    broker: Broker, settings: Settings, tmp_path: Path
) -> None:
    await apply_topics(broker, settings)
    names = {spec.id: spec.name for spec in desired_for(settings)}
    run = "run-invalid-surface"
    worker = WorkerProcess(broker, settings, "p1", tmp_path, {"A2UI_STREAM_ROLES": "projector"})
    worker.start()
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    try:
        # The projector owns every log partition (its group joined and restored them) before
        # anything is registered or logged, so every frame below is planned live.
        deadline = time.monotonic() + 120
        while worker.log_count(b"restored up to offset") < settings.partitions:
            assert worker.alive() and time.monotonic() < deadline, worker.tail()
            await asyncio.sleep(0.2)
        watches = [
            _Watch(
                SubscriberClient(
                    broker.bootstrap,
                    f"{kind}-{settings.app_id}",
                    runs=[run],
                    delta=kind == "delta",
                    settings=settings,
                )
            )
            for kind in ("full", "delta")
        ]
        for watch in watches:
            await watch.client.register()
            tasks.append(asyncio.create_task(watch.run(stop)))
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        await producer.start()
        try:
            partition = partition_for_run(run, settings.partitions)
            bad = [_column(REDACTED_ID), {"id": REDACTED_ID, "component": "Text", "text": "x"}]
            good = [_column("t0"), {"id": "t0", "component": "Text", "text": "fine"}]
            for sequence, (sid, items) in enumerate([("bad", bad), ("good", good)]):
                await producer.send_and_wait(
                    names["log"],
                    _recorded(run, sequence, sid, items),
                    key=log_key(run, sequence),
                    partition=partition,
                )
            for watch in watches:
                await watch.until(lambda w=watch: "good" in w.delivered, timeout=120)
            # The window: PROBES resync round trips of the valid surface (request, answer
            # delivered), the pace at which a loop on the invalid one would run beside it.
            probe = watches[1]
            for n in range(PROBES):
                before = probe.full["good"]
                request = {
                    "subscriberId": probe.client.subscriber_id,
                    "runId": run,
                    "surfaceId": "good",
                    "reason": f"test probe {n}",
                    "sequence": 1,
                }
                await producer.send_and_wait(
                    names["resync"],
                    orjson.dumps(request),
                    key=probe.client.subscriber_id.encode(),
                )
                await probe.until(lambda b=before: probe.full["good"] > b, timeout=60)
            # A later change to the invalid surface resumes normal handling: re-created with
            # valid components at sequence 2, it is delivered (the delta subscriber, which holds
            # no base for it, asks once more, the only other request the surface may cost).
            fixed = [_column("t0"), {"id": "t0", "component": "Text", "text": "fixed"}]
            await producer.send_and_wait(
                names["log"],
                _recorded(run, 2, "bad", fixed, recreate=True),
                key=log_key(run, 2),
                partition=partition,
            )
            for watch in watches:
                await watch.until(
                    lambda w=watch: "bad" in w.delivered and w.delivered["bad"].sequence == 2,
                    timeout=120,
                )
        finally:
            await producer.stop()
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        worker.stop()
    requests: Counter[tuple[str, str]] = Counter()
    for record in await read_topic(broker.bootstrap, names["resync"]):
        if record.value is not None:
            request = orjson.loads(record.value)
            if not request["reason"].startswith("test probe"):
                requests[(request["subscriberId"], request["surfaceId"])] += 1
    for watch in watches:
        sid = watch.client.subscriber_id
        # no loop: a bounded number of requests for the invalid surface, whatever the window
        assert requests[(sid, "bad")] <= MAX_REQUESTS, dict(requests)
        assert requests[(sid, "good")] == 0, dict(requests)
        # the run's other surface is rendered; the invalid one was never handed out, and its
        # fixed state (sequence 2) is
        assert watch.delivered["good"].renderable and not watch.delivered["good"].stale
        fixed_surface = watch.delivered["bad"]
        assert fixed_surface.renderable and fixed_surface.content["components"]["t0"]["text"] == (
            "fixed"
        )
        assert REDACTED_ID not in fixed_surface.content["components"]
        # the invalid surface is reported once, saying which surface, rule, pointer, sequence
        reports = [r for r in watch.client.reports if r.surface_id == "bad"]
        assert len(reports) == 1, reports
        [report] = reports
        assert (report.run_id, report.sequence) == (run, 0)
        assert report.pointer.startswith("/components/root/children/0"), report
        assert REDACTED_ID in report.message and report.rule
