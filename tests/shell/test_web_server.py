"""The worker's web server as the worker builds it (app.shell.worker.faust_app.create_app), started
in-process without a broker: what it binds, which routes it serves, and that a slow client is
cut off (issue 14 items 4 and 10)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.shell.cli.broker import free_port
from app.shell.settings import load_settings
from app.shell.worker.faust_app import create_app

# Ours (app.shell.http.api, app.shell.http.viewer, /health and /metrics in faust_app): nothing else.
OUR_ROUTES = {
    ("GET", "/.well-known/openwop"),
    ("GET", "/v1/openapi.json"),
    ("GET", "/openapi.json"),
    ("GET", "/runs"),
    ("POST", "/runs"),
    ("GET", "/runs/{runId}"),
    ("GET", "/runs/{runId}/events"),
    ("GET", "/runs/{runId}/events/poll"),
    ("POST", "/runs/{runId}:fork"),
    ("POST", "/runs/{runId}/envelopes"),
    ("POST", "/runs/{runId}/cancel"),
    ("POST", "/runs/{runId}/interrupts/{nodeId}"),
    ("POST", "/runs/{runId}/actions"),
    ("*", "/runs/{rest}"),
    ("POST", "/v1/runs"),
    ("GET", "/v1/runs/{runId}"),
    ("GET", "/v1/runs/{runId}/events"),
    ("POST", "/v1/runs/{runId}:fork"),
    ("POST", "/v1/runs/{runId}/envelopes"),
    ("POST", "/v1/runs/{runId}/cancel"),
    ("POST", "/v1/runs/{runId}/interrupts/{nodeId}"),
    ("POST", "/v1/runs/{runId}/actions"),
    ("*", "/v1/runs/{rest}"),
    ("GET", "/ui"),
    ("GET", "/ui/"),
    ("GET", "/ui/runs/{runPath}"),
    ("GET", "/ui/assets/{name}"),
    ("GET", "/ui/api/runs"),
    ("GET", "/health"),
    ("GET", "/metrics"),
}
# and with A2UI_STREAM_SEAMS=1 the seams (the v1 acceptor seam at floor 1 only)
SEAM_ROUTES = {
    ("POST", "/v1/host/sample/a2ui/emit-surface"),
    ("POST", "/conformance/seams/sample/a2ui/emit-surface"),
}
ACCEPT_ROUTES = {("POST", "/v1/host/sample/envelope/accept")}


async def _serve(tmp_path: Path, **env: str) -> AsyncIterator[Any]:
    settings = load_settings(
        {
            "A2UI_STREAM_WEB_PORT": str(free_port()),
            "A2UI_STREAM_DATA_DIR": str(tmp_path / "data"),
            "A2UI_STREAM_HTTP_TOKENS": "t0k",
            "A2UI_STREAM_HTTP_READ_TIMEOUT_SECONDS": "1",
            "A2UI_STREAM_HTTP_WAIT_SECONDS": "1",  # no broker: a run route is 503 after 1 s
            **env,
        }
    )
    app, _topics = create_app(settings, "127.0.0.1:9")  # no broker: only the web server runs
    web: Any = app.web  # faust types it as its base Web; the aiohttp driver's has start_server
    web.init_server()
    await web.start_server()
    try:
        yield web
    finally:
        await web.stop_server()


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Any]:
    async for web in _serve(tmp_path):
        yield web


@pytest.fixture(params=["plain", "seams"])
async def any_server(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """Without the seams, and with them at floor 1 (every route of the table is served)."""
    env = {"A2UI_STREAM_SEAMS": "1", "A2UI_STREAM_FLOOR": "1"} if request.param == "seams" else {}
    async for web in _serve(tmp_path, **env):
        yield web, request.param == "seams"


def _port(web: Any) -> int:
    return int(web._runner.addresses[0][1])


async def test_only_our_routes_are_served(server: Any) -> None:
    """One aiohttp route, the dispatcher (app.shell.http.api.HttpApi.dispatch), which serves
    exactly the route table at this configuration (no seams here)."""
    registered = [(r.method, r.resource.canonical) for r in server.web_app.router.routes()]
    assert registered == [("*", "/{tail}")]
    api = next(iter(server.web_app.router.routes())).handler.__self__
    assert {(m, r.path) for r in api.routes for m in r.methods} == OUR_ROUTES


async def test_the_server_binds_the_configured_host_only(server: Any) -> None:
    hosts = {address[0] for address in server._runner.addresses}
    assert hosts == {"127.0.0.1"}


async def _closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """What the server sent before closing (b"" for a plain close); at most 30 s."""
    try:
        return await asyncio.wait_for(reader.read(), 30)
    except ConnectionResetError:
        return b""


async def test_half_a_request_line_is_closed_after_the_read_timeout(server: Any) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", _port(server))
    try:
        writer.write(b"GET /health HT")
        await writer.drain()
        try:
            sent = await _closed_by_server(reader)
        except TimeoutError:
            pytest.fail("the server kept a half-sent request line open for 30 s")
        assert sent == b""
    finally:
        writer.close()


async def test_a_body_sent_slowly_is_answered_408(server: Any) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", _port(server))
    try:
        writer.write(
            b"POST /runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t0k\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            b'{"workflow'
        )
        await writer.drain()
        try:
            sent = await _closed_by_server(reader)
        except TimeoutError:
            pytest.fail("the server waited 30 s for a body that never came")
        head, _, body = sent.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), sent[:200]
        assert json.loads(body)["error"] == "a2ui-stream.request_timeout"
    finally:
        writer.close()


async def _get(web: Any, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
    import aiohttp

    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{_port(web)}{path}", headers=headers) as response,
    ):
        return response.status, dict(response.headers), await response.json(content_type=None)


@pytest.mark.parametrize("version", [None, "2.0"])
async def test_discovery_may_be_cached_per_version(server: Any, version: str | None) -> None:
    """The suite's ``discovery`` scenario: 'serves Cache-Control per capabilities.md §4', read
    without a token; v1 (no header) and v2 alike. The document differs by OpenWOP-Version, so
    a cache is told to key on it."""
    headers = {"OpenWOP-Version": version} if version else {}
    status, got, body = await _get(server, "/.well-known/openwop", headers)
    assert status == 200 and "supportedEnvelopes" in body
    assert got.get("Cache-Control") == "public, max-age=60"
    assert got.get("Vary") == "OpenWOP-Version"


# A value for each path parameter of the table (app.core.http.routes): a tenant runId projected.
_EXAMPLE = {"runId": "acme~2Fr-0123456789abcdef", "nodeId": "gate", "name": "viewer.js",
            "runPath": "acme~2Fr-1", "rest": "acme~2Fr-1/nothing-here"}  # fmt: skip


def _path(template: str) -> str:
    for name, value in _EXAMPLE.items():
        template = template.replace(f"{{{name}}}", value)
    return template


async def _ask(web: Any, method: str, path: str) -> tuple[int, Any]:
    import aiohttp

    headers = {"Authorization": "Bearer t0k", "Content-Type": "application/json"}
    data = b"{}" if method == "POST" else None
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method, f"http://127.0.0.1:{_port(web)}{path}", headers=headers, data=data
        ) as response,
    ):
        body = await response.read()
        try:
            return response.status, json.loads(body)
        except ValueError:
            return response.status, None


def _unserved(status: int, body: Any) -> bool:
    """The dispatcher's own answer for a path or method no route takes."""
    if status == 405:
        return True
    message = body.get("message", "") if isinstance(body, dict) else ""
    return status == 404 and (message.startswith("no endpoint /") or "seams" in message)


async def test_the_openapi_document_lists_exactly_the_routes_served(any_server: Any) -> None:
    """Issue 17 item 3: ``GET /v1/openapi.json`` (no token, as the suite's ``discovery``
    scenario reads it) lists every route the dispatcher serves at this configuration, and every
    operation it lists is served: a real request to each reaches its handler (not the
    dispatcher's 404 for an unrouted path, nor a 405)."""
    web, seams = any_server
    status, _got, doc = await _get(web, "/v1/openapi.json", {})
    assert status == 200 and doc["openapi"].startswith("3.1")
    listed = {(m.upper(), path) for path, ops in doc["paths"].items() for m in ops}
    api = next(iter(web.web_app.router.routes())).handler.__self__
    served = {(m, r.path) for r in api.routes if r.documented for m in r.methods}
    assert listed == served
    expected = OUR_ROUTES | (SEAM_ROUTES | ACCEPT_ROUTES if seams else set())
    assert listed == {(m, p) for m, p in expected if m != "*"}
    answers = await asyncio.gather(*(_ask(web, m, _path(p)) for m, p in sorted(listed)))
    for (method, path), (status, body) in zip(sorted(listed), answers, strict=True):
        assert not _unserved(status, body), (method, path, status, body)
    # the catch-alls under a run are not operations: any endpoint they take is 404
    for prefix in ("/runs/", "/v1/runs/"):
        status, body = await _ask(web, "PUT", prefix + _EXAMPLE["rest"])
        assert (status, body["error"]) == (404, "not_found"), body
        assert "no endpoint " + prefix + "{runId}/nothing-here" in body["message"]


async def test_a_route_not_served_is_neither_listed_nor_answered(server: Any) -> None:
    """The seams off: their paths are 404 for any method (the message says why) and absent from
    the document; a path no route has is 404 whatever the method."""
    _status, _got, doc = await _get(server, "/v1/openapi.json", {})
    for _method, path in SEAM_ROUTES | ACCEPT_ROUTES:
        assert path not in doc["paths"]
        for method in ("GET", "POST", "PUT"):
            status, body = await _ask(server, method, path)
            assert (status, body["error"]) == (404, "not_found"), (method, path, body)
            assert "A2UI_STREAM_SEAMS" in body["message"]
    for method in ("GET", "POST", "DELETE", "PATCH"):
        status, body = await _ask(server, method, "/prompts")
        assert (status, body) == (404, {"error": "not_found", "message": "no endpoint /prompts"})


async def test_a_wrong_method_is_405_with_the_methods_the_path_takes(server: Any) -> None:
    for method, path, allow in [
        ("POST", "/health", "GET"),
        ("DELETE", "/runs", "GET, POST"),
        ("GET", "/runs/acme~2Fr-1:fork", "POST"),
        ("POST", "/.well-known/openwop", "GET"),
    ]:
        status, body = await _ask(server, method, path)
        assert (status, body) == (
            405,
            {"error": "validation_error", "message": f"use {allow} here"},
        ), (method, path)
