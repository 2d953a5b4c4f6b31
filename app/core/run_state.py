"""The per-run admission state: what the admission decision needs to know about a run's log.

Role: frozen values, derived from the run's recorded events only (``app.core.fold.apply``), so
replay is ``reduce(apply, log, RunState.initial(run_id))`` and a fork that copies ``[0, fromSeq)``
folds exactly that prefix (openwop-a2ui.md §6). Updating a state copies one trie path of a
``PMap`` (structural sharing), never the whole run.

What it holds:
- ``next_sequence``: the sequence the next recorded event gets (first 0, monotonic, §8);
- ``surfaces``: v2 surfaces by surfaceId: fold status, sticky taint, bound nodeIds, and whether
  the last envelope that touched the surface is still partial (§6, §7, E1);
- ``correlations``: correlationId -> type and the recorded outcome(s), for E2 re-emission (§2);
- ``v1_surface``: the run's v1 surface. Decision (docs/admission.md): a run has ONE v1 surface,
  the last admitted version-0/1 payload (RFC 0114: the recorded envelope is always the full
  surface and deltas patch the one last delivered), identified by that event's eventId.

Values are ``NamedTuple``s, not frozen dataclasses: they are just as immutable and compare by
value, and on this project's machines they build 3-6x faster, which matters on a path whose
whole budget is 20 µs (docs/admission.md, bench).

May import: the standard library and app.core.pmap.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from app.core.pmap import PMap

__all__ = [
    "FoldStatus",
    "Recorded",
    "SurfaceState",
    "V1Surface",
    "Correlation",
    "RunState",
]

# "absent" is never stored: a surfaceId missing from ``surfaces`` is absent.
FoldStatus = Literal["absent", "live", "deleted"]

EMPTY: PMap = PMap()  # shared: a PMap is immutable


class Recorded(NamedTuple):
    """Where an admitted envelope landed in the run log."""

    sequence: int
    event_id: str


class SurfaceState(NamedTuple):
    """One v2 surface, identity ``(runId, surfaceId)`` (§6)."""

    status: FoldStatus
    # §7 / RFC 0209 §C.12: once any envelope in the surface's fold is untrusted, the surface is
    # untrusted for good: a later trusted update, a deleteSurface or a re-create never launders it.
    tainted: bool = False
    # §7 binding: every nodeId that emitted an envelope for this surface (approval gate).
    node_ids: frozenset[str] = frozenset()
    # E1: the last envelope that touched the surface was a non-final chunk (actions disabled).
    partial: bool = False
    last: Recorded | None = None


class V1Surface(NamedTuple):
    """The run's single v1 surface: the last admitted full v1 payload (RFC 0114)."""

    last: Recorded
    tainted: bool = False
    node_ids: frozenset[str] = frozenset()


class Correlation(NamedTuple):
    """E2 (§2): what a correlationId produced.

    ``chunks`` maps a ``partial.index`` to the record of that chunk (E1: every chunk of one
    emission shares the correlationId); ``last`` is the latest record for the id; ``complete``
    is true once a final envelope (no ``partial`` or ``isPartial: false``) was recorded.
    """

    type: str
    last: Recorded
    complete: bool
    chunks: PMap[int, Recorded] = EMPTY


class RunState(NamedTuple):
    """Admission state of one run. Build with ``RunState.initial(run_id)``."""

    run_id: str
    next_sequence: int = 0
    surfaces: PMap[str, SurfaceState] = EMPTY
    correlations: PMap[str, Correlation] = EMPTY
    v1_surface: V1Surface | None = None

    @classmethod
    def initial(cls, run_id: str) -> RunState:
        """The state of a run with an empty log."""
        return cls(run_id=run_id)

    def surface_status(self, surface_id: str) -> FoldStatus:
        found = self.surfaces.get(surface_id)
        return "absent" if found is None else found.status

    def tainted_surfaces_for_node(self, node_id: str) -> tuple[str, ...]:
        """§7: surfaces bound to ``node_id`` (any recorded envelope with that nodeId, deleted
        surfaces included, as openwop-app does) that are tainted, whoever tainted them. A
        non-empty answer means an approval at that node MUST NOT advance
        (``untrusted_content_blocks_approval``)."""
        found = sorted(
            sid for sid, s in self.surfaces.items() if s.tainted and node_id in s.node_ids
        )
        v1 = self.v1_surface
        if v1 is not None and v1.tainted and node_id in v1.node_ids:
            found.append("v1")
        return tuple(found)
