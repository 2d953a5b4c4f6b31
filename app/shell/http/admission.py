"""Admission over HTTP: an AI envelope, the conformance seams, and the publish-and-wait every
mutating handler shares (openwop-a2ui.md §12, §13; docs/http.md).

Shell module. ``Admissions`` (one per ``HttpApi``) publishes an admission request the core
built (``app.core.http.admission``) through ``AdmissionGateway`` (the admission topic and the
validator, never a shortcut) and waits for its outcome (``admit``), or for this worker to have
read a recorded transaction (``wait_complete``); the fork and run lifecycle handlers
(``app.shell.http.fork``, ``app.shell.http.lifecycle``) use both. Its own handlers:
``POST /runs/{runId}/envelopes`` and the seams (A2UI_STREAM_SEAMS=1 only). Imports the core's
admission decisions, ``app.shell.http.responses``, the gateway's and the run index's types;
``app.shell.http.api`` for its type only.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

import orjson
from aiohttp import web

from app.core.http.admission import (
    AdmissionRequest,
    envelope_request,
    refusal_response,
    v1_seam_request,
    v2_seam_request,
)
from app.core.http.envelope_accept import SEAM_RUN, Admit, decide_accept, outcome_of
from app.core.http.errors import HttpError, error
from app.core.http.principals import bearer_token
from app.shell.clock import now_rfc3339
from app.shell.http.gateway import Published
from app.shell.http.responses import Call, error_response, json_response
from app.shell.worker.run_log import RunLog

if TYPE_CHECKING:
    from app.shell.http.api import HttpApi

__all__ = ["Admissions"]

log = logging.getLogger("a2ui_stream.http")


class Admissions:
    """The admission path and handlers of one ``HttpApi``."""

    def __init__(self, api: HttpApi) -> None:
        self.api = api

    async def admit(self, request: AdmissionRequest) -> Published | web.Response:
        api = self.api
        try:
            published = await api.gateway.admit(
                request.run_id, request.record, api.wait_seconds, sealed=request.command
            )
        except Exception as exc:  # the broker refused the publish: say so, not 500 blindly
            log.warning("http: publish failed (%s)", type(exc).__name__)
            return error_response(
                error(
                    "a2ui-stream.unavailable",
                    f"the admission topic did not take the record ({type(exc).__name__})",
                ),
                {"Retry-After": "1"},
            )
        if published.outcome is None:
            return self._no_outcome(request)
        return published

    async def admit_recorded(self, request: AdmissionRequest) -> Published | web.Response:
        """``admit``, with a dead letter answered as its refusal: a ``Published`` it returns
        holds the record's appended events."""
        result = await self.admit(request)
        if isinstance(result, web.Response):
            return result
        outcome = result.outcome
        assert outcome is not None  # admit answers a missing outcome itself
        if outcome.letter is not None:
            return error_response(refusal_response(outcome.letter))
        return result

    def _no_outcome(self, request: AdmissionRequest) -> web.Response:
        """No log record and no dead letter for our record in time. If the envelope's
        correlationId is already recorded with the same type, the validator deduplicated it
        (E2, §2): the original outcome stands."""
        envelope = request.envelope
        run = self.api.index.get(request.run_id)
        if envelope is not None and run is not None:
            for logged in run.events:
                if logged.event.get("causationId") == envelope.get(
                    "correlationId"
                ) and logged.type == envelope.get("type"):
                    return json_response(201, {"sequence": logged.sequence, "deduplicated": True})
        return error_response(
            error(
                "a2ui-stream.outcome_timeout",
                f"no outcome from the validator within {self.api.wait_seconds:g}s: is a worker "
                "with the validator role running? The record stays on the admission topic and "
                "will still be decided",
            )
        )

    async def wait_complete(self, run_id: str, sequence: int) -> RunLog | None:
        """A fork's events are one transaction; wait until this worker has read all of them."""
        index = self.api.index
        deadline = asyncio.get_running_loop().time() + self.api.wait_seconds
        while True:
            run = index.get(run_id)
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

    async def envelopes(self, request: web.Request, call: Call) -> web.StreamResponse:
        built = envelope_request(
            call.params["runId"], call.raw, max_record_bytes=self.api.max_record_bytes
        )
        if isinstance(built, HttpError):
            return error_response(built)
        return _answer(await self.admit_recorded(built), style="envelopes")

    async def v2_seam(self, request: web.Request, call: Call) -> web.StreamResponse:
        return await self._seam(request, call, v1=False)

    async def v1_seam(self, request: web.Request, call: Call) -> web.StreamResponse:
        return await self._seam(request, call, v1=True)

    async def v1_accept_seam(self, request: web.Request, call: Call) -> web.StreamResponse:
        """The v1 acceptor seam (app.core.http.envelope_accept): 200 with an EnvelopeOutcome.
        ``gated`` and ``blocked`` are decided from the request; every other envelope is
        admitted through the production path on the seam's run (forwarded to its owner). Served
        only where ``serves_envelope_accept`` says (the route table's ``envelope_accept``)."""
        denied = self._seam_denied(request, SEAM_RUN)
        if denied is not None:
            return denied
        decided = decide_accept(call.body)
        if isinstance(decided, HttpError):
            return error_response(decided)
        if not isinstance(decided, Admit):
            return json_response(200, decided)
        elsewhere = await self.api.owner_route(request, SEAM_RUN, call.raw)
        if elsewhere is not None:
            return elsewhere
        built = envelope_request(
            SEAM_RUN, orjson.dumps(decided.envelope), max_record_bytes=self.api.max_record_bytes
        )
        if isinstance(built, HttpError):
            return json_response(200, outcome_of(built.status, built.body, decided.envelope))
        answer = _answer(await self.admit_recorded(built), style="envelope")
        if answer.status in (503, 504):  # no answer from the path: not an outcome, retry
            return answer
        sent = orjson.loads(answer.body) if isinstance(answer.body, bytes) else {}
        return json_response(200, outcome_of(answer.status, sent, decided.envelope))

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
                max_record_bytes=self.api.max_record_bytes,
            )
        else:
            built = v2_seam_request(raw, max_record_bytes=self.api.max_record_bytes)
        if isinstance(built, HttpError):
            return error_response(built)
        denied = self._seam_denied(request, built.run_id)
        if denied is not None:
            return denied
        elsewhere = await self.api.owner_route(request, built.run_id, raw)
        if elsewhere is not None:
            return elsewhere
        return _answer(await self.admit_recorded(built), style="v1-seam" if v1 else "v2-seam")

    def _seam_denied(self, request: web.Request, run_id: str) -> web.Response | None:
        """A seam's run is named by its body (or is the acceptor's own): authorized for
        ``emit`` in its tenant as a run route's is, before its owner is asked (issue 18)."""
        presented = bearer_token(request.headers.get("Authorization"))
        decided = self.api.authorized(presented, "emit", run_id)
        return decided if isinstance(decided, web.Response) else None


def _answer(result: Published | web.Response, *, style: str) -> web.Response:
    if isinstance(result, web.Response):
        return result
    assert result.outcome is not None  # admit_recorded: the record's events
    event = result.outcome.events[0].event
    if style == "v2-seam":  # §13: 201 {sequence}, closed
        return json_response(201, {"sequence": event["sequence"]})
    if style == "v1-seam":  # §13: the recorded envelope id is the surfaceRef
        payload = event.get("payload", {}).get("envelope", {}).get("payload", {})
        return json_response(
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
    return json_response(
        201,
        {"runId": event["runId"], "sequence": event["sequence"], "eventId": event["eventId"]},
    )
