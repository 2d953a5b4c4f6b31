"""Forking a run over HTTP: ``POST /runs/{runId}:fork`` and ``POST /v1/runs/{runId}:fork``
{mode, fromSeq?, runOptionsOverlay?} (openwop-a2ui.md §12; docs/http.md).

Shell module. The handler reads the source run (``HttpApi.lookup``), places the child on a
partition this worker owns (``HttpApi.fresh_run_id``), publishes the host command the core
built (``app.core.http.admission.fork_request``) through ``Admissions.admit`` and waits until
this worker has read the child's events (``Admissions.wait_complete``). Imports the core's fork
decisions, ``app.shell.http.responses``; ``app.shell.http.api`` for its type only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from app.core.http.admission import ForkPoint, fork_request
from app.core.http.errors import HttpError
from app.core.http.wire_ids import project_run_id
from app.core.runlog.run_lifecycle import lineage_of
from app.shell.http.responses import Call, error_response, json_response, unavailable

if TYPE_CHECKING:
    from app.shell.http.api import HttpApi

__all__ = ["fork_run"]


async def fork_run(
    api: HttpApi, request: web.Request, call: Call, *, prefix: str
) -> web.StreamResponse:
    """Fork ``runId``; the answer's eventsUrl is under ``prefix`` (the major it was asked on)."""
    run_id, body = call.params["runId"], call.body
    source = await api.lookup(run_id)
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
    child = api.fresh_run_id(f"{tenant}/" if slash else "fork-")
    if child is None:
        return unavailable("this worker no longer owns a partition")
    built = fork_request(run_id, child, body, point, max_record_bytes=api.max_record_bytes)
    if isinstance(built, HttpError):
        return error_response(built)
    record, fields = built
    result = await api.admissions.admit_recorded(record)
    if isinstance(result, web.Response):
        return result
    forked = await api.admissions.wait_complete(child, int(fields["fromSeq"]))
    return json_response(
        201,
        {
            **fields,
            "status": forked.status if forked is not None else "running",
            "eventsUrl": f"{prefix}{project_run_id(child)}/events",
        },
    )
