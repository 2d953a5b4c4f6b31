"""Security invariants over the whole pipeline, not just the core (issue 8 part 4; §15):

- no out-of-profile component, code-execution path, URL fetch or secret input reaches any
  subscriber: Kafka subscribers (full and delta frames) and HTTP SSE (full and RFC 0114);
- untrusted taint is sticky: once untrusted, every later full frame and snapshot of the surface
  says so, the taint reaches a delta subscriber in a full frame, and a delta never drops it;
- a registered secret never appears in the log, the dead letters, the frames, the resumes
  topic, the worker's own log output, /metrics or SSE.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from app.core.examples import BASIC_CATALOG
from app.core.keys import partition_for_run
from app.shell.broker import Broker
from app.shell.kafka_io import read_topic
from app.shell.subscriber_client import SubscriberClient
from tests.integration.http_kit import TOKEN, Builder, Http, read_sse, runs_path, v2, wait_http
from tests.integration.pipeline_kit import WorkerProcess, apply_topics
from tests.integration.test_http import SEAM_V2, _settings

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SECRET = "sk-live-" + uuid.uuid4().hex
# What must never reach a subscriber (§15): excluded components, URL/egress fields, code
# execution and secret input.
FORBIDDEN_ON_THE_WIRE = (
    b'"Image"',
    b'"Video"',
    b'"AudioPlayer"',
    b'"Icon"',
    b'"iframe"',
    b"functionCall",
    b"openUrl",
    b"obscured",
    b"iconUrl",
    b"evil.example",
)


def _components(*components: dict) -> dict:
    return {
        "version": "v0.9",
        "updateComponents": {"surfaceId": "x", "components": list(components)},
    }


ROOT = {"id": "root", "component": "Column", "children": ["t", "b"]}
TEXT = {"id": "t", "component": "Text", "text": "hello"}
LABEL = {"id": "bl", "component": "Text", "text": "Go"}
BUTTON = {"id": "b", "component": "Button", "child": "bl", "action": {"event": {"name": "resume"}}}
CREATE = {"version": "v0.9", "createSurface": {"surfaceId": "x", "catalogId": BASIC_CATALOG}}

HOSTILE = [
    _components({"id": "i", "component": "Image", "url": "https://evil.example/x.png"}),
    _components({"id": "v", "component": "Video", "url": "https://evil.example/v.mp4"}),
    _components({"id": "a", "component": "AudioPlayer", "url": "https://evil.example/a.mp3"}),
    _components({"id": "c", "component": "Icon", "name": "evil"}),
    _components({"id": "p", "component": "TextField", "label": "Password", "variant": "obscured"}),
    _components(
        {
            "id": "b",
            "component": "Button",
            "child": "bl",
            "action": {
                "functionCall": {"call": "openUrl", "args": {"url": "https://evil.example/"}}
            },
        }
    ),
    _components(
        {
            "id": "b",
            "component": "Button",
            "child": "bl",
            "action": {"event": {"name": "deleteAll"}},
        }
    ),
    _components({"id": "t", "component": "Text", "text": {"call": "formatString", "args": {}}}),
    _components({"id": "t", "component": "Text", "text": "x", "onClick": "evil.example"}),
]


@pytest.fixture(scope="module")
def stack(broker: Broker, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("security")
    settings = _settings("sec")
    asyncio.run(apply_topics(broker, settings))
    secrets = tmp / "secrets.json"
    secrets.write_text(json.dumps({"*": [{"secretId": "byok", "value": SECRET}]}))
    worker = WorkerProcess(
        broker,
        settings,
        "sec0",
        tmp,
        {
            "A2UI_STREAM_HTTP_TOKENS": TOKEN,
            "A2UI_STREAM_SEAMS": "1",
            "A2UI_STREAM_SECRETS_FILE": str(secrets),
            "A2UI_STREAM_LOG_LEVEL": "debug",  # the most a log can say must still be clean
        },
    )
    worker.start()
    try:
        yield broker, settings, worker, wait_http(worker)
    finally:
        worker.stop()


def _emit(http: Http, run: str, envelope: dict) -> int:
    return http.post(SEAM_V2, {"runId": run, "envelope": envelope}).status


async def _raw(broker: Broker, topic: str, run: str, value: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(
            topic, value, key=run.encode(), partition=partition_for_run(run, 3)
        )
    finally:
        await producer.stop()


def test_nothing_unsafe_or_secret_reaches_any_subscriber_and_taint_sticks(stack) -> None:  # type: ignore[no-untyped-def]
    broker, settings, worker, http = stack
    run, b = f"sec/{uuid.uuid4().hex}", Builder()
    sid = b.sid("s1")
    clients = [
        SubscriberClient(
            broker.bootstrap, f"sec-full-{uuid.uuid4().hex[:6]}", runs=[run], settings=settings
        ),
        SubscriberClient(
            broker.bootstrap,
            f"sec-delta-{uuid.uuid4().hex[:6]}",
            runs=[run],
            delta=True,
            full_every=1000,
            settings=settings,
        ),
    ]
    for client in clients:
        asyncio.run(client.register())
    topics = http.get("/health").body["topics"]

    # a valid surface; then every hostile variant (all refused); then taint, then "laundering"
    assert (
        _emit(http, run, b.envelope(v2(sid, [CREATE, _components(ROOT, TEXT, LABEL, BUTTON)])))
        == 201
    )
    for hostile in HOSTILE:
        assert _emit(http, run, b.envelope(v2(sid, [hostile]))) == 422
    secret_text = {**TEXT, "text": f"token {SECRET} here"}
    assert _emit(http, run, b.envelope(v2(sid, [_components(secret_text)]))) == 201
    assert _emit(http, run, b.envelope(v2(sid, [_components(TEXT)]), trust="untrusted")) == 201
    tainted_from = http.get(runs_path(run)).body["lastSequence"]
    assert (
        _emit(
            http,
            run,
            b.envelope(v2(sid, [_components({**TEXT, "text": "clean"})]), trust="trusted"),
        )
        == 201
    )
    # a refused envelope carrying the secret, and non-UTF-8 bytes carrying it
    assert (
        _emit(http, run, b.envelope(v2(sid, [_components({**TEXT, "text": SECRET, "url": 1})])))
        == 422
    )
    asyncio.run(_raw(broker, topics["admission"], run, b"\xff\xfe" + SECRET.encode() + b"\x80"))
    # an accepted action whose context carries the secret (resumes topic)
    action = {"surfaceId": sid, "sourceComponentId": "b", "name": "resume", "context": {}}
    assert http.post(runs_path(run, "/actions"), action).status == 403  # tainted: refused
    last = http.get(runs_path(run)).body["lastSequence"]

    # -- Kafka subscribers: wait until both hold the last sequence -------------------------------
    async def collect(client: SubscriberClient) -> dict:
        stop, held = asyncio.Event(), {}
        async for delivered in client.surfaces(stop):
            held[delivered.surface.surface_id] = delivered.surface
            if delivered.surface.surface_id == sid and delivered.surface.sequence >= last - 1:
                stop.set()
        return held

    held = [asyncio.run(asyncio.wait_for(collect(c), 120)) for c in clients]
    for view in held:
        assert view[sid].trust == "untrusted"  # sticky: the trusted update did not launder it
        assert not view[sid].actions_enabled

    frames = []
    for client in clients:
        records = asyncio.run(read_topic(broker.bootstrap, client.topic))
        assert records
        frames += records
        # Taint reaches every subscriber in a full frame: a delta carries no status at all
        # (a trust change is always a full frame), so the first frame at or after the taint
        # is a full frame saying untrusted, every later full says so too, and no delta could
        # carry "trusted" (the client refuses a delta naming any status member).
        seen_taint = False
        for record in records:
            frame = orjson.loads(record.value or b"{}")
            if frame.get("surfaceId") != sid or frame.get("sequence", -1) < tainted_from:
                continue
            if frame["kind"] == "full":
                assert frame["trust"] == "untrusted" and not frame["actionsEnabled"], frame
                seen_taint = True
            else:
                assert seen_taint, frame  # no delta before the untrusted full frame
                assert not {"trust", "partial", "actionsEnabled", "deleted"} & set(frame)
        assert seen_taint
    for record in frames:
        value = record.value or b""
        for needle in FORBIDDEN_ON_THE_WIRE:
            assert needle not in value, (needle, value[:300])
        assert SECRET.encode() not in value

    # -- HTTP SSE: v2 updates, values snapshots, and the v1 path with deltas -------------------
    base = http.base
    streams = [
        read_sse(base, runs_path(run, "/events"), until=last),
        read_sse(base, runs_path(run, "/events?streamMode=values"), until=last),
        read_sse(base, runs_path(run, "/events?a2uiDelta=1", v1=True), until=last),
    ]
    for events in streams:
        wire = "".join(e.data for e in events).encode()
        for needle in FORBIDDEN_ON_THE_WIRE:
            assert needle not in wire
        assert SECRET.encode() not in wire
    snapshot = json.loads(streams[1][-1].data)
    [surface] = [s for s in snapshot["surfaces"] if s["surfaceId"] == sid]
    assert surface["trust"] == "untrusted"

    # -- the log, the dead letters (their kept originals too), resumes, /metrics, the worker log
    for topic in ("log", "deadletter", "resumes"):
        for record in asyncio.run(read_topic(broker.bootstrap, topics[topic])):
            value = record.value or b""
            assert SECRET.encode() not in value, topic
            if topic == "deadletter":
                letter = orjson.loads(value)
                original = base64.b64decode(letter["original"]["base64"])
                assert SECRET.encode() not in original
    letters = [
        orjson.loads(r.value)
        for r in asyncio.run(read_topic(broker.bootstrap, topics["deadletter"]))
        if orjson.loads(r.value).get("runId") == run or r.key == run.encode()
    ]
    # nothing lost: a redacted dead letter still says what it was (digest and size of the bytes)
    assert any(letter["original"]["redacted"] for letter in letters)
    assert all(len(letter["original"]["sha256"]) == 64 for letter in letters)
    assert SECRET not in worker.metrics()
    assert SECRET not in Path(worker.log_path).read_text(errors="replace")
    assert TOKEN not in Path(worker.log_path).read_text(errors="replace")
