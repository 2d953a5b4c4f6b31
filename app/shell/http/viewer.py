"""The live surface viewer on the worker's web server (issue 9; docs/viewer.md).

Shell module. Serves the viewer that ``viewer/`` builds into ``app/viewer_dist/`` (``make
viewer``: ``npm ci && npm run build``) and one JSON read for its index; the page itself reads
the OpenWOP HTTP API (``/v1/runs/{runId}/events?a2uiDelta=1``) and sends actions only to
``POST /runs/{runId}/actions``. Decisions (asset names, the security policy, the listing) come
from ``app.core.http.viewer_index``.

Routes (their table is app.core.http.routes; the dispatcher is app.shell.http.api's):
  GET /ui, /ui/                the index of recent runs (the page)
  GET /ui/runs/{runId}         one run's live surfaces (the page; runId in its projected form)
  GET /ui/assets/{name}        the built script, stylesheet and source maps
  GET /ui/api/runs             recent runs as JSON (same bearer rule as the run endpoints),
                               gathered from every partition's owner (issue 15 item 2)

The pages and assets hold no run data and need no token. ``/ui/api/runs`` follows the HTTP
API's rule: a bearer token unless auth is off (``a2ui-stream up``, loopback only), the ``read``
right, and only the runs of the tenants the token may read (issue 18; each owner asked filters
its own, by the caller's Authorization it is sent). When the assets are not built, every page
answers 503 with a page that says how to build them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

import orjson
from aiohttp import web

from app.core.http.errors import error
from app.core.http.principals import (
    TOKENLESS,
    Principal,
    Principals,
    Unauthenticated,
    authenticate,
    bearer_token,
    may,
    plain_principals,
    tenant_of,
)
from app.core.http.snapshot import DEFAULT_TENANT
from app.core.http.viewer_index import CONTENT_SECURITY_POLICY, RunSummary, asset_type, recent_runs
from app.core.runlog.ownership import FORWARDED_HEADER
from app.core.runlog.run_lifecycle import TERMINAL_STATUSES
from app.shell.settings import Settings
from app.shell.worker.run_store import RunSummary as StoredSummary

__all__ = ["DIST", "ViewerPages", "register"]

DIST = Path(__file__).resolve().parents[2] / "viewer_dist"

_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

_NOT_BUILT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>a2ui-stream viewer: not built</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 44rem; margin: 3rem auto">
<h1>The viewer is not built</h1>
<p>This worker serves the live surface viewer from <code>app/viewer_dist/</code>, which is
built from <code>viewer/</code> with Node.js (20 or later) and npm. From the repository:</p>
<pre>make viewer</pre>
<p>(that is <code>cd viewer &amp;&amp; npm ci &amp;&amp; npm run build</code>), then reload this
page. <code>make install</code>, <code>make up</code> and <code>make test</code> build it too
when npm is available. See docs/viewer.md.</p>
</body></html>
"""


class Runs(Protocol):
    """What the listing reads of the run index (app.shell.worker.run_index.RunIndex)."""

    partitions: int
    ready_partitions: set[int]

    def summaries(self) -> Iterable[StoredSummary]: ...


class Owners(Protocol):
    """What the listing reads of the ownership map (app.shell.worker.ownership.Ownership)."""

    owned: set[int]

    def owner_urls(self) -> dict[str, str]: ...

    def claimed(self) -> set[int]: ...


class Gatherer(Protocol):
    """How it asks the other owners (app.shell.http.forward.Forwarder)."""

    async def get_json(self, origin: str, path: str, headers: dict[str, str]) -> Any | None: ...


class ViewerPages:
    """The viewer's request handlers over a run index and a built assets directory.
    ``principals``: the worker's (read once at start); without them, ``auth`` and ``tokens``
    are the plain token list's (every tenant, every right)."""

    def __init__(
        self,
        index: Runs,
        *,
        auth: bool,
        tokens: tuple[str, ...],
        dist: Path = DIST,
        owners: Owners | None = None,
        gatherer: Gatherer | None = None,
        worker_id: str = "",
        principals: Principals | None = None,
    ) -> None:
        self.index = index
        self.owners = owners
        self.gatherer = gatherer
        self.worker_id = worker_id
        if principals is None:
            principals = plain_principals(tokens) if auth else TOKENLESS
        self.principals = principals
        self.dist = dist

    def built(self) -> bool:
        return (self.dist / "index.html").is_file() and (self.dist / "assets").is_dir()

    async def page(self, request: web.Request) -> web.StreamResponse:
        """Every page is the same single-page app; it routes on its own path."""
        if not self.built():
            return web.Response(
                status=503, text=_NOT_BUILT, content_type="text/html", headers=_HEADERS
            )
        body = (self.dist / "index.html").read_bytes()
        return web.Response(body=body, content_type="text/html", charset="utf-8", headers=_HEADERS)

    async def redirect(self, request: web.Request) -> web.StreamResponse:
        return web.Response(status=302, headers={**_HEADERS, "Location": "/ui/"})

    async def asset(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info.get("name", "")
        content_type = asset_type(name)
        path = self.dist / "assets" / name
        if content_type is None or not path.is_file():
            return _json(404, error("not_found", f"no viewer asset {name[:80]!r}").body)
        return web.Response(
            body=path.read_bytes(), headers={**_HEADERS, "Content-Type": content_type}
        )

    async def runs(self, request: web.Request) -> web.StreamResponse:
        """The recent runs of the whole deployment: this worker's own partitions from its
        store, and every other owner's, asked once each (a request that another worker
        forwarded answers with its own runs only). ``ready`` is false while a partition has
        no ready owner or an owner did not answer (a rebalance; the list may be partial)."""
        who = self._caller(request)
        if not isinstance(who, Principal):
            return who
        summaries = [
            RunSummary(s.run_id, s.last_sequence, s.status, s.status in TERMINAL_STATUSES,
                       s.events, s.updated_ms)
            for s in self.index.summaries()
            if may(who, "read", tenant_of(s.run_id, DEFAULT_TENANT))
        ]  # fmt: skip
        owned = self.owners.owned if self.owners is not None else set()
        ready = owned <= self.index.ready_partitions
        total = len(summaries)
        if FORWARDED_HEADER not in request.headers and self.owners is not None:
            claimed = self.owners.claimed() | owned
            ready = ready and claimed >= set(range(self.index.partitions))
            answers = await self._gather(request)
            for answer in answers:
                if not isinstance(answer, dict) or not isinstance(answer.get("runs"), list):
                    ready = False
                    continue
                ready = ready and answer.get("ready") is True
                total += int(answer.get("total", 0))
                summaries.extend(_remote(answer["runs"]))
        listing = recent_runs(summaries)
        listing["total"] = total
        listing["ready"] = ready  # false while a partition is still being read or moving
        return _json(200, listing)

    async def _gather(self, request: web.Request) -> list[Any]:
        if self.owners is None or self.gatherer is None:
            return []
        headers = {FORWARDED_HEADER: self.worker_id or "viewer"}
        if "Authorization" in request.headers:
            headers["Authorization"] = request.headers["Authorization"]
        origins = sorted(set(self.owners.owner_urls().values()))
        return list(
            await asyncio.gather(
                *(self.gatherer.get_json(origin, "/ui/api/runs", headers) for origin in origins)
            )
        )

    def _caller(self, request: web.Request) -> Principal | web.Response:
        """The HTTP API's bearer rule (app.core.http.principals: constant-time, never logged); the
        dispatcher has checked it and the ``read`` right already, this keeps the handler safe
        on its own. Only the runs of the tenants the caller may read are listed."""
        who = authenticate(self.principals, bearer_token(request.headers.get("Authorization")))
        if not isinstance(who, Unauthenticated):
            return who
        failure = error("unauthenticated", "a bearer token is required (Authorization: Bearer)")
        return _json(failure.status, failure.body, {"WWW-Authenticate": 'Bearer realm="openwop"'})


def _remote(runs: list[Any]) -> Iterable[RunSummary]:
    for r in runs:
        if isinstance(r, dict):
            try:
                yield RunSummary(
                    str(r["runId"]),
                    int(r["lastSequence"]),
                    str(r["status"]),
                    bool(r["isTerminal"]),
                    int(r["events"]),
                    int(r["updatedMs"]),
                )
            except (KeyError, TypeError, ValueError):
                continue


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status,
        body=orjson.dumps(body),
        content_type="application/json",
        headers={**_HEADERS, **(headers or {})},
    )


def register(
    index: Runs,
    settings: Settings,
    owners: Owners,
    gatherer: Gatherer,
    principals: Principals | None = None,
) -> dict[str, Callable[[web.Request], Awaitable[web.StreamResponse]]]:
    """The viewer's handlers by their route's name in the route table (app.core.http.routes: the
    paths, the methods and the bearer rule of ``/ui/api/runs`` are there; the dispatcher in
    app.shell.http.api serves them)."""
    pages = ViewerPages(
        index,
        auth=settings.http_auth,
        tokens=settings.http_tokens,
        owners=owners,
        gatherer=gatherer,
        worker_id=settings.worker_id,
        principals=principals,
    )
    return {
        "viewer_redirect": pages.redirect,
        "viewer_index": pages.page,
        "viewer_run": pages.page,
        "viewer_asset": pages.asset,
        "viewer_runs": pages.runs,
    }
