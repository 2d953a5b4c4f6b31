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
import time
import uuid
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from app.core.common.examples import BASIC_CATALOG
from app.core.runlog.keys import partition_for_run
from app.devtools.fault_kit import WorkerProcess, apply_topics
from app.shell.cli.broker import Broker
from app.shell.cli.subscriber_client import SubscriberClient
from app.shell.worker.kafka_io import read_topic
from tests.integration.http_kit import TOKEN, Builder, Http, read_sse, runs_path, v2, wait_http
from tests.integration.test_http import SEAM_V2, settings_for

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SECRET = "sk-live-" + uuid.uuid4().hex
# A run-scoped registration (issue 14 item 6): only this run and its forks have it.
RUN_SECRET = "sk-run-" + uuid.uuid4().hex
SCOPED_RUN = f"sec/scoped-{uuid.uuid4().hex}"
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
    settings = settings_for("sec")
    asyncio.run(apply_topics(broker, settings))
    secrets = tmp / "secrets.json"
    secrets.write_text(
        json.dumps(
            {
                "*": [{"secretId": "byok", "value": SECRET}],
                SCOPED_RUN: [{"secretId": "run-key", "value": RUN_SECRET}],
            }
        )
    )
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


def test_nothing_unsafe_or_secret_reaches_any_subscriber_and_taint_sticks(stack) -> None:  # type: ignore[no-untyped-def]  # noqa: C901 - one story, step by step
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
    tainted_from = http.get(runs_path(run, v1=True)).body["lastSequence"]
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
    last = http.get(runs_path(run, v1=True)).body["lastSequence"]

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


def _scan_clean(broker: Broker, worker: WorkerProcess, http: Http, prefix: str) -> None:
    """No registered value in any topic the host writes (dead letters' kept originals too),
    /metrics, the viewer's run list or the worker's log. The admission topic is the producers'
    input, as they sent it."""
    names = [
        t
        for t in asyncio.run(_topic_names(broker))
        if t.startswith(prefix) and t != prefix + "admission"
    ]
    assert len(names) >= 5  # log, dead letters, resumes, subscriptions, resync, subscribers
    deadletter = prefix + "deadletter"
    for name in names:
        for record in asyncio.run(read_topic(broker.bootstrap, name)):
            for blob in (record.value or b"", record.key or b""):
                assert SECRET.encode() not in blob and RUN_SECRET.encode() not in blob, name
            if name == deadletter:
                original = base64.b64decode(orjson.loads(record.value)["original"]["base64"])
                assert SECRET.encode() not in original and RUN_SECRET.encode() not in original
    for text in (
        worker.metrics(),
        http.get("/ui/api/runs").raw.decode(),
        Path(worker.log_path).read_text(errors="replace"),
    ):
        assert SECRET not in text and RUN_SECRET not in text


async def _topic_names(broker: Broker) -> list[str]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        return sorted(await admin.list_topics())
    finally:
        await admin.close()


def test_secrets_never_leak_through_ids_forks_or_unparsed_bytes(stack) -> None:  # type: ignore[no-untyped-def]
    """Issue 14 items 2 and 6, end to end: (a) a runId or a component id holding a registered
    secret is refused, never recorded redacted or raw; (b) a fork's envelopes are redacted with
    its parent's run-scoped secrets; (c) bytes that never parsed are redacted with the secrets
    of the run their Kafka key names."""
    broker, settings, worker, http = stack
    b = Builder()
    topics = http.get("/health").body["topics"]
    sid = b.sid("ids")
    surface = [CREATE, _components(ROOT, TEXT, LABEL, BUTTON)]
    # (a) identifiers
    for run, envelope in (
        (f"sec/{SECRET}", b.envelope(v2(sid, surface))),
        (SCOPED_RUN + "-x", b.envelope(v2(f"s-{SECRET}", [CREATE]))),
    ):
        reply = http.post(SEAM_V2, {"runId": run, "envelope": envelope})
        assert reply.status == 422, reply.body
        assert reply.body["details"]["rule"] == "identifier-secret"
        assert SECRET not in reply.raw.decode()
    leaf = {**TEXT, "id": f"t{RUN_SECRET}"}
    root = {**ROOT, "children": [f"t{RUN_SECRET}", "b"]}
    reply = http.post(
        SEAM_V2,
        {"runId": SCOPED_RUN, "envelope": b.envelope(v2(sid, [CREATE, _components(root, leaf)]))},
    )
    assert (reply.status, reply.body["details"]["rule"]) == (422, "identifier-secret")
    # (b) a fork of the run-scoped run
    assert _emit(http, SCOPED_RUN, b.envelope(v2(sid, surface))) == 201
    assert _emit(http, SCOPED_RUN, b.envelope(v2(sid, [_components(TEXT)]))) == 201
    forked = http.post(runs_path(SCOPED_RUN, ":fork"), {"mode": "branch", "fromSeq": 1})
    assert forked.status == 201, forked.body
    child = forked.body["runId"]
    update = v2(sid, [_components({**TEXT, "text": f"the key is {RUN_SECRET}"})])
    assert _emit(http, child, b.envelope(update)) == 201
    events = http.get(runs_path(child, "/events/poll?timeout=1")).body["events"]
    assert "[REDACTED:run-key]" in json.dumps(events)
    assert events[1]["type"] == "run.forked" and events[1]["payload"]["lineage"] == [SCOPED_RUN]
    # (c) unparsed bytes keyed by the run-scoped run
    for raw in (
        b'{"runId": "' + SCOPED_RUN.encode() + b'", "envelope": {"x": "' + RUN_SECRET.encode(),
        b'{"note": "' + RUN_SECRET.encode() + b'", "bad": "\xff"}',
        b"\xff" + RUN_SECRET.encode(),
        b'{"runId": "' + SCOPED_RUN.encode() + b'", "runId": "' + SCOPED_RUN.encode() + b'", '
        b'"k": "' + RUN_SECRET.encode() + b'"}',
    ):
        asyncio.run(_raw(broker, topics["admission"], SCOPED_RUN, raw))

    # the last of them is decided once the validator wrote four more dead letters for the run
    async def letters_for_run() -> int:
        records = await read_topic(broker.bootstrap, topics["deadletter"])
        return sum(r.key == SCOPED_RUN.encode() for r in records)

    for _ in range(150):
        if asyncio.run(letters_for_run()) >= 5:  # the component-id refusal, then the four
            break
        time.sleep(0.2)
    assert asyncio.run(letters_for_run()) >= 5
    assert topics["deadletter"] == settings.topic_prefix + "deadletter"
    _scan_clean(broker, worker, http, settings.topic_prefix)
