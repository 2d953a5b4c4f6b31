"""The worker's web server as the worker builds it (app.shell.faust_app.create_app), started
in-process without a broker: what it binds, which routes it serves, and that a slow client is
cut off (issue 14 items 4 and 10)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.shell.broker import _free_port
from app.shell.faust_app import create_app
from app.shell.settings import load_settings

# Ours (app.shell.http_api, app.shell.viewer, /health and /metrics in faust_app): nothing else.
OUR_ROUTES = {
    "/.well-known/openwop",
    "/runs",
    "/runs/{tail}",
    "/v1/runs/{tail}",
    "/v1/host/sample/a2ui/emit-surface",
    "/v1/host/sample/envelope/accept",
    "/conformance/seams/sample/a2ui/emit-surface",
    "/ui",
    "/ui/",
    "/ui/runs/{tail}",
    "/ui/assets/{name}",
    "/ui/api/runs",
    "/health",
    "/metrics",
}


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Any]:
    settings = load_settings(
        {
            "A2UI_STREAM_WEB_PORT": str(_free_port()),
            "A2UI_STREAM_DATA_DIR": str(tmp_path / "data"),
            "A2UI_STREAM_HTTP_TOKENS": "t0k",
            "A2UI_STREAM_HTTP_READ_TIMEOUT_SECONDS": "1",
        }
    )
    app, _topics = create_app(settings, "127.0.0.1:9")  # no broker: only the web server runs
    web = app.web
    web.init_server()
    await web.start_server()
    try:
        yield web
    finally:
        await web.stop_server()


def _port(web: Any) -> int:
    return int(web._runner.addresses[0][1])


async def test_only_our_routes_are_served(server: Any) -> None:
    routes = {route.resource.canonical for route in server.web_app.router.routes()}
    assert routes == OUR_ROUTES


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
