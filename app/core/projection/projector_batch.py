"""The projector's batch step: what one fetched batch of the per-run log turns into.

Role: pure decisions over values (the Kafka Streams split between a task's processing and its
driver; ``app.core.admission.validator_batch`` is the validator's). The shell's projector loop
(``app.shell.worker.projector_loop``) fetches a batch of log records and:

1. decodes it once (``decode``: the events of the partitions it owns, and of those only the
   runs someone follows: a record's run and sequence are in its key, so the JSON of a run no
   subscriber follows is never parsed);
2. asks ``needed_runs`` which runs the batch folds that its cache does not hold, and rebuilds
   those from their recorded events (I/O: the run store or the log partition;
   ``app.core.projection.projector_runs.rebuild_run``);
3. calls ``plan_batch`` once and performs what it returns: a ``BatchPlan`` (the frames to
   send, the cache's new runs and cursors, the log offsets to commit once the frames are
   sent, the runs to evict after that commit), or a ``Refetch`` for a batch gathered across
   a rebalance or a take.

The two other things that send frames, a resync request and a late subscriber's catch-up, are
the same split over one run
(``app.core.projection.projector_runs.answer_resync``, ``plan_catch_up``).

The rules (each is what the loop did inline before; docs/projection.md):

- a batch gathered while the loop's generation changed (an assignment, a revocation, a take:
  each moves fetch positions) is dropped and fetched again from where each owned partition
  stands;
- a run no subscriber follows is not folded (nothing would be sent: measured, rebuilding and
  folding such runs was 70% of a default worker's CPU at 2,000 envelopes/s with no subscriber
  when its runs outgrew the cache); it stays out of the cache (one it held leaves) and is
  rebuilt from its events when someone follows it (a catch-up, a resync, a batch);
- each recorded event of a followed run folds over its run as the cache holds it, else as
  rebuilt, else (its first event, sequence 0) from nothing (``fold_run``). A followed run
  that is none of these (someone began to follow it after ``needed_runs`` was asked) makes
  the batch a ``Refetch``, as does a followed run whose events ``decode`` left undecoded (it
  was followed by no one then); an event of a run that ``_working`` still cannot find is a bug in
  the caller (``LookupError``: the shell projects the partition again);
- each surface change is planned for the run's subscribers with their cursors
  (``frames.plan_frames``), redacted with the run's and its ancestors' SR-1 secrets; a frame goes to
  its subscriber's topic keyed ``runId/surfaceId``;
- the offset committed per partition is the one after the batch's last record (tombstones
  included), after the frames are sent (at least once);
- the cache is an LRU counted in surfaces: after the batch the least recently used runs leave
  until it holds at most ``cache_surfaces`` (one run, however large, stays). The cursors go
  with their run: an evicted run's next frames are full.

The cache is the shell's store, read here and never written (a copy per batch would cost as
much as the cache is large): a plan names the runs it changed and the cursors it moved.

May import: the standard library, orjson and app.core.* (pure). No aiokafka, no asyncio.
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple, Protocol

from app.core.admission.policy import HostPolicy
from app.core.admission.validator_batch import Refetch
from app.core.projection import frames
from app.core.projection.frames import SubscriberCursor
from app.core.projection.projector_runs import (
    Cached,
    CursorKey,
    FrameRecord,
    RunSurfaces,
    empty_run,
    fold_run,
    frame_key,
    run_secrets,
)
from app.core.projection.subscriptions import Registry, followed_by_anyone, subscribers_for
from app.core.projection.surfaces import SurfaceChange
from app.core.runlog.events import RecordedEvent, parse_event
from app.core.runlog.keys import run_of_log_key, sequence_of_log_key

__all__ = [
    "Batch",
    "BatchPlan",
    "Decoded",
    "LogEntry",
    "Kept",
    "LogRecord",
    "Need",
    "Refetch",
    "decode",
    "needed_runs",
    "plan_batch",
]


class LogRecord(Protocol):
    """A record of the per-run log as fetched (an aiokafka ConsumerRecord)."""

    @property
    def offset(self) -> int:
        """The record's offset in its partition."""

    @property
    def key(self) -> bytes | None:
        """The record's key (``runId#sequence``, ``app.core.runlog.keys.log_key``)."""

    @property
    def value(self) -> bytes | None:
        """The record's value (None: a tombstone)."""


class LogEntry(NamedTuple):
    """One recorded event of a batch: where it is, whose it is, and the event itself, or None
    when no subscriber followed its run when the batch was decoded (not parsed)."""

    offset: int
    run_id: str
    sequence: int
    event: RecordedEvent | None


@dataclass(frozen=True, slots=True)
class Decoded:
    """One log partition's share of a batch: a ``LogEntry`` per record (tombstones skipped) and
    the offset after its last record."""

    events: tuple[LogEntry, ...]
    next_offset: int


@dataclass(frozen=True, slots=True)
class Batch:
    """A fetched batch: every partition it holds records of (``fetched``), and the decoded
    records of those the loop projected when it was decoded (``partitions``)."""

    fetched: tuple[int, ...]
    partitions: Mapping[int, Decoded]


@dataclass(frozen=True, slots=True)
class Need:
    """A run a batch folds that is not cached: rebuild it from its events below ``offset``
    (its first record in the batch), which has sequence ``sequence``."""

    partition: int
    offset: int
    sequence: int


@dataclass(frozen=True, slots=True)
class Kept:
    """A run a batch folded: its state after the batch and the cursors the batch moved (the
    others stay as the cache holds them). A run the cache did not hold enters it."""

    partition: int
    run: RunSurfaces
    cursors: Mapping[CursorKey, SubscriberCursor]


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """A batch's outcome, performed in this order: keep ``runs`` (insertion order is the order
    of last use, so each one moves to the cache's most recent end), send ``sends``, commit
    ``commits`` (log partition -> next offset), then evict ``evict``. ``fallbacks`` (full
    frames to delta subscribers, by reason) and ``warnings`` ((runId, surfaceId, text), the
    fold's projection warnings) are for /metrics and the log."""

    sends: tuple[FrameRecord, ...]
    runs: Mapping[str, Kept]
    commits: Mapping[int, int]
    evict: tuple[str, ...]
    fallbacks: Mapping[str, int]
    warnings: tuple[tuple[str, str, str], ...]


# -- the batch ------------------------------------------------------------------------------


def decode(
    batch: Mapping[int, Sequence[LogRecord]], owned: Container[int], registry: Registry
) -> Batch:
    """A fetched batch (records by log partition, in offset order) with the records of the
    ``owned`` partitions read: each one's run and sequence from its key, and its event
    parsed, once, only when someone in ``registry`` follows its run (measured: parsing every
    record was most of a default worker's projector when no one followed, docs/pipeline.md).
    A record whose key does not name its run is parsed for it."""
    followed: dict[str, bool] = {}
    return Batch(
        tuple(p for p, records in batch.items() if records),
        {
            p: Decoded(
                tuple(
                    entry
                    for r in records
                    if r.value is not None
                    and (entry := _entry(r.offset, r.key, r.value, registry, followed)) is not None
                ),
                records[-1].offset + 1,
            )
            for p, records in batch.items()
            if records and p in owned
        },
    )


def _entry(
    offset: int, key: bytes | None, value: bytes, registry: Registry, followed: dict[str, bool]
) -> LogEntry | None:
    """The record's entry; None when it is parsed (the key does not name its run, or its run
    is followed) and is not a recorded event: no run's (the validator never writes one)."""
    try:
        run_id, sequence = run_of_log_key(key or b""), sequence_of_log_key(key or b"")
    except (ValueError, UnicodeDecodeError):
        event = parse_event(value)  # not a log key (never written so): the event says
        return None if event is None else LogEntry(offset, event["runId"], event["sequence"], event)
    follows = followed.get(run_id)
    if follows is None:
        follows = followed[run_id] = followed_by_anyone(registry, run_id)
    if not follows:
        return LogEntry(offset, run_id, sequence, None)
    event = parse_event(value)
    return None if event is None else LogEntry(offset, run_id, sequence, event)


def needed_runs(batch: Batch, cached: Container[str], registry: Registry) -> dict[str, Need]:
    """The runs of a batch that someone in ``registry`` follows, that are not ``cached`` and
    had events before it (an event with sequence 0 is its run's first: nothing to rebuild)."""
    needs: dict[str, Need] = {}
    seen: set[str] = set()
    for partition, decoded in batch.partitions.items():
        for offset, run_id, sequence, _event in decoded.events:
            if run_id in seen or run_id in cached:
                continue
            seen.add(run_id)
            if sequence > 0 and followed_by_anyone(registry, run_id):
                needs[run_id] = Need(partition, offset, sequence)
    return needs


def _followed(
    batch: Batch,
    registry: Registry,
    cache: Mapping[str, Cached],
    rebuilt: Mapping[str, RunSurfaces],
) -> dict[str, bool] | None:
    """Whether anyone in ``registry`` follows each run of the batch (asked once per run), or
    None when someone began to follow a run after the batch was decoded (its events were
    left undecoded) or after ``needed_runs`` was asked (it is neither cached nor rebuilt nor
    new)."""
    followed: dict[str, bool] = {}
    for decoded in batch.partitions.values():
        for _offset, run_id, sequence, event in decoded.events:
            known = followed.get(run_id)
            if known is None:
                known = followed[run_id] = followed_by_anyone(registry, run_id)
                if known and sequence > 0 and run_id not in cache and run_id not in rebuilt:
                    return None
            if known and event is None:
                return None
    return followed


@dataclass(slots=True)
class _Working:
    """A run while the batch folds it: where it came from and what changed."""

    partition: int
    run: RunSurfaces
    before: int  # the surfaces the cache counted for it (0: not cached)
    cached: Cached | None
    cursors: dict[CursorKey, SubscriberCursor] = field(default_factory=dict)

    def cursor(self, key: CursorKey) -> SubscriberCursor | None:
        found = self.cursors.get(key)
        if found is None and self.cached is not None:
            found = self.cached.cursors.get(key)
        return found


@dataclass(slots=True)
class _Staged:
    runs: dict[str, _Working] = field(default_factory=dict)  # by last use, oldest first
    sends: list[FrameRecord] = field(default_factory=list)
    fallbacks: dict[str, int] = field(default_factory=dict)
    warnings: list[tuple[str, str, str]] = field(default_factory=list)


def plan_batch(
    batch: Batch,
    cache: Mapping[str, Cached],
    *,
    rebuilt: Mapping[str, RunSurfaces],
    positions: Mapping[int, int],
    gathered: int,
    generation: int,
    registry: Registry,
    policy: HostPolicy,
    held: int,
    cache_surfaces: int,
) -> Refetch | BatchPlan:
    """Decide a batch. ``cache``: the runs held, least recently used first, ``held`` surfaces
    in all; ``rebuilt``: the ``needed_runs`` as they were before the batch; ``positions``: the
    next offset to fold of each owned partition; ``gathered``/``generation``: the loop's
    generation when the batch was fetched and now."""
    followed = _followed(batch, registry, cache, rebuilt) if gathered == generation else None
    if followed is None:
        return Refetch({p: positions[p] for p in batch.fetched if p in positions})
    staged = _Staged()
    commits: dict[int, int] = {}
    for partition, decoded in batch.partitions.items():
        for _offset, run_id, _sequence, event in decoded.events:
            if event is None or not followed[run_id]:
                continue  # no frame to plan: left out of the cache, rebuilt if followed later
            working = _working(partition, event, cache, rebuilt, staged.runs)
            working.run, changes = fold_run(working.run, event)
            for change in changes:
                _fan_out(change, working, registry, policy, staged)
        commits[partition] = decoded.next_offset
    runs = {r: Kept(w.partition, w.run, w.cursors) for r, w in staged.runs.items()}
    after = held + sum(w.run.surface_count - w.before for w in staged.runs.values())
    # A cached run nobody follows any more is not folded: it leaves, not to be served stale.
    unfollowed = tuple(r for r, f in followed.items() if not f and r in cache)
    evicted = _evictions(cache, runs, after, cache_surfaces)
    return BatchPlan(
        tuple(staged.sends),
        runs,
        commits,
        tuple(dict.fromkeys((*unfollowed, *evicted))),
        staged.fallbacks,
        tuple(staged.warnings),
    )


def _working(
    partition: int,
    event: RecordedEvent,
    cache: Mapping[str, Cached],
    rebuilt: Mapping[str, RunSurfaces],
    staged: dict[str, _Working],
) -> _Working:
    """The run an event folds over, moved to the most recent end of the batch's use order."""
    run_id = event["runId"]
    working = staged.pop(run_id, None)
    if working is None:
        cached = cache.get(run_id)
        if cached is not None:
            working = _Working(partition, cached.run, cached.run.surface_count, cached)
        else:
            run = rebuilt.get(run_id)
            if run is None:
                if event["sequence"] > 0:  # not asked for by needed_runs: a bug
                    raise LookupError(f"run {run_id!r} was neither cached nor rebuilt")
                run = empty_run(run_id)
            working = _Working(partition, run, 0, None)
    staged[run_id] = working
    return working


def _fan_out(
    change: SurfaceChange,
    working: _Working,
    registry: Registry,
    policy: HostPolicy,
    staged: _Staged,
) -> None:
    """The frames of one surface change, one per subscriber of its run (``frames.plan_frames``).
    Per subscriber it does only what differs between them (measured, docs/projection.md: a
    1,000-subscriber fan-out spent more around ``plan_frames`` than in it): the registration is
    the planner's addressee as it is, and the frame key is made once per change."""
    run_id, surface_id = change.key.run_id, change.key.surface_id
    subs = subscribers_for(registry, run_id)
    if not subs:
        return
    cursor_of = working.cursor
    pairs = [(s, cursor_of((s.subscriber_id, surface_id))) for s in subs]
    planned = frames.plan_frames(change, pairs, secrets=run_secrets(policy, working.run))
    staged.warnings += [(run_id, surface_id, warning) for warning in planned.warnings]
    for sid, cursor in planned.cursors.items():
        working.cursors[(sid, surface_id)] = cursor
    for reason, n in planned.fallbacks.items():
        staged.fallbacks[reason] = staged.fallbacks.get(reason, 0) + n
    key = frame_key(change.key)
    staged.sends += [
        _record((send.subscriber_id, key, send.frame, send.kind, send.reason, ()))
        for send in planned.sends
    ]


_record: Any = partial(tuple.__new__, FrameRecord)  # FrameRecord without its __new__ frame


def _evictions(
    cache: Mapping[str, Cached], kept: Mapping[str, Kept], held: int, cache_surfaces: int
) -> tuple[str, ...]:
    """The least recently used runs, after the batch moved ``kept`` to the recent end, that
    leave until ``held`` is at most ``cache_surfaces`` (one run, however large, stays)."""
    count = len(cache) + sum(1 for r in kept if r not in cache)
    evicted: list[str] = []
    for run_id in _by_use(cache, kept):
        if held <= cache_surfaces or count <= 1:
            break
        found = kept.get(run_id)
        held -= found.run.surface_count if found is not None else cache[run_id].run.surface_count
        count -= 1
        evicted.append(run_id)
    return tuple(evicted)


def _by_use(cache: Mapping[str, Cached], kept: Mapping[str, Kept]) -> Iterator[str]:
    """The cache's runs after a batch, least recently used first (lazily: eviction stops at
    the first few)."""
    yield from (r for r in cache if r not in kept)
    yield from kept
