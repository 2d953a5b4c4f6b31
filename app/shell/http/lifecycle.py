"""A run's lifecycle over HTTP: create, cancel, resolve an interrupt, a user's action
(openwop-a2ui.md §7, §9; issue 7; docs/http.md, docs/actions.md).

Shell module. ``Lifecycle`` (one per ``HttpApi``) holds the handlers of ``POST /runs`` (and
``POST /v1/runs``), ``POST /runs/{runId}/cancel``, ``POST /runs/{runId}/interrupts/{nodeId}``
and ``POST /runs/{runId}/actions``. Each publishes one host command (``command``: built by
``app.core.http.admission.command_request``, admitted through ``Admissions.admit``) and answers
once this worker has read its events. Imports the core's decisions (actions, run lifecycle,
surfaces, ownership), ``app.shell.http.responses``, the gateway's and the run index's types;
``app.shell.http.api`` for its type only.
"""

from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING, Any

from aiohttp import web

from app.core.admission.refusal import Violation
from app.core.http.actions import check_action
from app.core.http.admission import command_request, violation_response
from app.core.http.errors import HttpError, error
from app.core.http.snapshot import DEFAULT_TENANT
from app.core.http.wire_ids import project_run_id
from app.core.projection.surfaces import V1_SURFACE_ID, SurfaceKey, replay
from app.core.runlog.ownership import FORWARDED_HEADER, Forward
from app.core.runlog.run_lifecycle import created_status
from app.shell.http.gateway import Published
from app.shell.http.responses import Call, error_response, json_response, unavailable
from app.shell.worker.run_log import RunLog

if TYPE_CHECKING:
    from app.shell.http.api import HttpApi

__all__ = ["Lifecycle"]


class Lifecycle:
    """The host command handlers of one ``HttpApi``."""

    def __init__(self, api: HttpApi) -> None:
        self.api = api

    async def command(
        self, run_id: str, command: dict[str, Any]
    ) -> tuple[Published, RunLog] | web.Response:
        """Publish a host command for ``run_id`` and wait until this worker has read its
        events (or its dead letter)."""
        api = self.api
        built = command_request(run_id, command, max_record_bytes=api.max_record_bytes)
        if isinstance(built, HttpError):
            return error_response(built)
        result = await api.admissions.admit_recorded(built)
        if isinstance(result, web.Response):
            return result
        assert result.outcome is not None  # admit_recorded: the command's events
        last = max(e.sequence for e in result.outcome.events)
        run = await api.admissions.wait_complete(run_id, last)
        if run is None:
            return error_response(
                error("internal_error", "the recorded command is not readable yet")
            )
        return result, run

    async def create_run(
        self, request: web.Request, call: Call, *, prefix: str = "/runs/"
    ) -> web.StreamResponse:
        """``POST /runs`` (v2 createRun) and ``POST /v1/runs`` (rest-endpoints.md): one run
        create; the answer's URLs are under the major it was asked on."""
        body = call.body
        if not isinstance(body, dict) or not isinstance(body.get("workflowId"), str):
            return error_response(error("validation_error", "the body is {workflowId}"))
        workflow = body["workflowId"]
        if workflow not in self.api.discovery.fixtures and workflow.startswith("conformance-"):
            return error_response(
                error("not_found", f"no fixture workflow {workflow!r} on this host")
            )
        run_id = await self._created_run_id(request, call.raw)
        if not isinstance(run_id, str):
            return run_id
        done = await self.command(run_id, {"type": "run.create", "workflowId": workflow})
        if isinstance(done, web.Response):
            return done
        created = done[1]
        path = project_run_id(created.run_id)
        # CreateRunResponse {runId, status, eventsUrl, statusUrl?} (v2 runs.md §Create; v1
        # rest-endpoints.md; openwop-client runs_create). The answer waits until this worker
        # has read the run's events (read-your-writes: GET /runs/{runId} then shows them), but
        # its status is the last live one those events pass through (runs.md §Create: never
        # terminal). The run is new, so its log holds the create's events only.
        return json_response(
            201,
            {
                "runId": created.run_id,
                "status": created_status(e.type for e in created.events),
                "eventsUrl": f"{prefix}{path}/events",
                "statusUrl": f"{prefix}{path}",
            },
        )

    async def _created_run_id(self, request: web.Request, raw: bytes) -> str | web.StreamResponse:
        """A new run is recorded on a partition this worker owns (``HttpApi.fresh_run_id``); a
        worker that owns none forwards the request to the owner of a random partition, which
        places it on one of its own (so runs spread over partitions as the owners hold them)."""
        api, ownership = self.api, self.api.ownership
        loop = asyncio.get_running_loop()
        deadline = loop.time() + api.wait_seconds
        forwarded = FORWARDED_HEADER in request.headers
        while True:
            # the tenant the dispatcher authorized the caller in (the route's scope "create")
            run_id = api.fresh_run_id(f"{DEFAULT_TENANT}/")
            if run_id is not None:
                return run_id
            owners = [o for o in ownership.owners.values() if o.owned]
            others = [o for o in owners if o.instance != ownership.instance]
            if others and not forwarded and not ownership.owned:
                owner = random.choice(others)
                return await api.forward(request, Forward(owner.url, owner.worker_id), raw)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return unavailable("no worker owns a partition to create the run on")
            await ownership.changed(min(remaining, 0.05))

    async def cancel(self, request: web.Request, call: Call) -> web.StreamResponse:
        run_id = call.params["runId"]
        found = await self.api.lookup(run_id)
        if isinstance(found, web.Response):
            return found
        done = await self.command(run_id, {"type": "run.cancel"})
        if isinstance(done, web.Response):
            return done
        return json_response(200, {"runId": run_id, "status": done[1].status})

    async def resolve(self, request: web.Request, call: Call) -> web.StreamResponse:
        run_id, node, body = call.params["runId"], call.params["nodeId"], call.body
        if not isinstance(body, dict) or "resumeValue" not in body:
            return error_response(error("validation_error", "the body is {resumeValue}"))
        run = await self.api.lookup(run_id)
        if isinstance(run, web.Response):
            return run
        command = {
            "type": "interrupt.resolve",
            "nodeId": node,
            "resumeValue": body["resumeValue"],
            # what the requester saw: a resolve recorded after it is a concurrent one (409)
            "expectedSequence": run.last_sequence,
        }
        done = await self.command(run_id, command)
        if isinstance(done, web.Response):
            return done
        return json_response(200, {"runId": run_id, "nodeId": node, "status": done[1].status})

    async def actions(self, request: web.Request, call: Call) -> web.StreamResponse:
        run_id, body = call.params["runId"], call.body
        run = await self.api.lookup(run_id)
        if isinstance(run, web.Response):
            return run
        sid = body.get("surfaceId", V1_SURFACE_ID) if isinstance(body, dict) else None
        if not isinstance(sid, str):
            return error_response(error("validation_error", "surfaceId must be a string"))
        projection = replay(e.event for e in run.events)
        surface = projection.surfaces.get(SurfaceKey(run_id, sid))
        checked = check_action(surface, body)
        if isinstance(checked, Violation):
            return error_response(violation_response(checked))
        assert surface is not None and isinstance(body, dict)
        command = {
            "type": "action.submit",
            "surfaceId": sid,
            "sourceComponentId": body["sourceComponentId"],
            "name": body["name"],
            "context": checked["context"],
            "expectedSequence": surface.sequence,
        }
        done = await self.command(run_id, command)
        if isinstance(done, web.Response):
            return done
        published, _run = done
        assert published.outcome is not None
        event = published.outcome.events[0].event
        return json_response(
            201,
            {"runId": run_id, "sequence": event["sequence"], "eventId": event["eventId"]},
        )
