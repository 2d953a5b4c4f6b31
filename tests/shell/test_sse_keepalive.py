"""The SSE streams' shared keep-alive (app/shell/http/streams.py ``KeepAlive``): a waiting stream
wakes on its run's change or, idle, for a keep-alive at most ``seconds`` after it began to
wait; one timer serves every stream; no change is lost while a stream writes. Driven with a
``RunLog`` and a response double that records what the stream wrote (no broker: the run
index's part is ``RunLog.notify``)."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from app.core.admission.payload_rules import PayloadRules
from app.core.http.stream_modes import DEFAULT_MODES
from app.core.projection.sse_frames import keep_alive
from app.core.runlog.events import RecordedEvent
from app.shell.http.streams import SHARED_STEP_EVENTS, DeltaMemo, KeepAlive, RunStreams
from app.shell.schema_files import load_schema_documents
from app.shell.worker.run_log import LoggedEvent, RunLog

pytestmark = pytest.mark.asyncio

BOUND = 10.0  # a guard against a hang, never a measurement


def _event(run: RunLog, sequence: int, kind: str = "node.started") -> LoggedEvent:
    doc: RecordedEvent = {
        "eventId": f"{run.run_id}-{sequence:012d}",
        "runId": run.run_id,
        "sequence": sequence,
        "type": kind,
        "schemaVersion": 2,
        "timestamp": "2026-12-02T00:00:00Z",
        "payload": {},
    }
    return LoggedEvent(sequence, kind, orjson.dumps(doc), doc, 0, sequence, 0)


def _ids(chunk: bytes) -> list[str]:
    """The ``id:`` of every SSE message in ``chunk`` (a keep-alive comment has none)."""
    return [line[4:].decode() for line in chunk.split(b"\n") if line.startswith(b"id: ")]


class _Written:
    """What a stream wrote, as an aiohttp StreamResponse receives it."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.arrived = asyncio.Event()

    async def write(self, data: bytes) -> None:
        self.chunks.append(data)
        self.arrived.set()

    async def next_chunk(self) -> bytes:
        while not self.chunks:
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), BOUND)
        return self.chunks.pop(0)


class _Index:
    def __init__(self, run: RunLog) -> None:
        self.run = run

    def get(self, run_id: str) -> RunLog | None:
        return self.run if run_id == self.run.run_id else None


def _streams(run: RunLog, keepalive_seconds: float) -> RunStreams:
    """The streams of a worker whose run index holds ``run`` alone."""
    memo = DeltaMemo(PayloadRules.from_documents(load_schema_documents()))
    return RunStreams(_Index(run), memo, keepalive_seconds)  # type: ignore[arg-type]


def _pumping(
    streams: RunStreams, run: RunLog, after: int = -1, delta: bool = False
) -> tuple[_Written, asyncio.Task[None]]:
    """One SSE stream of ``run`` (every mode) from ``after``: what it writes, and its task."""
    written = _Written()
    pump = streams._pump(written, run, DEFAULT_MODES, after, delta)  # type: ignore[arg-type]
    return written, asyncio.create_task(pump)


async def test_a_change_wakes_the_stream_and_removes_its_waker() -> None:
    alive, run = KeepAlive(30.0), RunLog("run-a")
    waiting = asyncio.create_task(alive.wait(run, run.version))
    await asyncio.sleep(0)
    assert len(run.wakers) == 1
    run.notify()
    assert await asyncio.wait_for(waiting, BOUND) is True
    assert run.wakers == set()
    await alive.close()


async def test_a_change_while_the_stream_wrote_answers_at_once() -> None:
    alive, run = KeepAlive(30.0), RunLog("run-b")
    seen = run.version
    run.notify()  # between the stream's read of what was pending and its wait
    assert await asyncio.wait_for(alive.wait(run, seen), BOUND) is True
    assert run.wakers == set()


async def test_an_idle_stream_is_woken_for_a_keep_alive_within_its_seconds() -> None:
    alive, run = KeepAlive(0.2), RunLog("run-c")
    loop = asyncio.get_running_loop()
    began = loop.time()
    assert await asyncio.wait_for(alive.wait(run, run.version), BOUND) is False
    waited = loop.time() - began
    assert waited >= 0.1  # not before half its seconds (the timer's rule)
    assert run.wakers == set()
    await alive.close()


async def test_one_timer_serves_every_stream_and_stops_when_none_waits() -> None:
    alive = KeepAlive(0.2)
    runs = [RunLog(f"run-{n}") for n in range(50)]
    waits = [asyncio.create_task(alive.wait(run, run.version)) for run in runs]
    await asyncio.sleep(0)
    timer = alive._timer
    assert timer is not None and not timer.done()
    runs[0].notify()
    answers = await asyncio.wait_for(asyncio.gather(*waits), BOUND)
    assert answers[0] is True and answers[1:] == [False] * 49
    assert alive._timer is timer  # the same task for all of them
    await asyncio.wait_for(timer, BOUND)  # and it ends once nobody waits


async def test_a_stream_writes_keep_alives_while_idle_and_events_as_they_come() -> None:
    run = RunLog("run-d")
    run.events.append(_event(run, 0))
    streams = _streams(run, keepalive_seconds=0.2)
    written, pump = _pumping(streams, run)
    try:
        assert _ids(await written.next_chunk()) == ["0"]
        assert await written.next_chunk() == keep_alive()  # idle: a keep-alive, not silence
        run.events.append(_event(run, 1))
        run.notify()
        shown: list[str] = []
        while not shown:
            shown = _ids(await written.next_chunk())  # (a keep-alive has no id)
        assert shown == ["1"]
        run.events.append(_event(run, 2, "run.completed"))
        run.status = "completed"
        run.notify()
        await asyncio.wait_for(pump, BOUND)  # the terminal event ends the stream
        assert [i for chunk in written.chunks for i in _ids(chunk)] == ["2"]
    finally:
        pump.cancel()
        await streams.keepalive.close()


async def test_streams_in_one_state_share_what_they_write_and_others_get_their_own() -> None:
    """``RunStreams.step``: five streams of one run in the same state write the same bytes for
    the events they have not seen, worked out once (``present`` once per event, not once per
    stream and event); a stream resumed where they stand joins them; a delta stream gets its
    own; a change (``notify``) is worked out anew."""
    run = RunLog("run-e")
    run.events.append(_event(run, 0))
    streams = _streams(run, keepalive_seconds=30.0)
    memo, presented = streams.memo, 0
    present = memo.present

    def counted(*args: object) -> object:
        nonlocal presented
        presented += 1
        return present(*args)  # type: ignore[arg-type]

    memo.present = counted  # type: ignore[method-assign,assignment]
    states = [(-1, False)] * 5 + [(-1, True), (0, False)]
    writers, pumps = zip(
        *(_pumping(streams, run, after, delta) for after, delta in states), strict=True
    )
    try:
        firsts = [await w.next_chunk() for w in writers[:6]]
        assert all(_ids(chunk) == ["0"] for chunk in firsts)
        assert all(chunk is firsts[0] for chunk in firsts[:5])  # one bytes object, shared
        run.events += [_event(run, 1), _event(run, 2)]
        presented = 0
        run.notify()
        chunks = [await w.next_chunk() for w in writers]
        assert all(_ids(chunk) == ["1", "2"] for chunk in chunks)
        # the stream resumed at 0 is now in the five's state (after 0, no taint, no delta
        # cursor) and shares with them; the delta stream works out its own: 2 events, twice
        assert all(chunks[i] is chunks[0] for i in (1, 2, 3, 4, 6))
        assert chunks[5] is not chunks[0] and presented == 2 * 2
        run.events.append(_event(run, 3, "run.completed"))
        run.status = "completed"
        run.notify()
        await asyncio.wait_for(asyncio.gather(*pumps), BOUND)
        assert all(_ids(w.chunks[-1]) == ["3"] for w in writers)
    finally:
        for pump in pumps:
            pump.cancel()
        await streams.keepalive.close()


async def test_a_catch_up_is_written_frame_by_frame_and_not_kept() -> None:
    """Past ``SHARED_STEP_EVENTS`` events a stream writes a chunk per frame (the response's
    back-pressure between them, as before) and keeps none of it on the run; live, it shares
    again."""
    run = RunLog("run-f")
    count = SHARED_STEP_EVENTS + 4
    run.events += [_event(run, n) for n in range(count)]
    streams = _streams(run, keepalive_seconds=30.0)
    written, pump = _pumping(streams, run)
    try:
        chunks = [await written.next_chunk() for _ in range(count)]
        assert [_ids(chunk) for chunk in chunks] == [[str(n)] for n in range(count)]
        assert run.steps == {}
        run.events.append(_event(run, count))
        run.notify()
        assert _ids(await written.next_chunk()) == [str(count)]
        assert len(run.steps) == 1
    finally:
        pump.cancel()
        await streams.keepalive.close()
