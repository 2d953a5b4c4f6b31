"""What every handler module of the HTTP API shares: the ``Call`` a handler receives, the
handler types, and the answers several of them give (docs/http.md).

Shell module. Imports the core's error shapes (``app.core.http.errors``) and aiohttp, nothing
of the shell: the dispatcher (``app.shell.http.api``) and each handler module
(``app.shell.http.run_reads``, ``admission``, ``fork``, ``lifecycle``, ``run_listing``) import
it, never the other way round.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from app.core.http.errors import HttpError, error
from app.core.http.principals import Principal, Right, Unauthenticated
from app.core.http.routes import Route

__all__ = [
    "Call",
    "Handler",
    "PlainHandler",
    "error_response",
    "forbidden",
    "json_response",
    "no_run",
    "unauthenticated",
    "unavailable",
    "wrong_method",
]


@dataclass(frozen=True)
class Call:
    """What the dispatcher read for a handler: the route, the path's decoded parameters
    (``runId``, ``nodeId``, ...), the caller (``principal``: authorized for the route's right
    in the run's tenant, issue 18), and for a route that takes a body its bytes (``raw``) and,
    for a JSON route, its value after intake (``body``)."""

    route: Route
    params: Mapping[str, str]
    principal: Principal
    raw: bytes = b""
    body: Any = None


Handler = Callable[[web.Request, Call], Awaitable[web.StreamResponse]]
PlainHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, body=orjson.dumps(body), content_type="application/json", headers=headers
    )


def error_response(failure: HttpError, headers: dict[str, str] | None = None) -> web.Response:
    return json_response(failure.status, failure.body, headers)


def wrong_method(allowed: tuple[str, ...]) -> web.Response:
    """405 with the methods the path takes (RFC 9110 §15.5.6: Allow lists them)."""
    allow = ", ".join(sorted(set(allowed)))
    return json_response(
        405, {"error": "validation_error", "message": f"use {allow} here"}, {"Allow": allow}
    )


def unavailable(reason: str) -> web.Response:
    """503 with Retry-After: no worker can answer now (a rebalance, a tail not caught up)."""
    return error_response(
        error("a2ui-stream.unavailable", f"{reason}; retry shortly"),
        {"Retry-After": "1"},
    )


def no_run(run_id: str) -> web.Response:
    """The answer for a run never recorded, and (byte for byte: issue 18's no existence
    oracle) for a run outside the caller's tenants."""
    return error_response(error("not_found", f"run {run_id!r} has no recorded event"))


def unauthenticated(decided: Unauthenticated) -> web.Response:
    message = (
        "a bearer token is required (Authorization: Bearer <token>)"
        if decided.tokens_configured
        else "no token is configured on this worker: set A2UI_STREAM_HTTP_TOKENS "
        "or A2UI_STREAM_HTTP_TOKENS_FILE"
    )
    return error_response(
        error("unauthenticated", message), {"WWW-Authenticate": 'Bearer realm="openwop"'}
    )


def forbidden(right: Right, why: str) -> web.Response:
    """403: the caller lacks ``right`` (in one of its own tenants: a foreign run is answered as
    an unknown one). The same whether the run exists or not; it names no run."""
    return error_response(
        error("forbidden", f"this token does not hold the {right!r} right here{why}")
    )
