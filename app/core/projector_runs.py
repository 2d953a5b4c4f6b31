"""The projector's state of one run, folded live or rebuilt from its recorded events (issue 15
item 3).

The projector holds the materialized surfaces of a bounded number of runs (the shell's cache,
``app.shell.projector_loop``); a run it evicted, or one of a partition it was just given, is
rebuilt on demand from the run's recorded events (the read side's store, or the log). A run's
state is its own ``Projection`` (its surfaces and its head) and its fork lineage, and
``rebuild`` is ``reduce(fold, events, empty)``: the same step the live projector takes per
event, so a rebuilt run equals the one that was never evicted (rule 5; the law is
tests/core/test_projector_runs.py).

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from app.core.run_lifecycle import lineage_of
from app.core.surfaces import Projection, SurfaceChange, project

__all__ = ["RunSurfaces", "complete_prefix", "empty_run", "fold_run", "rebuild_run"]

_FORKED = "run.forked"


class RunSurfaces(NamedTuple):
    """One run as the projector materializes it: its surfaces and next expected sequence
    (``projection`` holds this run only), and the runs it was forked from, oldest first
    (SR-1: its frames are redacted with their secrets too)."""

    run_id: str
    projection: Projection
    lineage: tuple[str, ...] = ()

    @property
    def surface_count(self) -> int:
        return len(self.projection.surfaces)


def empty_run(run_id: str) -> RunSurfaces:
    return RunSurfaces(run_id, Projection())


def fold_run(
    run: RunSurfaces, event: Mapping[str, Any]
) -> tuple[RunSurfaces, tuple[SurfaceChange, ...]]:
    """One recorded event of ``run`` folded in: the surfaces it changed (``project``), and
    the lineage a ``run.forked`` marker names."""
    lineage = run.lineage
    if event.get("type") == _FORKED:
        lineage = lineage_of(event["payload"])
    projection, changes = project(run.projection, event)
    return RunSurfaces(run.run_id, projection, lineage), changes


def rebuild_run(run_id: str, events: Iterable[Mapping[str, Any]]) -> RunSurfaces:
    """``reduce(fold_run, events, empty_run(run_id))``: the run after its recorded events."""
    run = empty_run(run_id)
    for event in events:
        run, _ = fold_run(run, event)
    return run


def complete_prefix(sequences: Sequence[int], before: int) -> bool:
    """Whether ``sequences`` (ascending) are exactly ``0 .. before - 1``: every event a run
    recorded before its event ``before`` (the validator numbers a run's events without gaps),
    so a rebuild from them is the run as it was just before that event."""
    return len(sequences) == before and all(s == i for i, s in enumerate(sequences))
