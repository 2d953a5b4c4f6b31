"""OpenWOP over HTTP on the worker's web server (issue 6; docs/http.md).

Shell module: the one dispatcher, the caller's authorization (bearer tokens, tenants and rights:
``app.core.principals``, issue 18), the handlers and I/O. The routes are
data, ``app.core.routes.ROUTES`` (every route the worker serves: these, the viewer's, /health,
/metrics; docs/http.md lists them with their auth and right); ``HttpApi.dispatch`` matches each
request there and does the preamble once: the route (404), the token (401), the method (405
with Allow), the run's owner, the body. ``GET /v1/openapi.json`` is the table as OpenAPI 3.1
(``app.core.openapi``). Decisions come from the core (``routes``, ``wire_ids``,
``stream_modes``, ``discovery``, ``http_admission``, ``http_errors``); runs are read from
``RunIndex`` (the log, tailed); admissions go through ``AdmissionGateway`` (the admission topic
and the validator, never a shortcut).

Handlers (openwop-a2ui.md §9, §10, §12, §13; a handler takes the request and the ``Call``
the dispatcher read):
  GET  /.well-known/openwop                         discovery (v1, or v2 with OpenWOP-Version: 2)
  GET  /v1/openapi.json                             the OpenAPI document of the served routes
  GET  /v1/runs/{runId}/events                      SSE (?streamMode, Last-Event-ID, ?a2uiDelta=1)
                                                    or the event-log read (Accept: application/json)
  GET  /runs/{runId}/events                         v2 SSE (same rules)
  GET  /runs/{runId}/events/poll                    v2 poll (?afterSequence, ?timeout)
  GET  /runs/{runId}, /v1/runs/{runId}              run status
  POST /runs/{runId}:fork, /v1/runs/{runId}:fork    fork {mode, fromSeq?, runOptionsOverlay?}
  POST /runs/{runId}/envelopes                      admit one AI envelope
  GET  /runs                                        the run listing (RFC 0182; ?limit, ?cursor,
                                                    ?workflowId, ?status), gathered from every owner
  POST /runs, /v1/runs {workflowId}                 create a run (host command run.create)
  POST /runs/{runId}/cancel                         cancel a run
  POST /runs/{runId}/interrupts/{nodeId}            resolve an interrupt {resumeValue} (§7, §9)
  POST /runs/{runId}/actions                        a user's action from a surface (issue 7)
  POST /v1/host/sample/a2ui/emit-surface            v1 seam (A2UI_STREAM_SEAMS=1 only)
  POST /v1/host/sample/envelope/accept              v1 acceptor seam (A2UI_STREAM_SEAMS=1, floor 1)
  POST /conformance/seams/sample/a2ui/emit-surface  v2 seam (A2UI_STREAM_SEAMS=1 only)
(the v1 run paths take the same endpoints as the v2 ones but the poll)

Every run route is answered by the worker that owns the run's partition (issue 15 item 2):
``_owner_route`` asks ``app.core.ownership.route`` whether this worker serves it, forwards it
to the owner (``app.shell.http.forward``), or answers 503 with Retry-After while the partition
has no ready owner (a rebalance). Admissions and host commands are forwarded too: the owner
publishes, waits for the outcome on its own tail and answers only once its store holds the
event, so every later read (served by that owner) sees it.

Before any route runs, ``request_guard`` (the web app's one middleware) applies
``app.core.http_guard`` to every request: the Host rule of the laptop mode, the Origin rule
and the JSON content type of every mutating request (issue 14 item 4). Request bodies are read
with a deadline and go through the Kafka path's intake (``app.core.http_admission``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import faust
import orjson
from aiohttp import web
from faust.web.drivers.aiohttp import Web as AiohttpWeb

from app.core.actions import check_action
from app.core.discovery import HEADERS as DISCOVERY_HEADERS
from app.core.discovery import (
    DiscoveryConfig,
    document_for,
    serves_delta_transport,
)
from app.core.envelope_accept import SEAM_RUN, Admit, decide_accept, outcome_of
from app.core.http_admission import (
    AdmissionRequest,
    ForkPoint,
    body_too_large,
    command_request,
    envelope_request,
    fork_request,
    read_json_body,
    refusal_response,
    v1_seam_request,
    v2_seam_request,
    violation_response,
)
from app.core.http_errors import HttpError, error
from app.core.http_guard import RequestHead, check_request
from app.core.http_snapshot import DEFAULT_TENANT, SNAPSHOT_EVENT_TYPES, snapshot
from app.core.keys import partition_for_run
from app.core.openapi import document
from app.core.ownership import FORWARDED_HEADER, Forward, Local, route
from app.core.principals import (
    LAPTOP,
    Allowed,
    Principal,
    Principals,
    Right,
    Unauthenticated,
    Unknown,
    authenticate,
    authorize,
    bearer_token,
    may,
    tenant_of,
)
from app.core.refusal import Violation
from app.core.routes import ROUTES, Matched, NotRouted, Route, WrongMethod, match
from app.core.run_lifecycle import created_status, lineage_of
from app.core.run_list import ListQuery, Row, listable, merge, parse_list_query, rows_after
from app.core.stream_modes import (
    parse_last_event_id,
    parse_poll_query,
    parse_stream_mode,
)
from app.core.surfaces import V1_SURFACE_ID, SurfaceKey, replay
from app.core.wire_ids import (
    no_endpoint_message,
    project_run_id,
    split_run_path,
)
from app.shell.clock import now_rfc3339
from app.shell.http.forward import Forwarder
from app.shell.http.gateway import AdmissionGateway, Published
from app.shell.http.streams import RunStreams
from app.shell.worker.ownership import Ownership
from app.shell.worker.run_index import PartitionUnsure, RunIndex, RunLog

__all__ = ["HttpApi", "request_guard"]

log = logging.getLogger("a2ui_stream.http")

Middleware = Callable[
    [web.Request, Callable[[web.Request], Awaitable[web.StreamResponse]]],
    Awaitable[web.StreamResponse],
]


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, body=orjson.dumps(body), content_type="application/json", headers=headers
    )


def _error(failure: HttpError, headers: dict[str, str] | None = None) -> web.Response:
    return _json(failure.status, failure.body, headers)


def _wrong_method(allowed: tuple[str, ...]) -> web.Response:
    """405 with the methods the path takes (RFC 9110 §15.5.6: Allow lists them)."""
    allow = ", ".join(sorted(set(allowed)))
    return _json(
        405, {"error": "validation_error", "message": f"use {allow} here"}, {"Allow": allow}
    )


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


def request_guard(
    *, loopback_only: bool, max_record_bytes: int, routes: tuple[Route, ...]
) -> Middleware:
    """The web app's one middleware: every request meets ``app.core.http_guard`` before the
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
            return _error(refused)
        try:
            return await handler(request)
        except web.HTTPRequestEntityTooLarge:
            return _error(body_too_large(request.content_length, max_bytes=max_record_bytes))
        except web.HTTPNotFound:  # the dispatcher's catch-all takes every path: a safety net
            return _error(error("not_found", f"no endpoint {request.path[:200]}"))
        except web.HTTPMethodNotAllowed as exc:  # and every method: a safety net too
            return _wrong_method(tuple(exc.allowed_methods))

    return guard


class HttpApi:
    def __init__(
        self,
        *,
        index: RunIndex,
        ownership: Ownership,
        forwarder: Forwarder,
        gateway: AdmissionGateway,
        streams: RunStreams,
        discovery: DiscoveryConfig,
        principals: Principals,
        delta_transport: bool,
        wait_seconds: float,
        max_record_bytes: int,
        read_timeout: float,
        routes: tuple[Route, ...],
    ) -> None:
        self.index = index
        self.ownership = ownership
        self.forwarder = forwarder
        self.gateway = gateway
        self.streams = streams
        self.discovery = discovery
        # read once at start (app.shell.http.principals_file.principals_for): who may do what where
        self.principals = principals
        # served only where discovery advertises it (the one predicate of app.core.discovery)
        self.delta_transport = delta_transport and serves_delta_transport(discovery)
        self.wait_seconds = wait_seconds
        self.max_record_bytes = max_record_bytes
        self.read_timeout = read_timeout
        self.routes = routes  # served at this configuration (app.core.routes.served)
        self.openapi_document = document(routes, version=discovery.version)
        self.handlers: dict[str, Handler] = self._handlers()

    # -- registration ---------------------------------------------------------------------------

    def _handlers(self) -> dict[str, Handler]:
        """Each route's handler by its name in the table (app.core.routes.ROUTES)."""
        handlers: dict[str, Handler] = {
            "discover": self.discover,
            "openapi": self.openapi,
            "openapi_root": self.openapi,
            "list_runs": self.list_runs,
            "create_run": self.create_run,
            "v1_create_run": partial(self.create_run, prefix="/v1/runs/"),
            "poll_events": self._poll,
            "v1_emit_surface": self.v1_seam,
            "v1_accept_envelope": self.v1_accept_seam,
            "v2_emit_surface": self.v2_seam,
        }
        for key, prefix, v1 in (("", "/runs/", False), ("v1_", "/v1/runs/", True)):
            handlers[f"{key}get_run"] = partial(self._status, v1=v1)
            handlers[f"{key}run_events"] = partial(self._events, v1=v1)
            handlers[f"{key}fork_run"] = partial(self._fork, prefix=prefix)
            handlers[f"{key}post_envelope"] = self._envelopes
            handlers[f"{key}cancel_run"] = self._cancel
            handlers[f"{key}resolve_interrupt"] = self._resolve
            handlers[f"{key}submit_action"] = self._actions
            handlers[f"{key}no_run_endpoint"] = partial(self._no_run_endpoint, prefix=prefix)
        return handlers

    def register(self, app: faust.App, others: Mapping[str, PlainHandler]) -> None:
        """Serve every route of the table through ``dispatch``: one aiohttp route that takes
        every path and method (aiohttp matches a decoded path; a runId needs the raw one).
        ``others``: the handlers of the routes served outside this module (the viewer's,
        /health, /metrics), which read nothing but the request."""
        for name, plain in others.items():
            self.handlers[name] = _taking_request(plain)
        missing = sorted({r.name for r in self.routes} - set(self.handlers))
        if missing:  # a route in the table that nothing answers: a bug, found at start
            raise RuntimeError(f"routes without a handler: {', '.join(missing)}")
        server = app.web
        if not isinstance(server, AiohttpWeb):  # the worker's web server is aiohttp's
            raise TypeError(f"an aiohttp web server is needed, not {type(server).__name__}")
        server.web_app.router.add_route("*", "/{tail:.*}", self.dispatch)

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        """The one preamble of every route, in this order: the route (404 for a path none
        serves, whatever the method), the caller (issue 18: 401 without a known token; for a
        run route the right in the run's tenant, a foreign run answered as an unknown one and
        a missing right 403), the method (405 with Allow), the run's owner (forwarded, or 503
        while it has none: issue 15 item 2), the body (read within the read timeout; a JSON
        route's after intake), then the route's handler. Nothing reads the run before the
        caller is authorized for it: not the owner map, not a cursor, not the body. A request
        another worker forwarded carries the caller's Authorization and is authorized here
        again."""
        found = match(self.routes, request.method, request.rel_url.raw_path, known=ROUTES)
        if isinstance(found, NotRouted):
            message = found.absent or f"no endpoint {request.path[:200]}"
            return _error(error("not_found", message))
        route = found.route
        principal = LAPTOP  # an open route (no token) reads no run and lists nothing
        if route.auth == "bearer":
            caller = self._caller(request, found)
            if isinstance(caller, web.Response):
                return caller
            principal = caller
        if isinstance(found, WrongMethod):
            return _wrong_method(found.allow)
        # the viewer's handlers read their parameters from match_info, as aiohttp fills it
        request.match_info.update(found.params)
        call = Call(route, found.params, principal)
        if route.owner:
            elsewhere = await self._owner_route(request, found.params["runId"])
            if elsewhere is not None:
                return elsewhere
        if route.body != "none":
            raw = await self._raw_body(request)
            if isinstance(raw, web.Response):
                return raw
            body = None
            if route.body == "json":
                body = read_json_body(raw, max_bytes=self.max_record_bytes)
                if isinstance(body, HttpError):
                    return _error(body)
            call = Call(route, found.params, principal, raw, body)
        return await self.handlers[route.name](request, call)

    # -- shared checks --------------------------------------------------------------------------

    def _caller(
        self, request: web.Request, found: Matched | WrongMethod
    ) -> Principal | web.Response:
        """Who the caller is and whether it may use this route (issue 18; app.core.principals),
        by the route's scope (app.core.routes): a run route is authorized for its right in the
        runId's tenant before anything else reads the run; a route that creates a run, in the
        tenant it creates it in; any other (the listings, the seams, whose run is in the body,
        a catch-all) needs the right in some tenant here, and checks the tenant later (a
        listing shows only the tenants the caller may read; a seam authorizes its body's runId
        before its owner is asked). A wrong method needs only a known token: its 405 says
        nothing about any run. Tokens are compared in constant time and never logged."""
        presented = bearer_token(request.headers.get("Authorization"))
        route, right = found.route, found.route.right
        run_id = found.params.get("runId") if isinstance(found, Matched) else None
        if right is not None and route.scope == "run" and run_id is not None:
            return self._authorized(presented, right, run_id)
        who = authenticate(self.principals, presented)
        if isinstance(who, Unauthenticated):
            return _unauthenticated(who)
        if right is None or isinstance(found, WrongMethod):
            return who
        if right not in who.rights:
            return _forbidden(right, "")
        if route.scope == "create" and not may(who, right, DEFAULT_TENANT):
            return _forbidden(right, f" (a run is created in the tenant {DEFAULT_TENANT!r})")
        return who

    def _authorized(
        self, presented: str | None, right: Right, run_id: str
    ) -> Principal | web.Response:
        """``authorize`` for ``right`` on ``run_id``: the principal, or the answer. A run
        outside the caller's tenants answers exactly as a run never recorded (``_no_run``)."""
        decided = authorize(self.principals, presented, right, run_id, DEFAULT_TENANT)
        if isinstance(decided, Allowed):
            return decided.principal
        if isinstance(decided, Unauthenticated):
            return _unauthenticated(decided)
        if isinstance(decided, Unknown):
            return _no_run(run_id)
        return _forbidden(decided.right, "")

    async def _raw_body(self, request: web.Request) -> bytes | web.Response:
        """The request body, read within the read timeout (A2UI_STREAM_HTTP_READ_TIMEOUT_SECONDS);
        a body beyond the web server's ``client_max_size`` is refused by ``request_guard``."""
        try:
            return await asyncio.wait_for(request.read(), self.read_timeout)
        except TimeoutError:
            response = _error(
                error(
                    "a2ui-stream.request_timeout",
                    f"the request body did not arrive within {self.read_timeout:g}s "
                    "(A2UI_STREAM_HTTP_READ_TIMEOUT_SECONDS): send the whole body at once",
                )
            )
            response.force_close()  # the rest of the body, if it ever comes, is not read
            return response

    async def _owner_route(
        self, request: web.Request, run_id: str, body: bytes | None = None
    ) -> web.StreamResponse | None:
        """None: this worker serves ``run_id`` (it owns the run's partition and has read it).
        Otherwise the owner's answer to the forwarded request, or 503 with Retry-After when no
        worker can answer within A2UI_STREAM_HTTP_WAIT_SECONDS (a rebalance: the partition has
        no owner yet, or its owner is still reading the log). A POST's body is read here only
        when it is forwarded (``body``, when the handler already read it)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_seconds
        forwarded = FORWARDED_HEADER in request.headers
        while True:
            reason = "the worker has not read the log's partition count yet"
            if self.index.partitions:
                decision = route(
                    partition_for_run(run_id, self.index.partitions),
                    owned=self.ownership.owned,
                    ready=self.index.ready_partitions,
                    owners=self.ownership.owners,
                    instance=self.ownership.instance,
                    forwarded=forwarded,
                )
                if isinstance(decision, Local):
                    return None
                if isinstance(decision, Forward):
                    return await self._forward(request, decision, body)
                reason = decision.reason
            remaining = deadline - loop.time()
            if remaining <= 0:
                return self._unavailable(reason)
            await self.ownership.changed(min(remaining, 0.05))

    async def _forward(
        self, request: web.Request, owner: Forward, body: bytes | None
    ) -> web.StreamResponse:
        if body is None and request.method == "POST":
            raw = await self._raw_body(request)
            if isinstance(raw, web.Response):
                return raw
            body = raw
        return await self.forwarder.forward(request, owner.url, body, owner.worker_id)

    def _unavailable(self, reason: str) -> web.Response:
        return _error(
            error("a2ui-stream.unavailable", f"{reason}; retry shortly"),
            {"Retry-After": "1"},
        )

    def _fresh_run_id(self, prefix: str) -> str | None:
        """A new runId ``<prefix><32 hex>`` on a partition this worker owns and has read (a
        created run or a fork child is recorded where its creator waits for it), or None when
        it owns none. Each try lands on a uniformly random partition."""
        mine = self.index.ready_partitions & self.ownership.owned
        if not mine or not self.index.partitions:
            return None
        while True:
            candidate = f"{prefix}{uuid.uuid4().hex}"
            if partition_for_run(candidate, self.index.partitions) in mine:
                return candidate

    async def _lookup(self, run_id: str) -> RunLog | web.Response:
        """The run as this worker's log tail holds it, read up to the log's end before
        answering "not found" (another worker may have just recorded it). A 404 only when
        this worker read the run's partition to its end and still serves it: a partition that
        moved away or back into its restore while the request waited (a rebalance), or a tail
        that did not catch up in time, is a 503 with Retry-After, never a "not found" for a
        run the log may well hold."""
        try:
            run = await self.index.lookup(run_id, self.wait_seconds)
        except PartitionUnsure as unsure:
            return self._unavailable(str(unsure))
        if run is None:
            return _no_run(run_id)
        return run

    # -- discovery ------------------------------------------------------------------------------

    async def discover(self, request: web.Request, call: Call) -> web.StreamResponse:
        found = document_for(request.headers.get("OpenWOP-Version"), self.discovery)
        return _json(200, found, dict(DISCOVERY_HEADERS))

    async def openapi(self, request: web.Request, call: Call) -> web.StreamResponse:
        """``GET /v1/openapi.json`` (rest-endpoints.md; no auth): the served routes."""
        return _json(200, self.openapi_document)

    # -- /runs/... and /v1/runs/... -------------------------------------------------------------

    async def _no_run_endpoint(
        self, request: web.Request, call: Call, *, prefix: str
    ) -> web.StreamResponse:
        """Any other path under ``/runs/`` or ``/v1/runs/``: 404, saying how to write it."""
        split = split_run_path(request.rel_url.raw_path, prefix)
        if split is None:
            return _error(error("not_found", "no such run path (is the runId well formed?)"))
        run_id, rest = split
        return _error(error("not_found", no_endpoint_message(prefix, run_id, rest)))

    async def _status(self, request: web.Request, call: Call, *, v1: bool) -> web.StreamResponse:
        run_id = call.params["runId"]
        run = await self._lookup(run_id)
        if isinstance(run, web.Response):
            return run
        return _json(200, self._run_doc(run, major=1 if v1 else 2))

    def _run_doc(self, run: RunLog, *, major: int) -> dict[str, Any]:
        # only the host events the snapshot reads are decoded (never an envelope's payload)
        events = (e.event for e in run.events if e.type in SNAPSHOT_EVENT_TYPES)
        return snapshot(run.run_id, run.status, run.last_sequence, events, major=major)

    async def _events(self, request: web.Request, call: Call, *, v1: bool) -> web.StreamResponse:
        run_id = call.params["runId"]
        # §9: the query gates run before content negotiation, Last-Event-ID after authorization.
        modes = parse_stream_mode(request.query.get("streamMode"))
        if isinstance(modes, HttpError):
            return _error(modes)
        after = parse_last_event_id(request.headers.get("Last-Event-ID"))
        if isinstance(after, HttpError):
            return _error(after)
        delta = v1 and self.delta_transport and request.query.get("a2uiDelta") in ("1", "true")
        run = await self._lookup(run_id)
        if isinstance(run, web.Response):
            return run
        accept = request.headers.get("Accept", "")
        if "application/json" in accept and "text/event-stream" not in accept:
            events = self.streams.event_docs(run, after=-1 if after is None else after, delta=delta)
            return _json(
                200,
                {
                    "runId": run_id,
                    "events": events,
                    "lastSequence": run.last_sequence,
                    "status": run.status,
                    "isTerminal": run.terminal,
                },
            )
        return await self.streams.sse(request, run, modes=modes, after=after, delta=delta)

    async def _poll(self, request: web.Request, call: Call) -> web.StreamResponse:
        run_id = call.params["runId"]
        query = parse_poll_query(request.query.get("afterSequence"), request.query.get("timeout"))
        if isinstance(query, HttpError):
            return _error(query)
        after, timeout = query
        run = await self._lookup(run_id)
        if isinstance(run, web.Response):
            return run
        return _json(200, await self.streams.poll(run, after, timeout))

    # -- admission ------------------------------------------------------------------------------

    async def _admit(self, request: AdmissionRequest) -> Published | web.Response:
        try:
            published = await self.gateway.admit(
                request.run_id, request.record, self.wait_seconds, sealed=request.command
            )
        except Exception as exc:  # the broker refused the publish: say so, not 500 blindly
            log.warning("http: publish failed (%s)", type(exc).__name__)
            return _error(
                error(
                    "a2ui-stream.unavailable",
                    f"the admission topic did not take the record ({type(exc).__name__})",
                ),
                {"Retry-After": "1"},
            )
        if published.outcome is None:
            return self._no_outcome(request)
        return published

    def _no_outcome(self, request: AdmissionRequest) -> web.Response:
        """No log record and no dead letter for our record in time. If the envelope's
        correlationId is already recorded with the same type, the validator deduplicated it
        (E2, §2): the original outcome stands."""
        envelope = request.envelope
        run = self.index.get(request.run_id)
        if envelope is not None and run is not None:
            for logged in run.events:
                if logged.event.get("causationId") == envelope.get(
                    "correlationId"
                ) and logged.type == envelope.get("type"):
                    return _json(201, {"sequence": logged.sequence, "deduplicated": True})
        return _error(
            error(
                "a2ui-stream.outcome_timeout",
                f"no outcome from the validator within {self.wait_seconds:g}s: is a worker with "
                "the validator role running? The record stays on the admission topic and will "
                "still be decided",
            )
        )

    async def _envelopes(self, request: web.Request, call: Call) -> web.StreamResponse:
        built = envelope_request(
            call.params["runId"], call.raw, max_record_bytes=self.max_record_bytes
        )
        if isinstance(built, HttpError):
            return _error(built)
        return self._answer(await self._admit(built), style="envelopes")

    def _answer(self, result: Published | web.Response, *, style: str) -> web.Response:
        if isinstance(result, web.Response):
            return result
        outcome = result.outcome
        assert outcome is not None
        if outcome.letter is not None:
            return _error(refusal_response(outcome.letter))
        event = outcome.events[0].event
        if style == "v2-seam":  # §13: 201 {sequence}, closed
            return _json(201, {"sequence": event["sequence"]})
        if style == "v1-seam":  # §13: the recorded envelope id is the surfaceRef
            payload = event.get("payload", {}).get("envelope", {}).get("payload", {})
            return _json(
                201,
                {
                    "eventId": event["eventId"],
                    "sequence": event["sequence"],
                    "surfaceRef": event["eventId"],
                    "catalogVersion": payload.get("catalogVersion")
                    if isinstance(payload, dict)
                    else None,
                },
            )
        return _json(
            201,
            {"runId": event["runId"], "sequence": event["sequence"], "eventId": event["eventId"]},
        )

    async def v2_seam(self, request: web.Request, call: Call) -> web.StreamResponse:
        return await self._seam(request, call, v1=False)

    async def v1_seam(self, request: web.Request, call: Call) -> web.StreamResponse:
        return await self._seam(request, call, v1=True)

    async def v1_accept_seam(self, request: web.Request, call: Call) -> web.StreamResponse:
        """The v1 acceptor seam (app.core.envelope_accept): 200 with an EnvelopeOutcome.
        ``gated`` and ``blocked`` are decided from the request; every other envelope is
        admitted through the production path on the seam's run (forwarded to its owner). Served
        only where ``serves_envelope_accept`` says (the route table's ``envelope_accept``)."""
        denied = self._seam_denied(request, SEAM_RUN)
        if denied is not None:
            return denied
        decided = decide_accept(call.body)
        if isinstance(decided, HttpError):
            return _error(decided)
        if not isinstance(decided, Admit):
            return _json(200, decided)
        elsewhere = await self._owner_route(request, SEAM_RUN, call.raw)
        if elsewhere is not None:
            return elsewhere
        built = envelope_request(
            SEAM_RUN, orjson.dumps(decided.envelope), max_record_bytes=self.max_record_bytes
        )
        if isinstance(built, HttpError):
            return _json(200, outcome_of(built.status, built.body, decided.envelope))
        answer = self._answer(await self._admit(built), style="envelope")
        if answer.status in (503, 504):  # no answer from the path: not an outcome, retry
            return answer
        sent = orjson.loads(answer.body) if isinstance(answer.body, bytes) else {}
        return _json(200, outcome_of(answer.status, sent, decided.envelope))

    async def _seam(self, request: web.Request, call: Call, *, v1: bool) -> web.StreamResponse:
        """The emit seams (§13; served only with the seams on: a 404 means "seam not wired" to
        the suite). The v1 record is assembled by the host from the body's JSON value; the v2
        body is an admission record already, published as sent."""
        built: AdmissionRequest | HttpError
        raw = call.raw
        if v1:
            nonce = uuid.uuid4().hex
            built = v1_seam_request(
                call.body,
                envelope_id=f"env-{nonce}",
                correlation_id=f"corr-{nonce}",
                now=now_rfc3339(),
                max_record_bytes=self.max_record_bytes,
            )
        else:
            built = v2_seam_request(raw, max_record_bytes=self.max_record_bytes)
        if isinstance(built, HttpError):
            return _error(built)
        denied = self._seam_denied(request, built.run_id)
        if denied is not None:
            return denied
        elsewhere = await self._owner_route(request, built.run_id, raw)
        if elsewhere is not None:
            return elsewhere
        return self._answer(await self._admit(built), style="v1-seam" if v1 else "v2-seam")

    def _seam_denied(self, request: web.Request, run_id: str) -> web.Response | None:
        """A seam's run is named by its body (or is the acceptor's own): authorized for
        ``emit`` in its tenant as a run route's is, before its owner is asked (issue 18)."""
        presented = bearer_token(request.headers.get("Authorization"))
        decided = self._authorized(presented, "emit", run_id)
        return decided if isinstance(decided, web.Response) else None

    # -- fork -------------------------------------------------------------------------------------

    async def _fork(self, request: web.Request, call: Call, *, prefix: str) -> web.StreamResponse:
        run_id, body = call.params["runId"], call.body
        source = await self._lookup(run_id)
        if isinstance(source, web.Response):
            return source
        markers = [e.event["payload"] for e in source.events if e.type == "run.forked"]
        point = ForkPoint(
            source.last_sequence,
            [(e.partition, e.offset) for e in source.events],
            lineage_of(markers[-1]) if markers else (),
        )
        tenant, slash, _ = run_id.partition("/")
        # the child is recorded on a partition this worker owns, where this handler waits for it
        child = self._fresh_run_id(f"{tenant}/" if slash else "fork-")
        if child is None:
            return self._unavailable("this worker no longer owns a partition")
        built = fork_request(run_id, child, body, point, max_record_bytes=self.max_record_bytes)
        if isinstance(built, HttpError):
            return _error(built)
        record, fields = built
        result = await self._admit(record)
        if isinstance(result, web.Response):
            return result
        outcome = result.outcome
        assert outcome is not None
        if outcome.letter is not None:
            return _error(refusal_response(outcome.letter))
        forked = await self._wait_complete(child, int(fields["fromSeq"]))
        return _json(
            201,
            {
                **fields,
                "status": forked.status if forked is not None else "running",
                "eventsUrl": f"{prefix}{project_run_id(child)}/events",
            },
        )

    async def _wait_complete(self, run_id: str, sequence: int) -> RunLog | None:
        """A fork's events are one transaction; wait until this worker has read all of them."""
        deadline = asyncio.get_running_loop().time() + self.wait_seconds
        while True:
            run = self.index.get(run_id)
            if run is not None and run.last_sequence >= sequence:
                return run
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return run
            if run is None:
                await asyncio.sleep(0.01)
                continue
            try:
                await asyncio.wait_for(run.changed.wait(), remaining)
            except TimeoutError:
                return run

    # -- run lifecycle, interrupts and actions (issue 7) -------------------------------------------

    async def _command(
        self, run_id: str, command: dict[str, Any]
    ) -> tuple[Published, RunLog] | web.Response:
        """Publish a host command for ``run_id`` and wait until this worker has read its
        events (or its dead letter)."""
        built = command_request(run_id, command, max_record_bytes=self.max_record_bytes)
        if isinstance(built, HttpError):
            return _error(built)
        result = await self._admit(built)
        if isinstance(result, web.Response):
            return result
        outcome = result.outcome
        assert outcome is not None
        if outcome.letter is not None:
            return _error(refusal_response(outcome.letter))
        last = max(e.sequence for e in outcome.events)
        run = await self._wait_complete(run_id, last)
        if run is None:
            return _error(error("internal_error", "the recorded command is not readable yet"))
        return result, run

    # -- GET /runs: the listing, gathered from every partition's owner ------------------------

    async def list_runs(self, request: web.Request, call: Call) -> web.StreamResponse:
        """One page of the deployment's runs (app.core.run_list: newest first, keyset cursor)
        that the caller may read (issue 18: the ``read`` right, the rows of its tenants only;
        the dispatcher checked the right). Each owner lists the partitions it owns and has
        read; this worker asks every other owner once, with the caller's Authorization (a forwarded
        listing answers its own rows only), and answers only when the answers cover every
        partition: while one has no ready owner or its owner does not answer (a rebalance),
        503 with Retry-After after A2UI_STREAM_HTTP_WAIT_SECONDS, never a partial page."""
        q = request.query
        query = parse_list_query(
            q.get("limit"), q.get("cursor"), q.get("workflowId"), q.get("status")
        )
        if isinstance(query, HttpError):
            return _error(query)
        if FORWARDED_HEADER in request.headers:
            served = self.ownership.owned & self.index.ready_partitions
            rows, more = self._local_page(query, served, call.principal)
            return _json(200, _owner_page(rows, more, served))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_seconds
        while True:
            gathered = await self._gather_pages(request, query, call.principal)
            if gathered is not None:
                return _json(200, merge(gathered, query))
            remaining = deadline - loop.time()
            if remaining <= 0:
                return self._unavailable(
                    "the run listing could not read every partition (a partition has no ready "
                    "owner, or its owner did not answer)"
                )
            await self.ownership.changed(min(remaining, 0.05))

    async def _gather_pages(
        self, request: web.Request, query: ListQuery, principal: Principal
    ) -> list[tuple[list[Row], bool]] | None:
        """This worker's page and every other owner's, or None when together they do not
        cover every partition of the log. Each owner is asked with the caller's
        Authorization and lists only the tenants that caller may read (issue 18)."""
        served = self.ownership.owned & self.index.ready_partitions
        pages = [self._local_page(query, served, principal)]
        covered = set(served)
        headers = self.forwarder.headers_of(request)
        origins = sorted(set(self.ownership.owner_urls().values()))
        answers = await asyncio.gather(
            *(self.forwarder.get_json(o, request.rel_url.raw_path_qs, headers) for o in origins)
        )
        for answer in answers:
            page = _read_owner_page(answer)
            if page is not None:
                pages.append((page[0], page[1]))
                covered |= page[2]
        if not self.index.partitions or not covered >= set(range(self.index.partitions)):
            return None
        return pages

    def _local_page(
        self, query: ListQuery, served: set[int], principal: Principal
    ) -> tuple[list[Row], bool]:
        """The first ``query.limit`` rows of the partitions in ``served`` after the cursor
        that ``principal`` may read (issue 18: a run of another tenant is not listed, as if it
        did not exist) and whose runId is v2 tenant-bound (``listable``), and whether more
        follow. Filters on the tenant and the stored
        summary's status first (no run is loaded for them), then on the snapshot (workflowId
        is in the run's first events)."""
        keys = {
            (s.updated_ms, s.run_id)
            for s in self.index.summaries()
            if s.partition in served
            and listable(s.run_id)
            and (query.status is None or s.status == query.status)
            and may(principal, "read", tenant_of(s.run_id, DEFAULT_TENANT))
        }
        rows: list[Row] = []
        for updated, run_id in rows_after(keys, query):
            run = self.index.get(run_id)
            if run is None:
                continue
            doc = self._run_doc(run, major=2)
            if query.workflow_id is not None and doc["workflowId"] != query.workflow_id:
                continue
            if query.status is not None and doc["status"] != query.status:
                continue
            if len(rows) == query.limit:
                return rows, True
            rows.append(Row(updated, run_id, doc))
        return rows, False

    async def create_run(
        self, request: web.Request, call: Call, *, prefix: str = "/runs/"
    ) -> web.StreamResponse:
        """``POST /runs`` (v2 createRun) and ``POST /v1/runs`` (rest-endpoints.md): one run
        create; the answer's URLs are under the major it was asked on."""
        body = call.body
        if not isinstance(body, dict) or not isinstance(body.get("workflowId"), str):
            return _error(error("validation_error", "the body is {workflowId}"))
        workflow = body["workflowId"]
        if workflow not in self.discovery.fixtures and workflow.startswith("conformance-"):
            return _error(error("not_found", f"no fixture workflow {workflow!r} on this host"))
        run_id = await self._created_run_id(request, call.raw)
        if not isinstance(run_id, str):
            return run_id
        done = await self._command(run_id, {"type": "run.create", "workflowId": workflow})
        if isinstance(done, web.Response):
            return done
        created = done[1]
        path = project_run_id(created.run_id)
        # CreateRunResponse {runId, status, eventsUrl, statusUrl?} (v2 runs.md §Create; v1
        # rest-endpoints.md; openwop-client runs_create). The answer waits until this worker
        # has read the run's events (read-your-writes: GET /runs/{runId} then shows them), but
        # its status is the last live one those events pass through (runs.md §Create: never
        # terminal). The run is new, so its log holds the create's events only.
        return _json(
            201,
            {
                "runId": created.run_id,
                "status": created_status(e.type for e in created.events),
                "eventsUrl": f"{prefix}{path}/events",
                "statusUrl": f"{prefix}{path}",
            },
        )

    async def _created_run_id(self, request: web.Request, raw: bytes) -> str | web.StreamResponse:
        """A new run is recorded on a partition this worker owns (``_fresh_run_id``); a worker
        that owns none forwards the request to the owner of a random partition, which places
        it on one of its own (so runs spread over partitions as the owners hold them)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_seconds
        forwarded = FORWARDED_HEADER in request.headers
        while True:
            # the tenant the dispatcher authorized the caller in (the route's scope "create")
            run_id = self._fresh_run_id(f"{DEFAULT_TENANT}/")
            if run_id is not None:
                return run_id
            owners = [o for o in self.ownership.owners.values() if o.owned]
            others = [o for o in owners if o.instance != self.ownership.instance]
            if others and not forwarded and not self.ownership.owned:
                owner = random.choice(others)
                return await self._forward(request, Forward(owner.url, owner.worker_id), raw)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return self._unavailable("no worker owns a partition to create the run on")
            await self.ownership.changed(min(remaining, 0.05))

    async def _cancel(self, request: web.Request, call: Call) -> web.StreamResponse:
        run_id = call.params["runId"]
        found = await self._lookup(run_id)
        if isinstance(found, web.Response):
            return found
        done = await self._command(run_id, {"type": "run.cancel"})
        if isinstance(done, web.Response):
            return done
        return _json(200, {"runId": run_id, "status": done[1].status})

    async def _resolve(self, request: web.Request, call: Call) -> web.StreamResponse:
        run_id, node, body = call.params["runId"], call.params["nodeId"], call.body
        if not isinstance(body, dict) or "resumeValue" not in body:
            return _error(error("validation_error", "the body is {resumeValue}"))
        run = await self._lookup(run_id)
        if isinstance(run, web.Response):
            return run
        command = {
            "type": "interrupt.resolve",
            "nodeId": node,
            "resumeValue": body["resumeValue"],
            # what the requester saw: a resolve recorded after it is a concurrent one (409)
            "expectedSequence": run.last_sequence,
        }
        done = await self._command(run_id, command)
        if isinstance(done, web.Response):
            return done
        return _json(200, {"runId": run_id, "nodeId": node, "status": done[1].status})

    async def _actions(self, request: web.Request, call: Call) -> web.StreamResponse:
        run_id, body = call.params["runId"], call.body
        run = await self._lookup(run_id)
        if isinstance(run, web.Response):
            return run
        sid = body.get("surfaceId", V1_SURFACE_ID) if isinstance(body, dict) else None
        if not isinstance(sid, str):
            return _error(error("validation_error", "surfaceId must be a string"))
        projection = replay(e.event for e in run.events)
        surface = projection.surfaces.get(SurfaceKey(run_id, sid))
        checked = check_action(surface, body)
        if isinstance(checked, Violation):
            return _error(violation_response(checked))
        assert surface is not None and isinstance(body, dict)
        command = {
            "type": "action.submit",
            "surfaceId": sid,
            "sourceComponentId": body["sourceComponentId"],
            "name": body["name"],
            "context": checked["context"],
            "expectedSequence": surface.sequence,
        }
        done = await self._command(run_id, command)
        if isinstance(done, web.Response):
            return done
        published, _run = done
        assert published.outcome is not None
        event = published.outcome.events[0].event
        return _json(
            201,
            {"runId": run_id, "sequence": event["sequence"], "eventId": event["eventId"]},
        )


def _no_run(run_id: str) -> web.Response:
    """The answer for a run never recorded, and (byte for byte: issue 18's no existence
    oracle) for a run outside the caller's tenants."""
    return _error(error("not_found", f"run {run_id!r} has no recorded event"))


def _unauthenticated(decided: Unauthenticated) -> web.Response:
    message = (
        "a bearer token is required (Authorization: Bearer <token>)"
        if decided.tokens_configured
        else "no token is configured on this worker: set A2UI_STREAM_HTTP_TOKENS "
        "or A2UI_STREAM_HTTP_TOKENS_FILE"
    )
    return _error(error("unauthenticated", message), {"WWW-Authenticate": 'Bearer realm="openwop"'})


def _forbidden(right: Right, why: str) -> web.Response:
    """403: the caller lacks ``right`` (in one of its own tenants: a foreign run is answered as
    an unknown one). The same whether the run exists or not; it names no run."""
    return _error(error("forbidden", f"this token does not hold the {right!r} right here{why}"))


def _taking_request(handler: PlainHandler) -> Handler:
    """A handler that reads only the request (the viewer's, /health, /metrics)."""

    async def handle(request: web.Request, call: Call) -> web.StreamResponse:
        return await handler(request)

    return handle


def _owner_page(rows: list[Row], more: bool, served: set[int]) -> dict[str, Any]:
    """A forwarded listing's answer: this owner's rows with their order keys, whether it has
    more, and the partitions it listed (the gathering worker checks that all are covered)."""
    return {
        "rows": [[r.updated_ms, r.run_id, r.snapshot] for r in rows],
        "more": more,
        "partitions": sorted(served),
    }


def _read_owner_page(answer: Any) -> tuple[list[Row], bool, set[int]] | None:
    """Another owner's ``_owner_page``, or None when it did not answer one."""
    if not isinstance(answer, dict):
        return None
    rows, more, partitions = answer.get("rows"), answer.get("more"), answer.get("partitions")
    if not isinstance(rows, list) or not isinstance(more, bool) or not isinstance(partitions, list):
        return None
    read: list[Row] = []
    for row in rows:
        if not (isinstance(row, list) and len(row) == 3 and type(row[0]) is int):
            return None
        if not isinstance(row[1], str) or not isinstance(row[2], dict):
            return None
        read.append(Row(row[0], row[1], row[2]))
    if not all(type(p) is int for p in partitions):
        return None
    return read, more, set(partitions)
