"""The web app's one middleware: every request meets ``app.core.http.guard`` before any route.

Shell module (the HTTP room). The worker (``app.shell.worker.faust_app``) installs it on the
web app Faust builds; it runs before the dispatcher (``app.shell.http.api.HttpApi.dispatch``:
ours, the viewer's, /health, /metrics) and applies the Host rule of the laptop mode, the Origin rule
and the JSON content type of every mutating request (issue 14 item 4; docs/http.md, "What the
network and web pages can reach"); the web server's own refusals become OpenWOP error
envelopes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from app.core.http.admission import body_too_large
from app.core.http.errors import error
from app.core.http.guard import RequestHead, check_request
from app.core.http.routes import NotRouted, Route, match
from app.shell.http.responses import error_response, wrong_method

__all__ = ["Middleware", "request_guard"]

Middleware = Callable[
    [web.Request, Callable[[web.Request], Awaitable[web.StreamResponse]]],
    Awaitable[web.StreamResponse],
]


def request_guard(
    *, loopback_only: bool, max_record_bytes: int, routes: tuple[Route, ...]
) -> Middleware:
    """The web app's one middleware: every request meets ``app.core.http.guard`` before the
    dispatcher (``HttpApi.dispatch``: ours, the viewer's, /health, /metrics) runs, and the web
    server's own refusals (a body beyond ``client_max_size``) are OpenWOP error envelopes
    instead of aiohttp's plain text. ``loopback_only`` is the laptop mode (auth off);
    ``routes`` the served route table (a path none serves is exempt from the content type)."""

    @web.middleware
    async def guard(
        request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        head = RequestHead(
            request.method,
            request.headers.get("Host"),
            request.headers.get("Origin"),
            request.headers.get("Content-Type"),
            # a path no route serves is answered 404 by the dispatcher, whatever its type
            routed=not isinstance(
                match(routes, request.method, request.rel_url.raw_path), NotRouted
            ),
        )
        refused = check_request(head, loopback_only=loopback_only)
        if refused is not None:
            return error_response(refused)
        try:
            return await handler(request)
        except web.HTTPRequestEntityTooLarge:
            return error_response(
                body_too_large(request.content_length, max_bytes=max_record_bytes)
            )
        except web.HTTPNotFound:  # the dispatcher's catch-all takes every path: a safety net
            return error_response(error("not_found", f"no endpoint {request.path[:200]}"))
        except web.HTTPMethodNotAllowed as exc:  # and every method: a safety net too
            return wrong_method(tuple(exc.allowed_methods))

    return guard
