"""The projector's state of one run, folded live or rebuilt from its recorded events (issue 15
item 3), and the frames answered from it outside a batch (issue 15 item 5).

The projector holds the materialized surfaces of a bounded number of runs (the shell's cache,
``app.shell.worker.projector_loop``); a run it evicted, or one of a partition it was just given, is
rebuilt on demand from the run's recorded events (the read side's store, or the log). A run's
state is its own ``Projection`` (its surfaces and its head) and its fork lineage, and
``rebuild`` is ``reduce(fold, events, empty)``: the same step the live projector takes per
event, so a rebuilt run equals the one that was never evicted (rule 5; the law is
tests/core/test_projector_runs.py).

A cached run (``Cached``) also holds what each subscriber holds of its surfaces (its cursors).
Besides the batch step (``app.core.projection.projector_batch``), two things send frames of a run as
it is now: ``answer_resync`` (one full frame for a resync request, issue 5 §4) and ``plan_catch_up``
(a full frame of each surface for a subscriber that registers late, RFC 0114). Both return what
to send (``FrameRecord``: subscriber, key ``runId/surfaceId``, frame, headers) and the cursors
to keep; the shell sends.

May import: the standard library, orjson and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import orjson

from app.core.admission.policy import HostPolicy
from app.core.admission.redaction import Secrets, prepare
from app.core.projection import frames
from app.core.projection.frames import SubscriberCursor
from app.core.projection.subscriber import DRIFT
from app.core.projection.subscriptions import Registry, Subscription
from app.core.projection.surfaces import Projection, SurfaceChange, SurfaceKey, project
from app.core.runlog.events import RecordedEvent
from app.core.runlog.keys import partition_for_run
from app.core.runlog.run_lifecycle import lineage_of

__all__ = [
    "RESYNC_HEADER",
    "Cached",
    "CatchUp",
    "CursorKey",
    "FrameRecord",
    "ResyncAnswer",
    "ResyncRequest",
    "RunSurfaces",
    "answer_resync",
    "complete_prefix",
    "empty_run",
    "fold_run",
    "frame_key",
    "frame_record",
    "parse_resync",
    "plan_catch_up",
    "rebuild_run",
    "run_of_request",
    "run_secrets",
    "subscription_of",
]

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
        """How many surfaces the run holds (what the cache bound counts)."""
        return len(self.projection.surfaces)


def empty_run(run_id: str) -> RunSurfaces:
    """A run with no surfaces yet (nothing folded)."""
    return RunSurfaces(run_id, Projection())


def fold_run(
    run: RunSurfaces, event: RecordedEvent
) -> tuple[RunSurfaces, tuple[SurfaceChange, ...]]:
    """One recorded event of ``run`` folded in: the surfaces it changed (``project``), and
    the lineage a ``run.forked`` marker names."""
    lineage = run.lineage
    if event.get("type") == _FORKED:
        lineage = lineage_of(event["payload"])
    projection, changes = project(run.projection, event)
    return RunSurfaces(run.run_id, projection, lineage), changes


def rebuild_run(run_id: str, events: Iterable[RecordedEvent]) -> RunSurfaces:
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


# -- a cached run and its frames ----------------------------------------------------------

# A resync answer names the request it answers: ``a2ui-resync: <partition>:<offset>``.
RESYNC_HEADER = "a2ui-resync"

CursorKey = tuple[str, str]  # (subscriberId, surfaceId)


class Cached(Protocol):
    """One run as the shell's cache holds it: its partition, its state and what each
    subscriber holds of its surfaces."""

    @property
    def partition(self) -> int:
        """The log partition the run is on."""

    @property
    def run(self) -> RunSurfaces:
        """The run's surfaces as folded so far."""

    @property
    def cursors(self) -> Mapping[CursorKey, SubscriberCursor]:
        """What each subscriber holds of the run's surfaces."""


class FrameRecord(NamedTuple):
    """One frame to write to subscriber ``subscriber_id``'s topic (``a2ui.subscriber.{id}``,
    app.core.runlog.topic_plan.subscriber_topic; the shell creates it on first use). A
    NamedTuple: a fan-out builds one per subscriber (measured: a frozen dataclass's
    ``__init__`` was the largest single cost of the records)."""

    subscriber_id: str
    key: bytes  # runId/surfaceId
    value: bytes  # the encoded frame
    kind: str  # "full" | "delta" (frames.Send)
    reason: str  # why (frames.Send: "delta", "digest", or why a full frame)
    headers: tuple[tuple[str, bytes], ...] = ()


def frame_key(key: SurfaceKey) -> bytes:
    """The subscriber-topic key of a surface's frames: ``runId/surfaceId`` (per-surface
    order on the topic)."""
    return f"{key.run_id}/{key.surface_id}".encode()


def frame_record(
    send: frames.Send, key: SurfaceKey, headers: tuple[tuple[str, bytes], ...] = ()
) -> FrameRecord:
    """A planned frame as the record to write (``frame_key``)."""
    return FrameRecord(
        send.subscriber_id, frame_key(key), send.frame, send.kind, send.reason, headers
    )


def run_secrets(policy: HostPolicy, run: RunSurfaces) -> Secrets:
    """SR-1 for a run's frames: its secrets and those of the runs it was forked from."""
    return prepare(policy.secrets_for(run.run_id, run.lineage))


def subscription_of(sub: Subscription) -> frames.Recipient:
    """The frame planner's view of a registered subscriber."""
    return frames.Recipient(sub.subscriber_id, sub.delta, sub.full_every)


# -- resync requests -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResyncRequest:
    """A resync request (schemas/resync-request): who asks for which surface, and why."""

    subscriber_id: str
    run_id: str
    surface_id: str
    reason: Any  # ``DRIFT`` after a failed digest check (app.core.projection.subscriber)
    partition: int  # the run's log partition


@dataclass(frozen=True, slots=True)
class ResyncAnswer:
    """What answering a request does: ``cache`` a run that was not cached (rebuilt for it: its
    subscriber is active), move ``cursors``, and send ``record`` (None: the run has no such
    surface, or the subscriber is not registered). ``drift``: the request followed a failed
    digest check."""

    cache: RunSurfaces | None
    cursors: Mapping[CursorKey, SubscriberCursor]
    record: FrameRecord | None
    drift: bool


def parse_resync(value: bytes, partitions: int) -> ResyncRequest | None:
    """A resync request of a run on one of ``partitions`` log partitions, or None when it is
    malformed (not JSON, not an object, an id missing or not a string)."""
    try:
        request = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(request, dict):
        return None
    sid, run_id, surface_id = (
        request.get("subscriberId"),
        request.get("runId"),
        request.get("surfaceId"),
    )
    if not (isinstance(sid, str) and isinstance(run_id, str) and isinstance(surface_id, str)):
        return None
    partition = partition_for_run(run_id, partitions)
    return ResyncRequest(sid, run_id, surface_id, request.get("reason"), partition)


def run_of_request(value: bytes) -> str | None:
    """The runId a resync request names, if it names one (the look back keeps it)."""
    try:
        request = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    run_id = request.get("runId") if isinstance(request, dict) else None
    return run_id if isinstance(run_id, str) else None


def answer_resync(
    request: ResyncRequest,
    source: tuple[int, int],
    *,
    cached: Cached | None,
    rebuilt: Mapping[str, RunSurfaces],
    registry: Registry,
    policy: HostPolicy,
) -> ResyncAnswer | None:
    """Issue 5 §4: one full frame of the surface as it is now, marked ``resync: true`` and
    naming the request (``source``: its partition and offset) in ``RESYNC_HEADER``; None when
    the run has no recorded event (neither ``cached`` nor ``rebuilt``)."""
    if cached is not None:
        run, cursors, fresh = cached.run, cached.cursors, None
    else:
        found = rebuilt.get(request.run_id)
        if found is None:
            return None
        run, cursors, fresh = found, {}, found
    key = SurfaceKey(request.run_id, request.surface_id)
    surface = run.projection.surfaces.get(key)
    sub = registry.get(request.subscriber_id)
    if surface is None or sub is None:
        return ResyncAnswer(fresh, {}, None, False)
    at = (request.subscriber_id, request.surface_id)
    send, cursor = frames.answer_resync(
        surface, subscription_of(sub), cursors.get(at), secrets=run_secrets(policy, run)
    )
    header = ((RESYNC_HEADER, f"{source[0]}:{source[1]}".encode()),)
    record = frame_record(send, key, header)
    return ResyncAnswer(fresh, {at: cursor}, record, request.reason == DRIFT)


# -- catch-up -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CatchUp:
    """A late subscriber's frames (one full frame per live surface of each run it follows) and
    the cursors they start, per cached run (a rebuilt run is not kept: its next frame is
    full)."""

    sends: tuple[FrameRecord, ...]
    cursors: Mapping[str, Mapping[CursorKey, SubscriberCursor]]


def plan_catch_up(
    sub: Subscription,
    partition: int,
    cache: Mapping[str, Cached],
    rebuilt: Mapping[str, RunSurfaces],
    policy: HostPolicy,
) -> CatchUp:
    """RFC 0114 (the host can materialize the full surface for any subscriber at any time):
    the frames for ``sub`` of the runs of ``partition`` it follows, the cached ones (in the
    cache's order) and then the ``rebuilt`` ones (not cached)."""
    target = subscription_of(sub)
    runs: list[tuple[RunSurfaces, bool]] = [
        (cached.run, True)
        for run_id, cached in cache.items()
        if cached.partition == partition and sub.follows(run_id)
    ]
    runs += [(run, False) for run in rebuilt.values()]
    sends: list[FrameRecord] = []
    cursors: dict[str, dict[CursorKey, SubscriberCursor]] = {}
    for run, kept in runs:
        live = [s for s in run.projection.surfaces.values() if not s.deleted]
        planned = frames.catch_up(live, target, secrets=run_secrets(policy, run))
        for surface, (send, cursor) in zip(live, planned, strict=True):
            if kept:
                at = (sub.subscriber_id, surface.key.surface_id)
                cursors.setdefault(run.run_id, {})[at] = cursor
            sends.append(frame_record(send, surface.key))
    return CatchUp(tuple(sends), cursors)
