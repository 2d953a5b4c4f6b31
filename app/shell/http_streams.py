"""The run event stream over HTTP: SSE (v1 and v2), the v1 event-log read and v2 poll.

Shell module (openwop-a2ui.md §9, §10; docs/http.md). Reads only the run index (the log as
tailed by this worker). Each SSE connection keeps an exclusive cursor: it writes every event
with a sequence above it, in order, then waits for the run to change, writing a keep-alive
comment while idle, and closes after the run's terminal event. With ``?a2uiDelta=1`` (v1 path,
when enabled) v1 surface events go through ``app.core.sse_frames.next_output``: an RFC 0114
delta when one verifies, the recorded event otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import orjson
from aiohttp import web

from app.core.payload_rules import PayloadRules
from app.core.sse_frames import (
    DeltaCursor,
    StreamOutput,
    delta_event_doc,
    keep_alive,
    next_output,
    sse_frame,
)
from app.core.stream_modes import event_in_modes
from app.core.surfaces import Projection, project
from app.shell.run_index import LoggedEvent, RunIndex, RunLog

__all__ = ["DeltaMemo", "RunStreams"]

_SURFACE = "ui.a2ui-surface"


class DeltaMemo:
    """``next_output`` results shared by every connection: the output for an event depends only
    on the event and the cursor, and the cursor after a v1 event is determined by that event,
    so ``(cursor's eventId, eventId)`` identifies the answer (500 subscribers of one run diff
    each update once, not 500 times)."""

    def __init__(self, rules: PayloadRules, size: int = 20_000) -> None:
        self.rules = rules
        self.size = size
        self._memo: OrderedDict[tuple[str | None, str], tuple[DeltaCursor, StreamOutput, bytes]] = (
            OrderedDict()
        )
        self._plain: OrderedDict[tuple[str, int], bytes] = OrderedDict()

    def plain(self, logged: LoggedEvent) -> bytes:
        """The SSE bytes of a recorded event as it is, encoded once for every connection."""
        key = (str(logged.event.get("eventId")), logged.offset)
        found = self._plain.get(key)
        if found is None:
            found = self._plain[key] = sse_frame(logged.type, logged.data, logged.sequence)
            if len(self._plain) > self.size:
                self._plain.popitem(last=False)
        return found

    def output(self, cursor: DeltaCursor, logged: LoggedEvent) -> tuple[DeltaCursor, StreamOutput]:
        after, out, _encoded = self._entry(cursor, logged)
        return after, out

    def sse(
        self, cursor: DeltaCursor, logged: LoggedEvent
    ) -> tuple[DeltaCursor, StreamOutput, bytes]:
        """``output`` and its SSE bytes, encoded once for every connection."""
        return self._entry(cursor, logged)

    def _entry(
        self, cursor: DeltaCursor, logged: LoggedEvent
    ) -> tuple[DeltaCursor, StreamOutput, bytes]:
        key = (cursor.event_id, str(logged.event.get("eventId")))
        found = self._memo.get(key)
        if found is None:
            after, out = next_output(cursor, logged.event, logged.data, self.rules)
            found = (after, out, sse_frame(out.event_name, out.data, out.sequence))
            self._memo[key] = found
            if len(self._memo) > self.size:
                self._memo.popitem(last=False)
        return found


def _seed(events: Iterable[LoggedEvent], upto: int, memo: DeltaMemo) -> DeltaCursor:
    """The delta cursor of a connection resuming after ``upto``: what the client holds is the
    last v1 surface at or before it."""
    last = None
    for logged in events:
        if logged.sequence > upto:
            break
        if logged.type == _SURFACE and logged.event.get("payload", {}).get("version") in (0, 1):
            last = logged
    if last is None:
        return DeltaCursor()
    cursor, _ = memo.output(DeltaCursor(), last)
    return cursor


def _snapshot(run: RunLog, projection: Projection, sequence: int) -> bytes:
    surfaces = [
        {
            "surfaceId": key.surface_id,
            "version": surface.version,
            "trust": surface.trust,
            "partial": surface.partial,
            "status": surface.status,
            "sequence": surface.sequence,
            "content": surface.content,
        }
        for key, surface in sorted(projection.surfaces.items(), key=lambda kv: kv[0].surface_id)
    ]
    return orjson.dumps(
        {"runId": run.run_id, "sequence": sequence, "status": run.status, "surfaces": surfaces}
    )


class RunStreams:
    def __init__(self, index: RunIndex, memo: DeltaMemo, keepalive_seconds: float) -> None:
        self.index = index
        self.memo = memo
        self.keepalive_seconds = keepalive_seconds
        self.open_streams = 0

    # -- JSON reads -----------------------------------------------------------------------------

    def event_docs(self, run: RunLog, *, after: int, delta: bool) -> list[Any]:
        """The event-log read (§9 ``Accept: application/json``): the recorded events, or with
        ``delta`` the RFC 0114 rendering (deltas nested as ``payload``, §16c)."""
        cursor = DeltaCursor()
        docs: list[Any] = []
        for logged in run.events:
            if delta:
                cursor, out = self.memo.output(cursor, logged)
                if logged.sequence <= after:
                    continue
                if out.kind == "delta":
                    docs.append(delta_event_doc(logged.event, orjson.loads(out.data)))
                    continue
            elif logged.sequence <= after:
                continue
            docs.append(logged.event)
        return docs

    async def poll(self, run: RunLog, after: int, timeout: float) -> dict[str, Any]:
        """§9 v2 poll: events with sequence > ``after``; waits up to ``timeout`` when none."""
        events = run.after(after)
        if not events and not run.terminal:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(run.changed.wait(), timeout)
            current = self.index.get(run.run_id) or run
            events = current.after(after)
            run = current
        return {
            "runId": run.run_id,
            "events": [e.event for e in events],
            "lastSequence": run.last_sequence,
            "status": run.status,
            "isTerminal": run.terminal,
        }

    # -- SSE --------------------------------------------------------------------------------------

    async def sse(
        self,
        request: web.Request,
        run: RunLog,
        *,
        modes: frozenset[str],
        after: int | None,
        delta: bool,
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            status=200,
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            },
        )
        await response.prepare(request)
        self.open_streams += 1
        try:
            await self._pump(response, run, modes, -1 if after is None else after, delta)
        except ConnectionResetError:
            pass  # the client went away: its next write failed
        finally:
            self.open_streams -= 1
        return response

    async def _pump(
        self,
        response: web.StreamResponse,
        run: RunLog,
        modes: frozenset[str],
        after: int,
        delta: bool,
    ) -> None:
        values = "values" in modes
        cursor = _seed(run.events, after, self.memo) if delta else DeltaCursor()
        projection = Projection()
        if values:  # §9: in values mode a snapshot comes first
            for logged in run.events:
                if logged.sequence <= after:
                    projection, _ = project(projection, logged.event)
            await response.write(sse_frame("state.snapshot", _snapshot(run, projection, after)))
        while True:
            changed = run.changed
            pending = run.after(after)
            for logged in pending:
                after = logged.sequence
                if values:
                    projection, _ = project(projection, logged.event)
                    body = _snapshot(run, projection, after)
                    await response.write(sse_frame("state.snapshot", body, after))
                elif delta:
                    cursor, _out, encoded = self.memo.sse(cursor, logged)
                    if event_in_modes(logged.type, modes):
                        await response.write(encoded)
                elif event_in_modes(logged.type, modes):
                    await response.write(self.memo.plain(logged))
            if run.terminal:
                return
            try:
                # asyncio.timeout, not wait_for: no task per wake-up on every connection
                async with asyncio.timeout(self.keepalive_seconds):
                    await changed.wait()
            except TimeoutError:
                await response.write(keep_alive())
            current = self.index.get(run.run_id)
            if current is None:  # the run was deleted (`a2ui-stream runs delete`)
                return
            run = current
