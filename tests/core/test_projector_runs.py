"""app.core.projection.projector_runs: a run rebuilt from its recorded events equals the run that
was never evicted (issue 15 item 3), as laws over
generated logs of interleaved runs, plus the cases."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.projection.projector_runs import (
    RunSurfaces,
    complete_prefix,
    empty_run,
    fold_run,
    rebuild_run,
)
from app.core.projection.surfaces import Projection, SurfaceChange, project, replay
from app.core.runlog.events import RecordedEvent
from tests.core.projection_support import column, components, create, data, delete, event, text

RUNS = ("tenant/run-a", "tenant/run-b", "tenant/run-c")
SURFACES = ("s", "t")


def _message(kind: str, sid: str, n: int) -> dict[str, Any]:
    if kind == "create":
        return create(sid)
    if kind == "components":
        return components(sid, column("root", "x"), text("x", f"text {n}"))
    if kind == "data":
        return data(sid, path=f"/items/{n % 3}", value={"n": n})
    if kind == "remove":
        return data(sid, path=f"/items/{n % 3}")
    return delete(sid)


_step = st.tuples(
    st.sampled_from(RUNS),
    st.sampled_from(SURFACES),
    st.lists(
        st.sampled_from(("create", "components", "data", "remove", "delete")),
        min_size=1,
        max_size=3,
    ),
    st.booleans(),  # evict every run after this event (the cache at its most forgetful)
)


def _log(steps: list[tuple[str, str, list[str], bool]]) -> list[tuple[RecordedEvent, bool]]:
    """Recorded events of interleaved runs, each run's sequences 0, 1, 2, ...; a fork marker
    starts run-c (its lineage names run-a), and an empty body is a host event."""
    heads = dict.fromkeys(RUNS, 0)
    out: list[tuple[RecordedEvent, bool]] = []
    for n, (run_id, sid, kinds, evict) in enumerate(steps):
        sequence = heads[run_id]
        heads[run_id] += 1
        if run_id == RUNS[2] and sequence == 0:
            marker = event(0, None, run_id=run_id, kind="run.forked")
            marker["payload"] = {"sourceRunId": RUNS[0], "lineage": [RUNS[0]]}
            out.append((marker, evict))
            continue
        body = {
            "version": "v0.9",
            "catalogId": "c",
            "surfaceId": sid,
            "messages": [_wrap(k, sid, n) for k in kinds],
        }
        out.append((event(sequence, body, run_id=run_id), evict))
    return out


def _wrap(kind: str, sid: str, n: int) -> dict[str, Any]:
    message = dict(_message(kind, sid, n))
    message.pop("version")
    return message


def _of_run(projection: Projection, run_id: str) -> tuple[Any, ...]:
    surfaces = sorted((k, s) for k, s in projection.surfaces.items() if k.run_id == run_id)
    return tuple(surfaces), projection.heads.get(run_id)


@settings(max_examples=150, deadline=None)
@given(st.lists(_step, max_size=40))
def test_a_rebuilt_run_equals_the_never_evicted_one(steps: list[Any]) -> None:
    """Law: folding the whole log once (the projector that never evicts) and folding it with
    every run dropped and rebuilt from its own earlier events wherever the schedule says give
    the same changes, event by event, and the same runs at the end."""
    logged = _log(steps)
    whole = Projection()
    cache: dict[str, RunSurfaces] = {}
    seen: dict[str, list[RecordedEvent]] = {}
    for recorded, evict in logged:
        run_id = recorded["runId"]
        whole, want = project(whole, recorded)
        run = cache.get(run_id) or rebuild_run(run_id, seen.get(run_id, []))
        cache[run_id], got = fold_run(run, recorded)
        assert _changes(got) == _changes(want)
        seen.setdefault(run_id, []).append(recorded)
        if evict:
            cache.clear()
    for run_id, events in seen.items():
        rebuilt = rebuild_run(run_id, events)
        assert _of_run(rebuilt.projection, run_id) == _of_run(whole, run_id)
        kept = cache.get(run_id)
        if kept is not None:
            assert kept == rebuilt
    if RUNS[2] in seen:
        assert rebuild_run(RUNS[2], seen[RUNS[2]]).lineage == (RUNS[0],)


def _changes(changes: tuple[SurfaceChange, ...]) -> list[tuple[Any, ...]]:
    return [(c.key, c.old, c.new, c.warnings) for c in changes]


@settings(max_examples=100, deadline=None)
@given(st.lists(_step, max_size=30))
def test_rebuild_is_the_replay_of_the_run(steps: list[Any]) -> None:
    """``rebuild_run`` is ``surfaces.replay`` of the run's events (the one fold)."""
    events = [recorded for recorded, _ in _log(steps) if recorded["runId"] == RUNS[0]]
    assert rebuild_run(RUNS[0], events).projection == replay(events)


def test_a_redelivered_event_changes_nothing() -> None:
    first = event(0, {"version": "v0.9", "catalogId": "c", "surfaceId": "s", "messages": []})
    run, _ = fold_run(empty_run(first["runId"]), first)
    again, changes = fold_run(run, first)
    assert again == run and changes == ()


@pytest.mark.parametrize(
    ("sequences", "before", "complete"),
    [
        ([], 0, True),
        ([0, 1, 2], 3, True),
        ([0, 2], 2, False),  # a gap
        ([0, 1], 3, False),  # the store is behind
        ([1, 2], 2, False),  # the start is missing
        ([0, 1, 2], 2, False),  # more than asked for: the caller filters by offset first
    ],
)
def test_complete_prefix(sequences: list[int], before: int, complete: bool) -> None:
    assert complete_prefix(sequences, before) is complete
