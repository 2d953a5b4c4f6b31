"""Reading a run over HTTP: its status, its events (SSE or the event-log read) and the v2
poll (openwop-a2ui.md §9, §10; docs/http.md).

Shell module. The handlers of ``GET /runs/{runId}``, ``GET /runs/{runId}/events`` (and their
v1 paths) and ``GET /runs/{runId}/events/poll``, held by ``RunReads`` on the ``HttpApi`` whose
state they read (the run index through ``HttpApi.lookup``, the streams of
``app.shell.http.streams``). The dispatcher (``app.shell.http.api``) authorized the caller and
found the run's owner before any of them runs. Imports the core's query parsers and snapshot,
``app.shell.http.responses``, the run index's types; ``app.shell.http.api`` for its type only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from app.core.http.errors import HttpError
from app.core.http.snapshot import SNAPSHOT_EVENT_TYPES, snapshot
from app.core.http.stream_modes import parse_last_event_id, parse_poll_query, parse_stream_mode
from app.shell.http.responses import Call, error_response, json_response
from app.shell.worker.run_log import RunLog

if TYPE_CHECKING:
    from app.shell.http.api import HttpApi

__all__ = ["RunReads", "run_doc"]


def run_doc(run: RunLog, *, major: int) -> dict[str, Any]:
    """The run's status document (app.core.http.snapshot) under OpenWOP major ``major``."""
    # only the host events the snapshot reads are decoded (never an envelope's payload)
    events = (e.event for e in run.events if e.type in SNAPSHOT_EVENT_TYPES)
    return snapshot(run.run_id, run.status, run.last_sequence, events, major=major)


class RunReads:
    """The read handlers of one ``HttpApi``."""

    def __init__(self, api: HttpApi) -> None:
        self.api = api

    async def status(self, request: web.Request, call: Call, *, v1: bool) -> web.StreamResponse:
        run_id = call.params["runId"]
        run = await self.api.lookup(run_id)
        if isinstance(run, web.Response):
            return run
        return json_response(200, run_doc(run, major=1 if v1 else 2))

    async def events(self, request: web.Request, call: Call, *, v1: bool) -> web.StreamResponse:
        api = self.api
        run_id = call.params["runId"]
        # §9: the query gates run before content negotiation, Last-Event-ID after authorization.
        modes = parse_stream_mode(request.query.get("streamMode"))
        if isinstance(modes, HttpError):
            return error_response(modes)
        after = parse_last_event_id(request.headers.get("Last-Event-ID"))
        if isinstance(after, HttpError):
            return error_response(after)
        delta = v1 and api.delta_transport and request.query.get("a2uiDelta") in ("1", "true")
        run = await api.lookup(run_id)
        if isinstance(run, web.Response):
            return run
        accept = request.headers.get("Accept", "")
        if "application/json" in accept and "text/event-stream" not in accept:
            events = api.streams.event_docs(run, after=-1 if after is None else after, delta=delta)
            return json_response(
                200,
                {
                    "runId": run_id,
                    "events": events,
                    "lastSequence": run.last_sequence,
                    "status": run.status,
                    "isTerminal": run.terminal,
                },
            )
        return await api.streams.sse(request, run, modes=modes, after=after, delta=delta)

    async def poll(self, request: web.Request, call: Call) -> web.StreamResponse:
        run_id = call.params["runId"]
        query = parse_poll_query(request.query.get("afterSequence"), request.query.get("timeout"))
        if isinstance(query, HttpError):
            return error_response(query)
        after, timeout = query
        run = await self.api.lookup(run_id)
        if isinstance(run, web.Response):
            return run
        return json_response(200, await self.api.streams.poll(run, after, timeout))
