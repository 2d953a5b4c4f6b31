"""OpenWOP over HTTP on the worker's web server (issue 6; docs/http.md).

Shell module: the one dispatcher, the caller's authorization (bearer tokens, tenants and rights:
``app.core.http.principals``, issue 18), the checks every handler shares (the run's owner, the run
lookup) and the table of each route's handler; the handlers live by role in sibling modules,
which import ``app.shell.http.responses`` and this module's ``HttpApi`` for its type only (this
module imports them: they take the ``HttpApi`` whose state they read). The routes are
data, ``app.core.http.routes.ROUTES`` (every route the worker serves: these, the viewer's, /health,
/metrics; docs/http.md lists them with their auth and right); ``HttpApi.dispatch`` matches each
request there and does the preamble once: the route (404), the token (401), the method (405
with Allow), the run's owner, the body. ``GET /v1/openapi.json`` is the table as OpenAPI 3.1
(``app.core.http.openapi``). Decisions come from the core (``routes``, ``wire_ids``,
``stream_modes``, ``discovery``, ``http_admission``, ``http_errors``); runs are read from
``RunIndex`` (the log, tailed); admissions go through ``AdmissionGateway`` (the admission topic
and the validator, never a shortcut).

Handlers (openwop-a2ui.md §9, §10, §12, §13; a handler takes the request and the ``Call``
the dispatcher read, ``app.shell.http.responses``), by the module that holds them:
api (here):
  GET  /.well-known/openwop                         discovery (v1, or v2 with OpenWOP-Version: 2)
  GET  /v1/openapi.json                             the OpenAPI document of the served routes
run_reads:
  GET  /v1/runs/{runId}/events                      SSE (?streamMode, Last-Event-ID, ?a2uiDelta=1)
                                                    or the event-log read (Accept: application/json)
  GET  /runs/{runId}/events                         v2 SSE (same rules)
  GET  /runs/{runId}/events/poll                    v2 poll (?afterSequence, ?timeout)
  GET  /runs/{runId}, /v1/runs/{runId}              run status
fork:
  POST /runs/{runId}:fork, /v1/runs/{runId}:fork    fork {mode, fromSeq?, runOptionsOverlay?}
run_listing:
  GET  /runs                                        the run listing (RFC 0182; ?limit, ?cursor,
                                                    ?workflowId, ?status), gathered from every owner
lifecycle:
  POST /runs, /v1/runs {workflowId}                 create a run (host command run.create)
  POST /runs/{runId}/cancel                         cancel a run
  POST /runs/{runId}/interrupts/{nodeId}            resolve an interrupt {resumeValue} (§7, §9)
  POST /runs/{runId}/actions                        a user's action from a surface (issue 7)
admission:
  POST /runs/{runId}/envelopes                      admit one AI envelope
  POST /v1/host/sample/a2ui/emit-surface            v1 seam (A2UI_STREAM_SEAMS=1 only)
  POST /v1/host/sample/envelope/accept              v1 acceptor seam (A2UI_STREAM_SEAMS=1, floor 1)
  POST /conformance/seams/sample/a2ui/emit-surface  v2 seam (A2UI_STREAM_SEAMS=1 only)
(the v1 run paths take the same endpoints as the v2 ones but the poll)

Every run route is answered by the worker that owns the run's partition (issue 15 item 2):
``HttpApi.owner_route`` asks ``app.core.runlog.ownership.route`` whether this worker serves it,
forwards it to the owner (``app.shell.http.forward``), or answers 503 with Retry-After while
the partition has no ready owner (a rebalance). Admissions and host commands are forwarded
too: the owner publishes, waits for the outcome on its own tail and answers only once its store
holds the event, so every later read (served by that owner) sees it.

Before any route runs, ``request_guard`` (the web app's one middleware,
``app.shell.http.guard``) applies ``app.core.http.guard`` to every request. Request bodies are
read with a deadline and go through the Kafka path's intake (``app.core.http.admission``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from functools import partial

import faust
from aiohttp import web
from faust.web.drivers.aiohttp import Web as AiohttpWeb

from app.core.http.admission import read_json_body
from app.core.http.discovery import HEADERS as DISCOVERY_HEADERS
from app.core.http.discovery import (
    DiscoveryConfig,
    document_for,
    serves_delta_transport,
)
from app.core.http.errors import HttpError, error
from app.core.http.openapi import document
from app.core.http.principals import (
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
)
from app.core.http.routes import ROUTES, Matched, NotRouted, Route, WrongMethod, match
from app.core.http.snapshot import DEFAULT_TENANT
from app.core.http.wire_ids import no_endpoint_message, split_run_path
from app.core.runlog.keys import partition_for_run
from app.core.runlog.ownership import FORWARDED_HEADER, Forward, Local, route
from app.shell.http.admission import Admissions
from app.shell.http.fork import fork_run
from app.shell.http.forward import Forwarder
from app.shell.http.gateway import AdmissionGateway
from app.shell.http.lifecycle import Lifecycle
from app.shell.http.responses import (
    Call,
    Handler,
    PlainHandler,
    error_response,
    forbidden,
    json_response,
    no_run,
    unauthenticated,
    unavailable,
    wrong_method,
)
from app.shell.http.run_listing import RunListing
from app.shell.http.run_reads import RunReads
from app.shell.http.streams import RunStreams
from app.shell.worker.ownership import Ownership
from app.shell.worker.run_index import PartitionUnsure, RunIndex
from app.shell.worker.run_log import RunLog

__all__ = ["HttpApi"]


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
        # served only where discovery advertises it (the one predicate of app.core.http.discovery)
        self.delta_transport = delta_transport and serves_delta_transport(discovery)
        self.wait_seconds = wait_seconds
        self.max_record_bytes = max_record_bytes
        self.read_timeout = read_timeout
        self.routes = routes  # served at this configuration (app.core.http.routes.served)
        self.openapi_document = document(routes, version=discovery.version)
        # the handlers by role (sibling modules), each reading this api's state
        self.reads = RunReads(self)
        self.admissions = Admissions(self)
        self.lifecycle = Lifecycle(self)
        self.listing = RunListing(self)
        self.handlers: dict[str, Handler] = self._handlers()

    # -- registration ---------------------------------------------------------------------------

    def _handlers(self) -> dict[str, Handler]:
        """Each route's handler by its name in the table (app.core.http.routes.ROUTES)."""
        reads, admissions, lifecycle = self.reads, self.admissions, self.lifecycle
        handlers: dict[str, Handler] = {
            "discover": self.discover,
            "openapi": self.openapi,
            "openapi_root": self.openapi,
            "list_runs": self.listing.list_runs,
            "create_run": lifecycle.create_run,
            "v1_create_run": partial(lifecycle.create_run, prefix="/v1/runs/"),
            "poll_events": reads.poll,
            "v1_emit_surface": admissions.v1_seam,
            "v1_accept_envelope": admissions.v1_accept_seam,
            "v2_emit_surface": admissions.v2_seam,
        }
        for key, prefix, v1 in (("", "/runs/", False), ("v1_", "/v1/runs/", True)):
            handlers[f"{key}get_run"] = partial(reads.status, v1=v1)
            handlers[f"{key}run_events"] = partial(reads.events, v1=v1)
            handlers[f"{key}fork_run"] = partial(fork_run, self, prefix=prefix)
            handlers[f"{key}post_envelope"] = admissions.envelopes
            handlers[f"{key}cancel_run"] = lifecycle.cancel
            handlers[f"{key}resolve_interrupt"] = lifecycle.resolve
            handlers[f"{key}submit_action"] = lifecycle.actions
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
            return error_response(error("not_found", message))
        route = found.route
        principal = LAPTOP  # an open route (no token) reads no run and lists nothing
        if route.auth == "bearer":
            caller = self._caller(request, found)
            if isinstance(caller, web.Response):
                return caller
            principal = caller
        if isinstance(found, WrongMethod):
            return wrong_method(found.allow)
        # the viewer's handlers read their parameters from match_info, as aiohttp fills it
        request.match_info.update(found.params)
        call = Call(route, found.params, principal)
        if route.owner:
            elsewhere = await self.owner_route(request, found.params["runId"])
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
                    return error_response(body)
            call = Call(route, found.params, principal, raw, body)
        return await self.handlers[route.name](request, call)

    # -- shared checks --------------------------------------------------------------------------

    def _caller(
        self, request: web.Request, found: Matched | WrongMethod
    ) -> Principal | web.Response:
        """Who the caller is and whether it may use this route (issue 18; app.core.http.principals),
        by the route's scope (app.core.http.routes): a run route is authorized for its right in the
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
            return self.authorized(presented, right, run_id)
        who = authenticate(self.principals, presented)
        if isinstance(who, Unauthenticated):
            return unauthenticated(who)
        if right is None or isinstance(found, WrongMethod):
            return who
        if right not in who.rights:
            return forbidden(right, "")
        if route.scope == "create" and not may(who, right, DEFAULT_TENANT):
            return forbidden(right, f" (a run is created in the tenant {DEFAULT_TENANT!r})")
        return who

    def authorized(
        self, presented: str | None, right: Right, run_id: str
    ) -> Principal | web.Response:
        """``authorize`` for ``right`` on ``run_id``: the principal, or the answer. A run
        outside the caller's tenants answers exactly as a run never recorded (``no_run``)."""
        decided = authorize(self.principals, presented, right, run_id, DEFAULT_TENANT)
        if isinstance(decided, Allowed):
            return decided.principal
        if isinstance(decided, Unauthenticated):
            return unauthenticated(decided)
        if isinstance(decided, Unknown):
            return no_run(run_id)
        return forbidden(decided.right, "")

    async def _raw_body(self, request: web.Request) -> bytes | web.Response:
        """The request body, read within the read timeout (A2UI_STREAM_HTTP_READ_TIMEOUT_SECONDS);
        a body beyond the web server's ``client_max_size`` is refused by ``request_guard``
        (``app.shell.http.guard``)."""
        try:
            return await asyncio.wait_for(request.read(), self.read_timeout)
        except TimeoutError:
            response = error_response(
                error(
                    "a2ui-stream.request_timeout",
                    f"the request body did not arrive within {self.read_timeout:g}s "
                    "(A2UI_STREAM_HTTP_READ_TIMEOUT_SECONDS): send the whole body at once",
                )
            )
            response.force_close()  # the rest of the body, if it ever comes, is not read
            return response

    async def owner_route(
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
                    return await self.forward(request, decision, body)
                reason = decision.reason
            remaining = deadline - loop.time()
            if remaining <= 0:
                return unavailable(reason)
            await self.ownership.changed(min(remaining, 0.05))

    async def forward(
        self, request: web.Request, owner: Forward, body: bytes | None
    ) -> web.StreamResponse:
        if body is None and request.method == "POST":
            raw = await self._raw_body(request)
            if isinstance(raw, web.Response):
                return raw
            body = raw
        return await self.forwarder.forward(request, owner.url, body, owner.worker_id)

    def fresh_run_id(self, prefix: str) -> str | None:
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

    async def lookup(self, run_id: str) -> RunLog | web.Response:
        """The run as this worker's log tail holds it, read up to the log's end before
        answering "not found" (another worker may have just recorded it). A 404 only when
        this worker read the run's partition to its end and still serves it: a partition that
        moved away or back into its restore while the request waited (a rebalance), or a tail
        that did not catch up in time, is a 503 with Retry-After, never a "not found" for a
        run the log may well hold."""
        try:
            run = await self.index.lookup(run_id, self.wait_seconds)
        except PartitionUnsure as unsure:
            return unavailable(str(unsure))
        if run is None:
            return no_run(run_id)
        return run

    # -- discovery ------------------------------------------------------------------------------

    async def discover(self, request: web.Request, call: Call) -> web.StreamResponse:
        found = document_for(request.headers.get("OpenWOP-Version"), self.discovery)
        return json_response(200, found, dict(DISCOVERY_HEADERS))

    async def openapi(self, request: web.Request, call: Call) -> web.StreamResponse:
        """``GET /v1/openapi.json`` (rest-endpoints.md; no auth): the served routes."""
        return json_response(200, self.openapi_document)

    # -- /runs/... and /v1/runs/... -------------------------------------------------------------

    async def _no_run_endpoint(
        self, request: web.Request, call: Call, *, prefix: str
    ) -> web.StreamResponse:
        """Any other path under ``/runs/`` or ``/v1/runs/``: 404, saying how to write it."""
        split = split_run_path(request.rel_url.raw_path, prefix)
        if split is None:
            return error_response(
                error("not_found", "no such run path (is the runId well formed?)")
            )
        run_id, rest = split
        return error_response(error("not_found", no_endpoint_message(prefix, run_id, rest)))


def _taking_request(handler: PlainHandler) -> Handler:
    """A handler that reads only the request (the viewer's, /health, /metrics)."""

    async def handle(request: web.Request, call: Call) -> web.StreamResponse:
        return await handler(request)

    return handle
