"""Sticky taint on every read of the run event stream, over real HTTP against a real broker
(issue 14 item 7; docs/admission.md decisions 4-5; openwop-a2ui.md §7, RFC 0209 §C.12).

A surface that has seen one untrusted envelope is untrusted for the life of the run, whatever a
later envelope says. The log records each envelope's own trust; every read must present the
surface's: the v1 SSE with and without ``?a2uiDelta=1`` (full events and delta frames), after a
reconnect with ``Last-Event-ID`` (the taint comes from the whole log prefix, not from what that
connection sent), the JSON event-log read, the v2 SSE and the v2 poll. Every envelope goes
through the admission topic and the validator (the seams publish admission records).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.devtools.fault_kit import WorkerProcess, apply_topics
from app.shell.cli.broker import Broker
from app.shell.settings import load_settings
from tests.core.projection_support import FULL_SURFACE_V0
from tests.integration.http_kit import (
    TOKEN,
    Builder,
    Http,
    SseEvent,
    components_msg,
    create_msg,
    read_sse,
    runs_path,
    v2,
    wait_http,
)

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SEAM_V1 = "/v1/host/sample/a2ui/emit-surface"
SEAM_V2 = "/conformance/seams/sample/a2ui/emit-surface"
SURFACE = "ui.a2ui-surface"
DELTA = "ui.a2ui-surface.delta"
JSON = {"Accept": "application/json"}


def _worker(broker: Broker, tmp: Path, tag: str, floor: str) -> Iterator[Http]:
    unique = uuid.uuid4().hex[:8]
    settings = replace(
        load_settings({}),
        topic_prefix=f"k{tag}{unique}.",
        app_id=f"a2ui-taint-{tag}-{unique}",
        partitions=3,
        fast_groups=True,
    )
    asyncio.run(apply_topics(broker, settings))
    env = {"A2UI_STREAM_HTTP_TOKENS": TOKEN, "A2UI_STREAM_SEAMS": "1", "A2UI_STREAM_FLOOR": floor}
    worker = WorkerProcess(broker, settings, tag, tmp, env)
    worker.start()
    try:
        yield wait_http(worker)
    finally:
        worker.stop()


@pytest.fixture(scope="module")
def floor1(broker: Broker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Http]:
    """A v1 host with the RFC 0114 delta transport (on by default)."""
    yield from _worker(broker, tmp_path_factory.mktemp("taint1"), "t1", "1")


@pytest.fixture(scope="module")
def floor2(broker: Broker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Http]:
    yield from _worker(broker, tmp_path_factory.mktemp("taint2"), "t2", "2")


def _v1_body(text: str) -> dict[str, Any]:
    body = json.loads(json.dumps(FULL_SURFACE_V0))
    body["surface"]["components"][1]["text"] = text
    return body


def _held_trust(frames: list[SseEvent], held: str | None = None) -> dict[int, str]:
    """What a consumer holds per surface sequence: a full frame states its trust, a delta keeps
    the trust of the last full (it carries none, RFC 0114); ``held`` is what it held before."""
    out: dict[int, str] = {}
    for frame in frames:
        if frame.event == SURFACE:
            doc = json.loads(frame.data)
            assert doc["contentTrust"] == doc["payload"]["trust"], doc
            held = doc["contentTrust"]
        elif frame.event != DELTA:
            continue
        assert held is not None and frame.id is not None, frames
        out[int(frame.id)] = held
    return out


def _doc_trust(docs: list[dict[str, Any]]) -> dict[int, str]:
    """The trust each surface event document states (a delta document has no payload.trust)."""
    out: dict[int, str] = {}
    for doc in docs:
        if doc["type"] == SURFACE:
            assert doc.get("contentTrust", doc["payload"]["trust"]) == doc["payload"]["trust"]
            out[doc["sequence"]] = doc["payload"]["trust"]
        elif doc["type"] == DELTA:
            out[doc["sequence"]] = doc["contentTrust"]
    return out


def test_v1_taint_stays_sticky_on_every_read(floor1: Http) -> None:
    http, run = floor1, f"taint-{uuid.uuid4().hex}"
    emits = [("trusted", "A"), ("untrusted", "B"), ("trusted", "C"), ("trusted", "D")]
    for sequence, (trust, text) in enumerate(emits):
        body = {"runId": run, "surface": _v1_body(text), "contentTrust": trust}
        reply = http.post(SEAM_V1, body)
        assert reply.status == 201 and reply.body["sequence"] == sequence, reply.body
    expected = {0: "trusted", 1: "untrusted", 2: "untrusted", 3: "untrusted"}
    base = http.base

    # SSE, every stream mode that carries surface events, with and without deltas
    for query in ("?a2uiDelta=1", "?a2uiDelta=1&streamMode=debug", "", "?streamMode=debug"):
        frames = read_sse(base, runs_path(run, f"/events{query}", v1=True), until=3)
        assert _held_trust(frames) == expected, (query, frames)
    delta = read_sse(base, runs_path(run, "/events?a2uiDelta=1", v1=True), until=3)
    assert [f.event for f in delta] == [SURFACE, SURFACE, DELTA, DELTA]  # sticky: no trust change

    # a reconnect: this connection never sent the untrusted event, the log prefix did
    for cursor in ("1", "2"):
        for query in ("?a2uiDelta=1", ""):
            frames = read_sse(
                base,
                runs_path(run, f"/events{query}", v1=True),
                until=3,
                headers={"Last-Event-ID": cursor},
            )
            assert [int(f.id or -1) for f in frames] == list(range(int(cursor) + 1, 4))
            resumed = {s: t for s, t in expected.items() if s > int(cursor)}
            # a delta patches what the client holds from before the cursor: untrusted
            assert _held_trust(frames, "untrusted") == resumed, (cursor, query, frames)
            fulls = [json.loads(f.data) for f in frames if f.event == SURFACE]
            assert all(doc["contentTrust"] == "untrusted" for doc in fulls), frames

    # the JSON event-log read, with and without deltas, and the v2 poll
    for query in ("?a2uiDelta=1", ""):
        read = http.get(runs_path(run, f"/events{query}", v1=True), headers=JSON)
        assert read.status == 200 and _doc_trust(read.body["events"]) == expected, query
    after_2 = http.get(runs_path(run, "/events", v1=True), headers={**JSON, "Last-Event-ID": "2"})
    assert _doc_trust(after_2.body["events"]) == {3: "untrusted"}
    poll = http.get(runs_path(run, "/events/poll?afterSequence=1&timeout=1"))
    assert poll.status == 200
    assert _doc_trust(poll.body["events"]) == {2: "untrusted", 3: "untrusted"}
    for doc in poll.body["events"]:  # the envelope itself travels as recorded
        meta = doc["payload"]["envelope"]["meta"]
        assert "contentTrust" not in meta or meta["contentTrust"] == "trusted"


def test_v2_taint_stays_sticky_per_surface_on_sse_and_poll(floor2: Http) -> None:
    http, run, b = floor2, f"taint/run-{uuid.uuid4().hex}", Builder()
    tainted, clean = b.sid("tainted"), b.sid("clean")
    envelopes = [
        b.envelope(v2(tainted, [create_msg(), components_msg()])),
        b.envelope(v2(clean, [create_msg(), components_msg()])),
        b.envelope(v2(tainted, [components_msg()]), trust="untrusted"),
        b.envelope(v2(tainted, [components_msg()])),
        b.envelope(v2(clean, [components_msg()])),
        b.envelope(v2(tainted, [components_msg()])),
    ]
    for sequence, envelope in enumerate(envelopes):
        reply = http.post(SEAM_V2, {"runId": run, "envelope": envelope})
        assert reply.status == 201 and reply.body["sequence"] == sequence, reply.body
    expected = {0: "trusted", 1: "trusted", 2: "untrusted", 3: "untrusted", 4: "trusted"}
    expected[5] = "untrusted"

    for path in (runs_path(run, "/events"), runs_path(run, "/events?a2uiDelta=1", v1=True)):
        frames = read_sse(http.base, path, until=5)
        got = {int(f.id or -1): json.loads(f.data) for f in frames if f.event == SURFACE}
        assert _doc_trust(list(got.values())) == expected, path
    resumed = read_sse(
        http.base, runs_path(run, "/events"), until=5, headers={"Last-Event-ID": "3"}
    )
    docs = [json.loads(f.data) for f in resumed if f.event == SURFACE]
    assert _doc_trust(docs) == {4: "trusted", 5: "untrusted"}
    poll = http.get(runs_path(run, "/events/poll?afterSequence=2&timeout=1"))
    assert _doc_trust(poll.body["events"]) == {3: "untrusted", 4: "trusted", 5: "untrusted"}
    read = http.get(runs_path(run, "/events", v1=True), headers=JSON)
    assert _doc_trust(read.body["events"]) == expected
