"""The run event stream over HTTP: SSE (v1 and v2), the v1 event-log read and v2 poll.

Shell module (openwop-a2ui.md §9, §10; docs/http.md). Reads only the run index (the owned
partitions of the log, as tailed by this worker; a run owned elsewhere never reaches here, its
request is forwarded). A stream ends when its run's partition leaves this worker (``moved``):
the client resumes with ``Last-Event-ID`` and reaches the new owner.

Each SSE connection keeps an exclusive cursor: it writes every event
with a sequence above it, in order, then waits for the run to change, writing a keep-alive
comment while idle (``KeepAlive``: one timer for every idle stream of the worker, not one
per stream per wake), and closes after the run's terminal event. With ``?a2uiDelta=1`` (v1 path,
when enabled) v1 surface events go through ``app.core.projection.sse_frames.next_output``: an RFC
0114 delta when one verifies, the recorded event otherwise.

Every read gives each event as ``app.core.projection.sse_frames.present`` shows it: sticky taint,
derived from the run's WHOLE log prefix (a connection resuming after ``Last-Event-ID`` and a poll
after ``afterSequence`` walk the events before their cursor too), so no read launders a tainted
surface (issue 14 item 7; RFC 0209 §C.12).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import orjson
from aiohttp import web

from app.core.admission.payload_rules import PayloadRules
from app.core.http.stream_modes import event_in_modes
from app.core.projection.sse_frames import (
    NO_TAINT,
    DeltaCursor,
    StreamOutput,
    Taint,
    delta_event_doc,
    keep_alive,
    next_output,
    present,
    sse_frame,
)
from app.core.projection.surfaces import Projection, project
from app.shell.worker.run_index import RunIndex
from app.shell.worker.run_log import LoggedEvent, RunLog

__all__ = ["SHARED_STEP_EVENTS", "DeltaMemo", "KeepAlive", "RunStreams"]

# ``RunStreams.step`` keeps what streams in one state write when it covers at most this many
# events: live streams are a wake or two behind, and a stream catching up on a long history
# (its bytes could be the whole run's) works its own out, as before, without holding them.
SHARED_STEP_EVENTS = 16

_SURFACE = "ui.a2ui-surface"


class DeltaMemo:
    """``present`` and ``next_output`` results shared by every connection. The event a reader
    is shown depends only on the recorded event and the trust it presents (sticky taint), and
    the cursor after a v1 event only on the event shown, so ``(cursor's eventId, cursor's
    trust, eventId, trust shown)`` identifies a ``next_output`` answer (500 subscribers of one
    run diff each update once, not 500 times)."""

    def __init__(self, rules: PayloadRules, size: int = 20_000) -> None:
        self.rules = rules
        self.size = size
        self._memo: OrderedDict[
            tuple[str | None, str | None, str, str | None], tuple[DeltaCursor, StreamOutput, bytes]
        ] = OrderedDict()
        self._plain: OrderedDict[tuple[str, int, str | None], bytes] = OrderedDict()
        self._relabelled: OrderedDict[tuple[str, int], LoggedEvent] = OrderedDict()

    def present(self, taint: Taint, logged: LoggedEvent) -> tuple[Taint, LoggedEvent, str | None]:
        """The taint after ``logged``, the event as a reader is shown it (``logged`` itself
        unless its trust was rewritten; a rewrite is encoded once) and the trust shown."""
        shown = present(taint, logged.event, logged.data)
        if shown.event is logged.event:
            return shown.taint, logged, shown.trust
        key = (str(logged.event.get("eventId")), logged.offset)
        found = self._relabelled.get(key)
        if found is None:
            found = logged.shown(shown.data, shown.event.copy())
            self._relabelled[key] = found
            if len(self._relabelled) > self.size:
                self._relabelled.popitem(last=False)
        return shown.taint, found, shown.trust

    def plain(self, logged: LoggedEvent, trust: str | None) -> bytes:
        """The SSE bytes of an event as shown (``present``), encoded once for every
        connection."""
        key = (str(logged.event.get("eventId")), logged.offset, trust)
        found = self._plain.get(key)
        if found is None:
            found = self._plain[key] = sse_frame(logged.type, logged.data, logged.sequence)
            if len(self._plain) > self.size:
                self._plain.popitem(last=False)
        return found

    def output(
        self, cursor: DeltaCursor, logged: LoggedEvent, trust: str | None
    ) -> tuple[DeltaCursor, StreamOutput]:
        after, out, _encoded = self._entry(cursor, logged, trust)
        return after, out

    def sse(
        self, cursor: DeltaCursor, logged: LoggedEvent, trust: str | None
    ) -> tuple[DeltaCursor, StreamOutput, bytes]:
        """``output`` and its SSE bytes, encoded once for every connection."""
        return self._entry(cursor, logged, trust)

    def _entry(
        self, cursor: DeltaCursor, logged: LoggedEvent, trust: str | None
    ) -> tuple[DeltaCursor, StreamOutput, bytes]:
        """``logged`` is the event as shown, ``trust`` the trust ``present`` said it shows."""
        key = (cursor.event_id, cursor.trust, str(logged.event.get("eventId")), trust)
        found = self._memo.get(key)
        if found is None:
            after, out = next_output(cursor, logged.event, logged.data, self.rules)
            found = (after, out, sse_frame(out.event_name, out.data, out.sequence))
            self._memo[key] = found
            if len(self._memo) > self.size:
                self._memo.popitem(last=False)
        return found


def _seed(events: Iterable[LoggedEvent], upto: int, memo: DeltaMemo) -> tuple[DeltaCursor, Taint]:
    """What a connection resuming after ``upto`` starts from: the taint of the log prefix up
    to it, and the delta cursor of what the client holds (the last v1 surface at or before it,
    as it was shown)."""
    taint, last = NO_TAINT, None
    for logged in events:
        if logged.sequence > upto:
            break
        taint, shown, trust = memo.present(taint, logged)
        if logged.type == _SURFACE and logged.event.get("payload", {}).get("version") in (0, 1):
            last = (shown, trust)
    if last is None:
        return DeltaCursor(), taint
    cursor, _ = memo.output(DeltaCursor(), *last)
    return cursor, taint


def _shown_after(events: Iterable[LoggedEvent], after: int, memo: DeltaMemo) -> list[Any]:
    """The documents of the events with a sequence above ``after``, as shown: the taint comes
    from every event before them too."""
    taint, docs = NO_TAINT, []
    for logged in events:
        taint, shown, _trust = memo.present(taint, logged)
        if logged.sequence > after:
            docs.append(shown.event)
    return docs


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


class KeepAlive:
    """When an idle SSE stream writes its keep-alive comment (§9: at least every 30 s): one
    timer task for every stream of the worker, instead of an ``asyncio.timeout`` that each
    stream armed and cancelled on every wake (measured: about a quarter of the streams' CPU
    with 500 subscribers, docs/http.md).

    A waiting stream holds one future, in its run's ``wakers`` (resolved True by
    ``RunLog.notify``) and here with the time it began to wait. Every ``seconds / 2`` the timer
    resolves False the futures that have waited at least ``seconds / 2``: an idle stream
    writes a keep-alive at most ``seconds`` after its last wake. The timer runs only while
    a stream waits."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._waiting: dict[asyncio.Future[bool], float] = {}
        self._timer: asyncio.Task[None] | None = None

    async def wait(self, run: RunLog, seen: int) -> bool:
        """Wait until ``run`` changes (True) or a keep-alive is due (False). ``seen``: the
        run's ``version`` read before the stream wrote what was pending; a change since then
        answers True at once (no wake is lost while the stream wrote)."""
        if run.version != seen:
            return True
        loop = asyncio.get_running_loop()
        waker: asyncio.Future[bool] = loop.create_future()
        run.wakers.add(waker)
        self._waiting[waker] = loop.time()
        if self._timer is None or self._timer.done():
            self._timer = asyncio.create_task(self._tick())
        try:
            return await waker
        finally:
            self._waiting.pop(waker, None)
            run.wakers.discard(waker)

    async def _tick(self) -> None:
        half = self.seconds / 2
        loop = asyncio.get_running_loop()
        while self._waiting:
            await asyncio.sleep(half)
            due = loop.time() - half
            for waker, since in list(self._waiting.items()):
                if since <= due and not waker.done():
                    waker.set_result(False)

    async def close(self) -> None:
        """Stop the timer (the worker's shutdown)."""
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer


class RunStreams:
    def __init__(self, index: RunIndex, memo: DeltaMemo, keepalive_seconds: float) -> None:
        self.index = index
        self.memo = memo
        self.keepalive = KeepAlive(keepalive_seconds)
        self.open_streams = 0

    # -- JSON reads -----------------------------------------------------------------------------

    def event_docs(self, run: RunLog, *, after: int, delta: bool) -> list[Any]:
        """The event-log read (§9 ``Accept: application/json``): the recorded events, or with
        ``delta`` the RFC 0114 rendering (deltas nested as ``payload``, §16c)."""
        if not delta:
            return _shown_after(run.events, after, self.memo)
        cursor, taint = DeltaCursor(), NO_TAINT
        docs: list[Any] = []
        for logged in run.events:
            taint, shown, trust = self.memo.present(taint, logged)
            cursor, out = self.memo.output(cursor, shown, trust)
            if logged.sequence <= after:
                continue
            if out.kind == "delta":
                docs.append(delta_event_doc(shown.event, orjson.loads(out.data)))
            else:
                docs.append(shown.event)
        return docs

    async def poll(self, run: RunLog, after: int, timeout: float) -> dict[str, Any]:
        """§9 v2 poll: events with sequence > ``after``; waits up to ``timeout`` when none."""
        if not run.after(after) and not run.terminal:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(run.changed.wait(), timeout)
            run = self.index.get(run.run_id) or run
        return {
            "runId": run.run_id,
            "events": _shown_after(run.events, after, self.memo),
            "lastSequence": run.last_sequence,
            "status": run.status,
            "isTerminal": run.terminal,
        }

    # -- SSE --------------------------------------------------------------------------------------

    def step(
        self,
        run: RunLog,
        after: int,
        taint: Taint,
        cursor: DeltaCursor,
        modes: frozenset[str],
        delta: bool,
    ) -> tuple[tuple[bytes, ...], int, Taint, DeltaCursor]:
        """What a stream in this state writes for the events of ``run`` past ``after`` (the
        frames of the events its ``modes`` take, as ``present`` shows them, RFC 0114 deltas
        with ``delta``: one chunk, or a chunk per frame past ``SHARED_STEP_EVENTS`` events,
        so a catch-up is written with the response's back-pressure between its frames), and
        its state after them. Worked out once per state and shared
        (``RunLog.steps``, until the run's next ``notify``): the streams of one run are
        mostly in one state, and this was a sixth of a stream's CPU per event (measured with
        500). The cursor enters the key by the event it holds and the trust shown, which
        determine it (``DeltaMemo``). Kept only for at most ``SHARED_STEP_EVENTS`` events."""
        key = (after, taint, cursor.event_id, cursor.trust, modes, delta)
        found: tuple[tuple[bytes, ...], int, Taint, DeltaCursor] | None = run.steps.get(key)
        if found is None:
            parts: list[bytes] = []
            pending = run.after(after)
            for logged in pending:
                after = logged.sequence
                taint, shown, trust = self.memo.present(taint, logged)
                if delta:
                    cursor, _out, encoded = self.memo.sse(cursor, shown, trust)
                    if event_in_modes(logged.type, modes):
                        parts.append(encoded)
                elif event_in_modes(logged.type, modes):
                    parts.append(self.memo.plain(shown, trust))
            if len(pending) > SHARED_STEP_EVENTS:  # a catch-up: its own, and not kept
                return tuple(parts), after, taint, cursor
            found = run.steps[key] = ((b"".join(parts),) if parts else (), after, taint, cursor)
        return found

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

    async def _pump(  # noqa: C901 - §9's modes in the one loop a stream runs
        self,
        response: web.StreamResponse,
        run: RunLog,
        modes: frozenset[str],
        after: int,
        delta: bool,
    ) -> None:
        values = "values" in modes
        cursor, taint = _seed(run.events, after, self.memo)
        projection = Projection()
        if values:  # §9: in values mode a snapshot comes first
            for logged in run.events:
                if logged.sequence <= after:
                    projection, _ = project(projection, logged.event)
            await response.write(sse_frame("state.snapshot", _snapshot(run, projection, after)))
        while True:
            seen = run.version
            if values:
                for logged in run.after(after):
                    after = logged.sequence
                    # the projection's trust is sticky already (app.core.projection.surfaces)
                    projection, _ = project(projection, logged.event)
                    body = _snapshot(run, projection, after)
                    await response.write(sse_frame("state.snapshot", body, after))
            else:
                chunks, after, taint, cursor = self.step(run, after, taint, cursor, modes, delta)
                for chunk in chunks:
                    await response.write(chunk)
            if run.terminal:
                return
            if not await self.keepalive.wait(run, seen):
                await response.write(keep_alive())
            if run.moved:  # the partition was revoked: the client resumes at the new owner
                return
            current = self.index.get(run.run_id)
            if current is None:  # the run was deleted (`a2ui-stream runs delete`)
                return
            run = current
