"""The projector's cache of runs: the runs it holds, least recently used first, and their surfaces.

Shell module, read by ``app.shell.worker.projector_loop`` and its helpers
(``projector_resync``, ``projector_registry``). ``ProjectorLoop.runs`` maps a runId to its
``CachedRun`` and ``ProjectorLoop.held`` counts the surfaces they hold; the bound
(``ProjectorConfig.cache_surfaces``) is enforced by the core's plan after each batch
(``app.core.projection.projector_batch``: the runs it names are evicted). It imports ``app.core``;
the loop's type only for annotations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.core.projection import frames, projector_batch
from app.core.projection.projector_runs import CursorKey, RunSurfaces

if TYPE_CHECKING:
    from app.shell.worker.projector_loop import ProjectorLoop

__all__ = ["CachedRun", "cache", "keep", "uncache"]


@dataclass
class CachedRun:
    """One run in the cache (``projector_runs.Cached``): its partition, its state, and what
    each subscriber holds of its surfaces (the cursors go with the run: an evicted run's next
    frames are full)."""

    partition: int
    run: RunSurfaces
    cursors: dict[CursorKey, frames.SubscriberCursor] = field(default_factory=dict)


def cache(loop: ProjectorLoop, partition: int, run: RunSurfaces) -> CachedRun:
    """``run`` into the cache, at its most recent end."""
    cached = loop.runs[run.run_id] = CachedRun(partition, run)
    loop.held += run.surface_count
    return cached


def uncache(loop: ProjectorLoop, run_id: str) -> None:
    """``run_id`` out of the cache (with its subscribers' cursors), if it is there."""
    cached = loop.runs.pop(run_id, None)
    if cached is not None:
        loop.held -= cached.run.surface_count


def keep(loop: ProjectorLoop, runs: Mapping[str, projector_batch.Kept]) -> None:
    """A plan's runs into the cache, each moved to its most recent end (in the plan's
    order: that of last use)."""
    for run_id, kept in runs.items():
        cached = loop.runs.get(run_id)
        if cached is None:
            cached = cache(loop, kept.partition, kept.run)
        else:
            loop.held += kept.run.surface_count - cached.run.surface_count
            cached.run = kept.run
            loop.runs.move_to_end(run_id)
        cached.cursors.update(kept.cursors)
