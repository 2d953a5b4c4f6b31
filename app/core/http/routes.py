"""Every HTTP route the worker serves, as data, and the one matcher over them (issue 20 item 2).

Role: ``ROUTES`` is the route table of the worker's web server: the OpenWOP v2 and v1 paths
(openwop-a2ui.md §9-§13; docs/http.md), the conformance seams, the viewer's pages and API
(docs/viewer.md), discovery, the OpenAPI document, ``/health`` and ``/metrics``. Each route says
its methods, its path template, the auth it needs and the right it will need (issue 18: read,
emit, approve, act, admin), how its body is read, whether the run's partition owner answers it,
when it is served, and what the OpenAPI document says of it (``app.core.http.openapi``). The shell's
one dispatcher (``app.shell.http.api.HttpApi.dispatch``) matches every request here
(``match``) and does method (405 with Allow), auth, forwarding and body reads in one place
before a handler.

Paths are matched on the RAW request path, before any percent-decoding: a runId travels in one
segment, projected or percent-encoded (``app.core.http.wire_ids``), and decoding first would turn
``%2F`` into a ``/`` (or ``%3A`` into the ``:`` of ``:fork``) that splits it in the wrong place.

May import: the standard library and ``app.core.http.wire_ids``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from app.core.http.wire_ids import unproject_run_id

__all__ = [
    "ROUTES",
    "Matched",
    "NotRouted",
    "Route",
    "Scope",
    "WrongMethod",
    "match",
    "served",
]

Auth = Literal["none", "bearer"]
# issue 18's rights: read (snapshots, the event log, poll, SSE, the viewer's API), emit
# (envelopes, fork, the seams, a run's creation and cancellation), approve (interrupt resolve),
# act (a user's action), admin (run deletion, dead-letter replay: no HTTP route yet).
Right = Literal["read", "emit", "approve", "act", "admin"]
# none: the body is not read; raw: its bytes, within the read timeout; json: its bytes and the
# JSON value after the Kafka path's intake (app.core.http.admission.read_json_body).
Body = Literal["none", "raw", "json"]
# always; seams: A2UI_STREAM_SEAMS=1; envelope_accept: the seams at floor 1
# (app.core.http.discovery.serves_envelope_accept).
When = Literal["always", "seams", "envelope_accept"]
# Whose tenant the right is checked in (issue 18; app.core.http.principals), before anything reads
# a run: ``run`` the path's runId (a foreign tenant answers as an unknown run); ``create`` the
# tenant of the run it creates (``app.core.http.snapshot.DEFAULT_TENANT``: POST /runs places
# its run there); ``body`` the runId the body names (the seams: checked once the body is read,
# before the run's owner is asked); ``list`` the rows are filtered to the tenants the caller
# may read; ``none`` no run is read (the right alone: the catch-alls under a run).
Scope = Literal["run", "create", "body", "list", "none"]
ANY = "*"

# How each path parameter is read from its raw text: ``run`` one runId segment (up to a ``/``
# or the ``:`` of a custom method) in either wire form; ``node`` the rest of the path as one
# id (``/interrupts/{nodeId}`` took every character after the prefix); ``segment`` one
# percent-encoded segment (as aiohttp decodes a ``{name}``); ``rest`` the rest, undecoded.
_PARAMS: Mapping[str, tuple[str, str]] = {
    "runId": ("run", r"[^/:]*"),
    "nodeId": ("node", r".+"),
    "name": ("segment", r"[^/]+"),
    "runPath": ("rest", r".+"),
    "rest": ("rest", r".+"),
}
_PLACEHOLDER = re.compile(r"\{([A-Za-z]+)\}")
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})|%")


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """One route. ``methods`` are the ones it takes (``GET`` takes ``HEAD`` too; ``*`` any);
    ``owner``: the run of the path's ``{runId}`` is answered by its partition's owner (issue 15
    item 2); ``documented``: listed in the OpenAPI document (the catch-alls that answer an
    unknown endpoint under a run with 404 are not operations); ``absent``: the 404 message
    while the route is not served."""

    name: str
    methods: tuple[str, ...]
    path: str
    summary: str
    responses: tuple[int, ...]
    auth: Auth = "bearer"
    right: Right | None = "read"
    body: Body = "none"
    owner: bool = False
    when: When = "always"
    scope: Scope = "none"
    tag: str = "runs"
    documented: bool = True
    absent: str = ""
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern", _compile(self.path))

    def takes(self, method: str) -> bool:
        """Whether the route answers ``method`` (HEAD wherever GET is served)."""
        return (
            ANY in self.methods
            or method in self.methods
            or (method == "HEAD" and "GET" in self.methods)
        )


def _compile(template: str) -> re.Pattern[str]:
    out, pos = [], 0
    for placeholder in _PLACEHOLDER.finditer(template):
        out.append(re.escape(template[pos : placeholder.start()]))
        name = placeholder.group(1)
        out.append(f"(?P<{name}>{_PARAMS[name][1]})")
        pos = placeholder.end()
    out.append(re.escape(template[pos:]))
    return re.compile("".join(out))


_READ = (200, 400, 401, 403, 404, 503)
_WRITE = (201, 400, 401, 403, 404, 409, 413, 415, 422, 503, 504)
_SEAM_OFF = "the conformance seams are off (A2UI_STREAM_SEAMS)"


def _run_routes(prefix: str, *, v1: bool) -> tuple[Route, ...]:
    """The run routes under ``prefix`` (``/runs`` or ``/v1/runs``): v1 serves the same ones but
    the poll (a v2 operation, §9). The reads, then the writes, then the catch-all."""
    tag = "runs-v1" if v1 else "runs"
    key = "v1_" if v1 else ""
    run = f"{prefix}/{{runId}}"
    # Last: any other path under the prefix is 404, after auth (an unknown endpoint of a
    # run is answered as the run routes are: no token, no answer), saying how to write it.
    no_endpoint = Route(
        name=f"{key}no_run_endpoint",
        methods=(ANY,),
        path=f"{prefix}/{{rest}}",
        summary="",
        responses=(401, 404),
        documented=False,
        tag=tag,
    )
    return (*_run_reads(run, key, tag, v1=v1), *_run_writes(run, key, tag), no_endpoint)


def _run_reads(run: str, key: str, tag: str, *, v1: bool) -> list[Route]:
    """A run's reads (``run``: its path): the snapshot, its events and, in v2, the poll."""
    routes = [
        Route(
            name=f"{key}get_run",
            methods=("GET",),
            path=run,
            summary="The run snapshot",
            responses=_READ,
            owner=True,
            scope="run",
            tag=tag,
        ),
        Route(
            name=f"{key}run_events",
            methods=("GET",),
            path=f"{run}/events",
            summary="The run's events: SSE (streamMode, Last-Event-ID"
            + (", a2uiDelta" if v1 else "")
            + ") or, with Accept: application/json, "
            "the event-log read",
            responses=_READ,
            owner=True,
            scope="run",
            tag=tag,
        ),
    ]
    if not v1:
        routes.append(
            Route(
                name="poll_events",
                methods=("GET",),
                path=f"{run}/events/poll",
                summary="Long poll (afterSequence, timeout)",
                responses=_READ,
                owner=True,
                scope="run",
                tag=tag,
            )
        )
    return routes


def _run_writes(run: str, key: str, tag: str) -> list[Route]:
    """A run's writes (``run``: its path): fork, an envelope, cancel, an interrupt, an action."""
    return [
        Route(name=f"{key}fork_run", methods=("POST",), path=f"{run}:fork",
              summary="Fork the run {mode, fromSeq?, runOptionsOverlay?}: a new run holding "
              "its events before fromSeq as recorded; nothing re-executes",
              responses=_WRITE, right="emit", body="json", owner=True, scope="run", tag=tag),
        Route(name=f"{key}post_envelope", methods=("POST",), path=f"{run}/envelopes",
              summary="Admit one AI envelope through the production path", responses=_WRITE,
              right="emit", body="raw", owner=True, scope="run", tag=tag),
        Route(name=f"{key}cancel_run", methods=("POST",), path=f"{run}/cancel",
              summary="Cancel the run", responses=_WRITE, right="emit", owner=True,
              scope="run", tag=tag),
        Route(name=f"{key}resolve_interrupt", methods=("POST",),
              path=f"{run}/interrupts/{{nodeId}}", summary="Resolve an interrupt {resumeValue}",
              responses=_WRITE, right="approve", body="json", owner=True, scope="run", tag=tag),
        Route(name=f"{key}submit_action", methods=("POST",), path=f"{run}/actions",
              summary="A user's action from a surface", responses=_WRITE, right="act",
              body="json", owner=True, scope="run", tag=tag),
    ]  # fmt: skip


ROUTES: tuple[Route, ...] = (
    Route(name="discover", methods=("GET",), path="/.well-known/openwop",
          summary="Discovery: v1, or v2 with OpenWOP-Version: 2", responses=(200,),
          auth="none", right=None, tag="discovery"),
    Route(name="openapi", methods=("GET",), path="/v1/openapi.json",
          summary="This document: the routes served at this configuration", responses=(200,),
          auth="none", right=None, tag="discovery"),
    Route(name="openapi_root", methods=("GET",), path="/openapi.json",
          summary="The same document where openwop-client's discovery_openapi reads it",
          responses=(200,), auth="none", right=None, tag="discovery"),
    Route(name="list_runs", methods=("GET",), path="/runs",
          summary="The run listing (RFC 0182; limit, cursor, workflowId, status): pages of at "
          "most 200 runs with tenant-bound runIds, advertised as v2 discovery's runList",
          responses=(200, 400, 401, 403, 503), scope="list"),
    Route(name="create_run", methods=("POST",), path="/runs",
          summary="Create a run {workflowId}: 201 {runId, status (never terminal), eventsUrl, "
          "statusUrl}", responses=_WRITE, right="emit", body="json", scope="create"),
    *_run_routes("/runs", v1=False),
    Route(name="v1_create_run", methods=("POST",), path="/v1/runs",
          summary="Create a run {workflowId} (v1, rest-endpoints.md)", responses=_WRITE,
          right="emit", body="json", scope="create", tag="runs-v1"),
    *_run_routes("/v1/runs", v1=True),
    Route(name="v1_emit_surface", methods=("POST",), path="/v1/host/sample/a2ui/emit-surface",
          summary="v1 seam {runId, surface, contentTrust?, nodeId?}", responses=_WRITE,
          right="emit", body="json", when="seams", scope="body", tag="seams", absent=_SEAM_OFF),
    Route(name="v1_accept_envelope", methods=("POST",), path="/v1/host/sample/envelope/accept",
          summary="v1 acceptor seam {envelope, hostSupportedEnvelopes?, boundInterruptKind?}",
          responses=(200, 400, 401, 403, 413, 415, 503), right="emit", body="json",
          when="envelope_accept", scope="body", tag="seams",
          absent="the v1 envelope accept seam is served with A2UI_STREAM_SEAMS=1 at floor 1"),
    Route(name="v2_emit_surface", methods=("POST",),
          path="/conformance/seams/sample/a2ui/emit-surface",
          summary="v2 seam {runId, envelope}", responses=_WRITE, right="emit", body="raw",
          when="seams", scope="body", tag="seams", absent=_SEAM_OFF),
    Route(name="viewer_redirect", methods=("GET",), path="/ui", summary="To the viewer",
          responses=(302,), auth="none", right=None, tag="viewer"),
    Route(name="viewer_index", methods=("GET",), path="/ui/",
          summary="The viewer: recent runs", responses=(200, 503), auth="none", right=None,
          tag="viewer"),
    Route(name="viewer_run", methods=("GET",), path="/ui/runs/{runPath}",
          summary="The viewer: one run's live surfaces", responses=(200, 503), auth="none",
          right=None, tag="viewer"),
    Route(name="viewer_asset", methods=("GET",), path="/ui/assets/{name}",
          summary="The viewer's built assets", responses=(200, 404), auth="none", right=None,
          tag="viewer"),
    Route(name="viewer_runs", methods=("GET",), path="/ui/api/runs",
          summary="Recent runs of the deployment, for the viewer", responses=(200, 401, 403),
          scope="list", tag="viewer"),
    Route(name="health", methods=("GET",), path="/health", summary="Liveness and topics",
          responses=(200,), auth="none", right=None, tag="operations"),
    Route(name="metrics", methods=("GET",), path="/metrics",
          summary="Prometheus metrics (text format 0.0.4)", responses=(200,), auth="none",
          right=None, tag="operations"),
)  # fmt: skip


def served(routes: Iterable[Route], *, seams: bool, envelope_accept: bool) -> tuple[Route, ...]:
    """The routes served at a configuration (the seams only with A2UI_STREAM_SEAMS=1, the v1
    acceptor seam only where ``app.core.http.discovery.serves_envelope_accept`` says)."""
    on = {"always": True, "seams": seams, "envelope_accept": envelope_accept}
    return tuple(r for r in routes if on[r.when])


@dataclass(frozen=True, slots=True)
class Matched:
    """The request's route, with the values of its path parameters."""

    route: Route
    params: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class WrongMethod:
    """405: the path is served, not with this method. ``route`` is the path's first route
    (its auth comes first), ``allow`` the methods its routes take (the Allow header)."""

    route: Route
    allow: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NotRouted:
    """404: no route serves the path. ``absent`` is the message of a known route that is not
    served at this configuration (a seam with the seams off), else empty."""

    absent: str = ""


def _percent_decoded(raw: str) -> str | None:
    """The text a percent-encoded segment spells, or None (a lone ``%``, not UTF-8)."""
    out, pos = bytearray(), 0
    try:
        for escape in _PERCENT.finditer(raw):
            if escape.group(1) is None:
                return None
            out += raw[pos : escape.start()].encode("utf-8")
            out.append(int(escape.group(1), 16))
            pos = escape.end()
        out += raw[pos:].encode("utf-8")
        return out.decode("utf-8")
    except UnicodeError:
        return None


def _params(route: Route, raw_path: str) -> dict[str, str] | None:
    """The decoded parameters of ``raw_path`` under ``route``, or None: it does not match, or a
    parameter does not decode (a runId that is not a usable one falls to the catch-all)."""
    found = route.pattern.fullmatch(raw_path)
    if found is None:
        return None
    params: dict[str, str] = {}
    for name, raw in found.groupdict().items():
        kind = _PARAMS[name][0]
        value = (
            unproject_run_id(raw)
            if kind in ("run", "node")
            else _percent_decoded(raw)
            if kind == "segment"
            else raw
        )
        if value is None:
            return None
        params[name] = value
    return params


def match(
    routes: Iterable[Route], method: str, raw_path: str, *, known: Iterable[Route] = ()
) -> Matched | WrongMethod | NotRouted:
    """The route ``routes`` (in order) has for ``method`` on the RAW ``raw_path`` (a query
    string is dropped). The first template that matches the path is its resource: the route of
    that template that takes the method, or 405 with the methods its routes take. ``known``: the
    whole table, to say why a route that is not served is absent."""
    path = raw_path.partition("?")[0].partition("#")[0]
    routes = tuple(routes)
    for route in routes:
        params = _params(route, path)
        if params is None:
            continue
        same = [r for r in routes if r.path == route.path]
        for candidate in same:
            if candidate.takes(method):
                return Matched(candidate, params)
        return WrongMethod(route, tuple(m for r in same for m in r.methods))
    served_names = {r.name for r in routes}
    for route in known:
        if route.name not in served_names and _params(route, path) is not None:
            return NotRouted(route.absent)
    return NotRouted()
