"""The subscriber client's values (issue 5 §5): the surfaces it holds (``SubscriberView``,
``HeldSurface``), the resync state of those that failed (``Trouble``), and the outcomes of one
frame (``Received``: ``Delivered``, ``ResyncNeeded``, ``ResyncDeferred``, ``HeldInvalid``, with
an ``InvalidSurface`` report). ``app.core.projection.subscriber.receive`` produces them, the
resync decision (``app.core.projection.subscriber_resync``) says which outcome a failure is.

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from app.core.runlog.pmap import PMap

__all__ = [
    "HeldSurface",
    "SubscriberView",
    "Trouble",
    "Delivered",
    "ResyncNeeded",
    "ResyncDeferred",
    "HeldInvalid",
    "InvalidSurface",
    "Received",
]

_EMPTY: PMap[Any, Any] = PMap()


class HeldSurface(NamedTuple):
    """A surface as this subscriber holds it: validated content plus the frame's status."""

    run_id: str
    surface_id: str
    version: int
    surface_ref: str
    sequence: int
    catalog: str
    content: Any
    trust: str
    partial: bool
    deleted: bool
    actions_enabled: bool
    stale: bool = False  # a later frame failed: keep for store-without-render, never render

    @property
    def renderable(self) -> bool:
        """Render only a fresh, live surface; v2 needs ``root`` (§6 render-needs-root)."""
        if self.stale or self.deleted:
            return False
        return self.version == 1 or "root" in self.content["components"]


class InvalidSurface(NamedTuple):
    """A report: the surface ``(run_id, surface_id)`` at ``sequence`` failed re-validation.
    ``rule`` names the rule (the profile's, as admission names it, or the invariant it
    protects); ``pointer`` is an RFC 6901 pointer into the surface (the full frame's
    ``surface``; ``""`` is the whole of it); ``frame`` is the kind that brought it."""

    run_id: str
    surface_id: str
    sequence: int | None
    frame: str  # "full" | "delta"
    rule: str
    pointer: str
    message: str

    def describe(self) -> str:
        """One line for a person: which surface, which rule at which pointer, which sequence."""
        where = self.pointer or "(the whole surface)"
        return (
            f"surface {self.run_id}/{self.surface_id} is invalid at sequence {self.sequence} "
            f"({self.frame} frame): rule {self.rule} at {where}: {self.message}"
        )


class ResyncNeeded(NamedTuple):
    """The frame could not be used: publish ``request(subscriber_id)`` NOW (the backoff allows
    it). ``run_id`` and ``surface_id`` are ``None`` when the frame did not even say which
    surface it was for. ``report`` is set the first time this state failed re-validation."""

    run_id: str | None
    surface_id: str | None
    reason: str
    sequence: int | None = None
    report: InvalidSurface | None = None

    def request(self, subscriber_id: str) -> dict[str, Any] | None:
        """The resync-request record (schemas/resync-request), or ``None`` without a surface."""
        if not self.run_id or not self.surface_id:
            return None
        return {
            "subscriberId": subscriber_id,
            "runId": self.run_id,
            "surfaceId": self.surface_id,
            "reason": self.reason[:1024],
            "sequence": self.sequence,
        }


class ResyncDeferred(NamedTuple):
    """The frame could not be used and a resync is needed, but this surface asked recently:
    the request waits in the view until ``retry_at`` (``due_resyncs`` hands it out then, unless
    a delivery makes it unnecessary). Send nothing now."""

    run_id: str
    surface_id: str
    reason: str
    sequence: int | None
    retry_at: float
    report: InvalidSurface | None = None


class HeldInvalid(NamedTuple):
    """The projector's own full frame of this surface at ``sequence`` fails re-validation (or
    a frame of that state or an older one failed again): the surface is held invalid at
    ``sequence``, never rendered, and NOTHING is sent until a frame of a later sequence comes."""

    run_id: str
    surface_id: str
    sequence: int
    reason: str
    report: InvalidSurface | None = None


class Trouble(NamedTuple):
    """One surface's resync state since it was last delivered (``SubscriberView.troubles``)."""

    requests: int = 0  # resync requests sent for it since its last delivery
    next_at: float = 0.0  # the earliest time (the caller's clock) of the next request
    pending: ResyncNeeded | None = None  # a request the backoff holds back
    invalid_at: int | None = None  # its full frame at this sequence failed: ask no more
    reported: int | None = None  # the latest sequence reported (once per state)


_EMPTY_TROUBLES: PMap[tuple[str, str], Trouble] = PMap()


class SubscriberView(NamedTuple):
    """Every surface this subscriber holds, by ``(runId, surfaceId)``, and the resync state of
    those that failed since their last delivery (``Trouble``; empty when all is well)."""

    surfaces: PMap[tuple[str, str], HeldSurface] = _EMPTY
    troubles: PMap[tuple[str, str], Trouble] = _EMPTY_TROUBLES

    def get(self, run_id: str, surface_id: str) -> HeldSurface | None:
        """The surface held for ``(run_id, surface_id)``, or None."""
        found: HeldSurface | None = self.surfaces.get((run_id, surface_id))
        return found

    def trouble(self, run_id: str, surface_id: str) -> Trouble | None:
        """Why the surface ``(run_id, surface_id)`` is not delivered, or None."""
        found: Trouble | None = self.troubles.get((run_id, surface_id))
        return found


class Delivered(NamedTuple):
    """A validated surface for the application (``kind``: the frame that produced it)."""

    surface: HeldSurface
    kind: str


Received = Delivered | ResyncNeeded | ResyncDeferred | HeldInvalid
