"""The subscriber's resync decision: what a frame that could not be used becomes, and when a
held-back request is due. ``app.core.projection.subscriber.receive`` calls ``refuse`` for every
failure and ``deliver`` for every validated surface.

Loop-proof resyncs (issue 14 item 2; docs/projection.md "When a surface stays invalid"): a
resync is a request/answer pair, and no pair may repeat without a state change, whatever the
log holds. ``SubscriberView.troubles`` keeps, per surface that failed since its last delivery,
the table the decision below reads (``Trouble``); the outcomes are values and the caller's
clock comes in as ``now`` (seconds, any monotonic clock):
- a surface that fails re-validation is reported ONCE per state (``InvalidSurface``: which
  surface, the rule, a JSON Pointer into the surface, the sequence), on the outcome's
  ``report``; a later failure of the same or an older sequence reports nothing;
- a full frame is the projector's authoritative surface at its sequence. When one fails
  re-validation and it answers a resync (the projector marks answers ``resync: true``) or this
  subscriber already asked since the surface was last delivered, asking again would bring the
  same frame: the surface is held ``invalid at sequence N`` (``HeldInvalid``) and no request
  is sent until a frame of a LATER sequence arrives (a change resumes normal handling). Only
  the first failing full frame of a surface, unmarked and unasked, asks once;
- every other failure asks (``ResyncNeeded``), but a repeated request for the same surface
  waits for an exponential backoff (``backoff_delay``: 1 s, 2 s, 4 s, ... capped at 60 s, reset
  by a delivery): until then the outcome is ``ResyncDeferred`` and the request waits in the
  view, where ``due_resyncs(view, now)`` hands it out when it is due (the shell calls it as its
  loop turns; ``next_resync_at`` says when). Without ``now`` (a caller with no clock) nothing
  is deferred: each failure asks at once, and the invalid hold above still applies;
- the other surfaces of the run are untouched by all of this: they keep being delivered.

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from typing import NamedTuple

from app.core.projection.subscriber_checks import SurfaceProblem
from app.core.projection.subscriber_view import (
    HeldInvalid,
    HeldSurface,
    InvalidSurface,
    Received,
    ResyncDeferred,
    ResyncNeeded,
    SubscriberView,
    Trouble,
)
from app.core.runlog.pmap import PMap

__all__ = [
    "FrameFailure",
    "refuse",
    "deliver",
    "due_resyncs",
    "next_resync_at",
    "backoff_delay",
    "RESYNC_BACKOFF_BASE",
    "RESYNC_BACKOFF_CAP",
]

RESYNC_BACKOFF_BASE = 1.0  # seconds before a second resync request for the same surface
RESYNC_BACKOFF_CAP = 60.0  # the longest wait between two requests for one surface

_NO_TROUBLE = Trouble()


def _stale(view: SubscriberView, held: HeldSurface | None) -> SubscriberView:
    if held is None or held.stale:
        return view
    key = (held.run_id, held.surface_id)
    return view._replace(surfaces=view.surfaces.set(key, held._replace(stale=True)))


def backoff_delay(requests: int) -> float:
    """Seconds to wait after the ``requests``-th resync request for one surface before the
    next: ``RESYNC_BACKOFF_BASE * 2 ** (requests - 1)``, at most ``RESYNC_BACKOFF_CAP``."""
    if requests < 1:
        return 0.0
    return float(min(RESYNC_BACKOFF_BASE * 2 ** min(requests - 1, 32), RESYNC_BACKOFF_CAP))


class FrameFailure(NamedTuple):
    """Why one frame could not be used, as the resync decision reads it."""

    kind: str | None  # "full", "delta", or None: not even a frame of a known shape
    sequence: int | None
    reason: str
    problem: SurfaceProblem | None = None  # set when the surface failed re-validation
    marked: bool = False  # the frame says it answers a resync request


def _with(view: SubscriberView, key: tuple[str, str], trouble: Trouble) -> SubscriberView:
    return view._replace(troubles=view.troubles.set(key, trouble))


def _asked(trouble: Trouble, now: float | None) -> Trouble:
    """``trouble`` after one more request was sent at ``now``."""
    requests = trouble.requests + 1
    next_at = 0.0 if now is None else now + backoff_delay(requests)
    return trouble._replace(requests=requests, next_at=next_at, pending=None)


def refuse(
    view: SubscriberView, key: tuple[str, str], failure: FrameFailure, now: float | None
) -> tuple[SubscriberView, Received]:
    """The outcome of a frame that could not be used (the module docstring's rules)."""
    run_id, surface_id = key
    view = _stale(view, view.surfaces.get(key))
    trouble: Trouble = view.troubles.get(key, _NO_TROUBLE)
    sequence, floor = failure.sequence, trouble.invalid_at
    if floor is not None and (sequence is None or sequence <= floor):
        # the state held invalid, or an older one (a re-delivery): nothing new to say or ask
        return view, HeldInvalid(run_id, surface_id, floor, failure.reason)
    report = None
    problem = failure.problem
    if problem is not None and sequence is not None:
        if trouble.reported is None or sequence > trouble.reported:  # once per state
            kind = failure.kind or "full"
            report = InvalidSurface(
                run_id, surface_id, sequence, kind, problem.rule, problem.pointer, problem.reason
            )
            trouble = trouble._replace(reported=sequence)
        if failure.kind == "full" and (failure.marked or trouble.requests > 0):
            # the projector's own surface at this sequence, asked for (or as good as): asking
            # again brings the same frame, so hold it invalid until a later sequence comes
            held_invalid = trouble._replace(invalid_at=sequence, pending=None)
            outcome = HeldInvalid(run_id, surface_id, sequence, failure.reason, report)
            return _with(view, key, held_invalid), outcome
    need = ResyncNeeded(run_id, surface_id, failure.reason, sequence, report)
    if now is None or trouble.requests == 0 or now >= trouble.next_at:
        return _with(view, key, _asked(trouble, now)), need
    waiting = trouble._replace(pending=need._replace(report=None))  # the latest reason wins
    deferred = ResyncDeferred(run_id, surface_id, failure.reason, sequence, trouble.next_at, report)
    return _with(view, key, waiting), deferred


def due_resyncs(
    view: SubscriberView, now: float
) -> tuple[SubscriberView, tuple[ResyncNeeded, ...]]:
    """The requests the backoff held back that are due at ``now``, to publish now (each
    counts as sent: the next one for that surface waits longer)."""
    troubles, sends = view.troubles, []
    for key, trouble in view.troubles.items():
        if trouble.pending is not None and trouble.next_at <= now:
            sends.append(trouble.pending)
            troubles = troubles.set(key, _asked(trouble, now))
    if not sends:
        return view, ()
    return view._replace(troubles=troubles), tuple(sends)


def next_resync_at(view: SubscriberView) -> float | None:
    """When ``due_resyncs`` will next have something (the caller's clock), or ``None``."""
    times = [t.next_at for t in view.troubles.values() if t.pending is not None]
    return min(times) if times else None


def deliver(view: SubscriberView, key: tuple[str, str], new: HeldSurface) -> SubscriberView:
    """A validated surface ends its trouble (the backoff and any invalid hold start over)."""
    troubles = view.troubles
    if key in troubles:  # rare: the map is empty while all is well
        troubles = PMap({k: t for k, t in troubles.items() if k != key})
    return SubscriberView(view.surfaces.set(key, new), troubles)
