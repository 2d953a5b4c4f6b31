"""Test kit for the OpenWOP HTTP API on a real worker: a small JSON client, an SSE reader, a
TCP proxy that drops a connection mid-stream, and the conformance suite's envelope builders
(openwop-a2ui.md §16a)."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any

from app.core.common.examples import BASIC_CATALOG, rfc0209_positive_payload
from app.core.http.wire_ids import project_run_id
from app.devtools.fault_kit import WorkerProcess

TOKEN = "test-token-" + uuid.uuid4().hex


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]
    raw: bytes = b""


class Http:
    """A JSON client for one worker (urllib: no extra dependency)."""

    def __init__(self, base: str, token: str | None = TOKEN, version: str | None = None):
        self.base, self.token, self.version = base.rstrip("/"), token, version

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        timeout: float = 30,
    ) -> Reply:
        sent = {"Content-Type": "application/json", **(headers or {})}
        if self.token is not None:
            sent.setdefault("Authorization", f"Bearer {self.token}")
        if self.version is not None:
            sent.setdefault("OpenWOP-Version", self.version)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, headers=sent, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                raw = response.read()
                status, got = response.status, dict(response.headers)
        except urllib.error.HTTPError as exc:
            raw, status, got = exc.read(), exc.code, dict(exc.headers)
        try:
            parsed = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            parsed = None
        return Reply(status, parsed, got, raw)

    def get(self, path: str, **kw: Any) -> Reply:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any, **kw: Any) -> Reply:
        return self.request("POST", path, body, **kw)


def send_raw(
    base: str,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30,
) -> Reply:
    """One request exactly as given: no Content-Type or Authorization is added (http.client
    adds only Host, unless ``headers`` names one, and Content-Length for a body)."""
    host, _, port = base.removeprefix("http://").rpartition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        raw = response.read()
        status, got = response.status, dict(response.headers)
    finally:
        connection.close()
    try:
        parsed = json.loads(raw) if raw else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        parsed = None
    return Reply(status, parsed, got, raw)


def non_loopback_address() -> str | None:
    """An address of this machine that is not loopback (the interface a route out would
    use; no packet is sent), or None when there is none."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1: only the routing table is consulted
        address = str(probe.getsockname()[0])
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def wait_http(worker: WorkerProcess, timeout: float = 90) -> Http:
    """Wait until the worker answers and its run index has read the log."""
    base = f"http://127.0.0.1:{worker.web_port}"
    deadline = time.monotonic() + timeout
    client = Http(base)
    while time.monotonic() < deadline:
        try:
            # any run path answers only once the index has read the log (503 before)
            if (
                client.get("/health", timeout=3).status == 200
                and client.get("/runs/probe-ready", timeout=15).status == 404
            ):
                return client
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.3)
    raise AssertionError(f"worker web not ready:\n{worker.tail()}")


def runs_path(run_id: str, rest: str = "", *, v1: bool = False) -> str:
    return f"{'/v1' if v1 else ''}/runs/{project_run_id(run_id)}{rest}"


# -- SSE ------------------------------------------------------------------------------------------


@dataclass
class SseEvent:
    id: str | None
    event: str
    data: str


def parse_sse(raw: bytes) -> list[SseEvent]:
    events: list[SseEvent] = []
    for block in raw.decode().replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, list[str]] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value[1:] if value.startswith(" ") else value)
        if "data" in fields:
            events.append(
                SseEvent(
                    fields.get("id", [None])[-1],
                    fields.get("event", ["message"])[-1],
                    "\n".join(fields["data"]),
                )
            )
    return events


def read_sse(
    base: str, path: str, *, until: int, headers: dict[str, str] | None = None, timeout: float = 30
) -> list[SseEvent]:
    """Read an SSE stream until an event with id >= ``until`` arrived (or the server closed)."""
    sent = {"Accept": "text/event-stream", "Authorization": f"Bearer {TOKEN}", **(headers or {})}
    req = urllib.request.Request(base + path, headers=sent)
    buffer = b""
    with urllib.request.urlopen(req, timeout=timeout) as response:
        while True:
            line = response.readline()
            if not line:
                break
            buffer += line
            if line in (b"\n", b"\r\n"):
                events = parse_sse(buffer)
                if events and events[-1].id is not None and int(events[-1].id) >= until:
                    return events
    return parse_sse(buffer)


# -- a proxy that drops the first connection mid-stream ------------------------------------------


@dataclass
class CuttingProxy:
    """Forwards 127.0.0.1:port to the worker; the FIRST connection is cut after the server
    sent ``cut_after`` bytes. ``received[i]`` is what the server sent on connection i."""

    upstream_port: int
    cut_after: int
    port: int = 0
    received: list[bytearray] = field(default_factory=list)

    def start(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self) -> None:
        self._server.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            index = len(self.received)
            self.received.append(bytearray())
            threading.Thread(target=self._serve, args=(client, index), daemon=True).start()

    def _serve(self, client: socket.socket, index: int) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        limit = self.cut_after if index == 0 else None

        def up() -> None:
            try:
                while chunk := client.recv(65536):
                    upstream.sendall(chunk)
            except OSError:
                pass

        threading.Thread(target=up, daemon=True).start()
        try:
            while chunk := upstream.recv(65536):
                if limit is not None and len(self.received[index]) + len(chunk) >= limit:
                    keep = limit - len(self.received[index])
                    self.received[index] += chunk[:keep]
                    client.sendall(chunk[:keep])
                    break  # drop the connection mid-stream
                self.received[index] += chunk
                client.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()


# -- the conformance suite's builders (§16a) ------------------------------------------------------

V1_SURFACE = {
    "catalogVersion": "0.9.1",
    "surface": {
        "title": "Kickoff",
        "components": [
            {"component": "heading", "text": "Kickoff", "level": 2},
            {
                "component": "action.button",
                "id": "go",
                "label": "Go",
                "action": {"target": "resume"},
            },
        ],
    },
}
V1_LATER = {
    "catalogVersion": "0.9.1",
    "surface": {"components": [{"component": "heading", "text": "Kickoff, later", "level": 2}]},
}


class Builder:
    """``{type, schemaVersion, envelopeId, correlationId, nodeId?, payload, meta}`` as the suite
    builds them, with a fresh nonce per builder."""

    def __init__(self) -> None:
        self.nonce = uuid.uuid4().hex[:8]
        self.n = 0

    def envelope(
        self,
        payload: Any,
        *,
        schema_version: int = 2,
        node_id: str | None = None,
        trust: Any = None,
    ) -> dict[str, Any]:
        self.n += 1
        env: dict[str, Any] = {
            "type": "ui.a2ui-surface",
            "schemaVersion": schema_version,
            "envelopeId": f"env-0209-{self.nonce}-{self.n}",
            "correlationId": f"corr-0209-{self.nonce}-{self.n}",
        }
        if node_id is not None:
            env["nodeId"] = node_id
        env["payload"] = payload
        meta: dict[str, Any] = {"source": "ai-generation", "ts": "2026-11-30T00:00:00Z"}
        if trust is not None:
            meta["contentTrust"] = trust
        env["meta"] = meta
        return env

    def sid(self, tag: str) -> str:
        return f"s-{tag}-{self.nonce}"


def v2(sid: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Stamp ``surfaceId`` into every message body (the suite's ``v2(sid, msgs)``)."""
    stamped = []
    for message in messages:
        message = json.loads(json.dumps(message))
        for key, body in message.items():
            if key != "version" and isinstance(body, dict):
                body["surfaceId"] = sid
        stamped.append(message)
    return {"version": "v0.9", "catalogId": BASIC_CATALOG, "surfaceId": sid, "messages": stamped}


def create_msg(catalog: str = BASIC_CATALOG) -> dict[str, Any]:
    return {"version": "v0.9", "createSurface": {"surfaceId": "x", "catalogId": catalog}}


def components_msg() -> dict[str, Any]:
    return json.loads(json.dumps(rfc0209_positive_payload()["messages"][1]))


def data_msg() -> dict[str, Any]:
    return {"version": "v0.9", "updateDataModel": {"surfaceId": "x", "value": {"name": "x"}}}


def delete_msg() -> dict[str, Any]:
    return {"version": "v0.9", "deleteSurface": {"surfaceId": "x"}}


def stringify(value: Any) -> str:
    """JavaScript's JSON.stringify (key order as given, no spaces)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def contains_subtree(haystack: Any, needle: Any) -> bool:
    """§8 byte-equality: some object in ``haystack`` stringifies exactly as ``needle``."""
    target = stringify(needle)

    def walk(node: Any) -> bool:
        if isinstance(node, dict):
            if stringify(node) == target:
                return True
            return any(walk(v) for v in node.values())
        if isinstance(node, list):
            return any(walk(v) for v in node)
        return False

    return walk(haystack)


async def publish_raw(
    http: Http, bootstrap: str, record: dict[str, Any], partitions: int = 3
) -> dict[str, Any] | None:
    """Publish ``record`` on the admission topic as any producer could (no gateway seal) and
    return its dead letter (None when the validator wrote none within about 20 s)."""
    from aiokafka import AIOKafkaProducer

    from app.core.runlog.keys import partition_for_run
    from app.shell.worker.kafka_io import read_topic

    topics = http.get("/health").body["topics"]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        meta = await producer.send_and_wait(
            topics["admission"],
            json.dumps(record).encode(),
            key=record["runId"].encode(),
            partition=partition_for_run(record["runId"], partitions),
        )
    finally:
        await producer.stop()
    for _ in range(100):
        for letter in await read_topic(bootstrap, topics["deadletter"]):
            value: dict[str, Any] = json.loads(letter.value)
            source = value["source"]
            if source["offset"] == meta.offset and source["partition"] == meta.partition:
                return value
        await asyncio.sleep(0.2)
    return None


# -- ownership (issue 15 item 2) ------------------------------------------------------------------


async def owners_of(http: Http, bootstrap: str) -> dict[int, str]:
    """Each claimed partition's advertised URL, from the owners topic as every worker folds it."""
    from app.core.runlog.ownership import Owner, apply_owner, decode_owner
    from app.shell.worker.kafka_io import read_topic

    topic = http.get("/health").body["topics"]["owners"]
    folded: dict[int, Owner] = {}
    for record in await read_topic(bootstrap, topic):
        update = decode_owner(record.key, record.value)
        if update is not None:
            after = apply_owner(folded.get(update.partition), update)
            if after is None:
                folded.pop(update.partition, None)
            else:
                folded[update.partition] = after
    return {p: o.url for p, o in folded.items() if o.owned}


def wait_owned(
    workers: list[Http], bootstrap: str, partitions: int, timeout: float = 60
) -> dict[int, str]:
    """Wait until every partition is claimed by one of ``workers`` and each answers for it."""
    deadline = time.monotonic() + timeout
    bases = {w.base for w in workers}
    while time.monotonic() < deadline:
        owners = asyncio.run(owners_of(workers[0], bootstrap))
        if set(owners) == set(range(partitions)) and set(owners.values()) <= bases:
            return owners
        time.sleep(0.3)
    raise AssertionError(f"partitions not all claimed in {timeout} s: {owners}")


def run_on(partitions: set[int], count: int, tenant: str = "fwd") -> str:
    """A fresh runId whose partition (of ``count``) is in ``partitions``."""
    from app.core.runlog.keys import partition_for_run

    while True:
        run = f"{tenant}/run-{uuid.uuid4().hex}"
        if partition_for_run(run, count) in partitions:
            return run


def metric(http: Http, name: str) -> float:
    """The value of one /metrics sample line (its full name with labels)."""
    text = http.get("/metrics").raw.decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0
