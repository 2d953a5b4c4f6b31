"""Forwarding a run request to the worker that owns the run's partition (issue 15 item 2;
docs/http.md, "Reading: the owner serves each run").

Shell module. Kafka Streams' interactive queries leave the RPC to the application; here it is
a plain HTTP proxy (an aiohttp client with a keep-alive pool): the request's method, path and
query, its body as it was read, and the headers a run route reads (the caller's
``Authorization`` included, so the owner authenticates the caller itself), marked with
``A2UI-Stream-Forwarded`` so the owner never forwards it again. The answer comes back as the
owner gave it; an SSE answer is streamed through chunk by chunk as it arrives (no buffering),
and ends when the owner's stream ends (a revoked partition closes its streams; the client
resumes with ``Last-Event-ID``, which reaches the new owner).

Not an open proxy: it is called only by the run routes (``app.shell.http.api``) after the
caller authenticated here, and only with an owner's advertised origin from the owners topic
(``app.core.runlog.ownership.advertised_url_problem`` admits ``scheme://host:port`` only), to which
the run route's own path is appended.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import aiohttp
from aiohttp import web

from app.core.http.errors import error
from app.core.runlog.ownership import FORWARDED_HEADER

__all__ = ["Forwarder"]

log = logging.getLogger("a2ui_stream.http")

# What a run route reads from the request, and what its answers carry.
_REQUEST_HEADERS = (
    "Authorization",
    "Accept",
    "Content-Type",
    "Last-Event-ID",
    "OpenWOP-Version",
)
_RESPONSE_HEADERS = (
    "Content-Type",
    "Cache-Control",
    "Retry-After",
    "WWW-Authenticate",
    "Allow",
    "X-Accel-Buffering",
)


def _unavailable(message: str) -> web.Response:
    failure = error("a2ui-stream.unavailable", message)
    return web.json_response(failure.body, status=failure.status, headers={"Retry-After": "1"})


class Forwarder:
    """One client session per worker (its connection pool is reused across requests)."""

    def __init__(self, worker_id: str, *, read_seconds: float) -> None:
        self.worker_id = worker_id
        self.timeout = aiohttp.ClientTimeout(
            total=None, connect=3, sock_connect=3, sock_read=read_seconds
        )
        self._session: aiohttp.ClientSession | None = None
        self.forwarded = 0  # requests sent to an owner, for /metrics
        self.failed = 0  # ... that the owner did not answer

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=self.timeout,
                auto_decompress=False,
                connector=aiohttp.TCPConnector(limit=0, limit_per_host=256),
            )
        return self._session

    async def stop(self) -> None:
        if self._session is not None:
            with contextlib.suppress(Exception):
                await self._session.close()

    def headers_of(self, request: web.Request) -> dict[str, str]:
        sent = {name: request.headers[name] for name in _REQUEST_HEADERS if name in request.headers}
        sent[FORWARDED_HEADER] = self.worker_id
        return sent

    async def forward(
        self, request: web.Request, origin: str, body: bytes | None, owner: str
    ) -> web.StreamResponse:
        """Send ``request`` (with ``body``, when it was read) to ``origin`` and answer with the
        owner's answer; 503 with Retry-After when the owner does not answer."""
        url = origin + request.rel_url.raw_path_qs
        self.forwarded += 1
        try:
            async with self._client().request(
                request.method,
                url,
                data=body if body else None,
                headers=self.headers_of(request),
                allow_redirects=False,
            ) as upstream:
                headers = {
                    name: upstream.headers[name]
                    for name in _RESPONSE_HEADERS
                    if name in upstream.headers
                }
                if upstream.headers.get("Content-Type", "").startswith("text/event-stream"):
                    return await self._stream(request, upstream, headers)
                payload = await upstream.read()
                return web.Response(status=upstream.status, body=payload, headers=headers)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            self.failed += 1
            log.warning("http: the owner %s did not answer (%s)", owner, type(exc).__name__)
            return _unavailable(
                f"the worker that serves this run ({owner}) did not answer "
                f"({type(exc).__name__}); retry shortly"
            )

    async def _stream(
        self, request: web.Request, upstream: aiohttp.ClientResponse, headers: dict[str, str]
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status, headers=headers)
        await response.prepare(request)
        with contextlib.suppress(ConnectionResetError, aiohttp.ClientError, TimeoutError):
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
        return response

    async def get_json(self, origin: str, path: str, headers: dict[str, str]) -> Any | None:
        """A JSON read of ``path`` on another owner (the viewer's run listing gathers from
        every owner); None when it does not answer 200 in time."""
        try:
            async with self._client().get(
                origin + path, headers=headers, timeout=aiohttp.ClientTimeout(total=5)
            ) as upstream:
                if upstream.status != 200:
                    return None
                return await upstream.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
            return None
