"""The projector's batch step (app/core/projection/projector_batch.py) and the frames it answers
from one run outside a batch (app/core/projection/projector_runs.py: a resync request, a late
subscriber's catch-up), as tables over values; and the laws: a log planned in batches cut anywhere
sends what one batch sends, and with room for one surface (every other run evicted and rebuilt from
its own earlier events) a full subscriber gets the
frames of the cache that never evicts, byte for byte."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.admission.policy import HostPolicy
from app.core.projection.frames import SubscriberCursor
from app.core.projection.projector_batch import (
    Batch,
    BatchPlan,
    Decoded,
    LogEntry,
    Need,
    Refetch,
    decode,
    needed_runs,
    plan_batch,
)
from app.core.projection.projector_runs import (
    RESYNC_HEADER,
    CursorKey,
    ResyncRequest,
    RunSurfaces,
    answer_resync,
    parse_resync,
    plan_catch_up,
    rebuild_run,
    run_of_request,
)
from app.core.projection.subscriber import DRIFT
from app.core.projection.subscriptions import Registry, register
from app.core.projection.surfaces import SurfaceKey
from app.core.runlog.events import RecordedEvent
from app.core.runlog.keys import log_key, partition_for_run
from tests.core.projection_support import (
    BASIC,
    column,
    components,
    create,
    data,
    delete,
    event,
    text,
)

POLICY = HostPolicy()
A, B, C = "t/run-a", "t/run-b", "t/run-c"


@dataclass
class Rec:
    """A fetched log record (the fields the step reads)."""

    offset: int
    value: bytes | None
    key: bytes | None = None  # None: not a log key (decode reads the run from the event)


def _rec(offset: int, recorded: RecordedEvent) -> Rec:
    """The log record of ``recorded`` as the validator writes it (keyed ``runId#sequence``)."""
    return Rec(offset, orjson.dumps(recorded), log_key(recorded["runId"], recorded["sequence"]))


@dataclass
class Entry:
    """A run as the shell's cache holds it (app.core.projection.projector_runs.Cached)."""

    partition: int
    run: RunSurfaces
    cursors: dict[CursorKey, SubscriberCursor] = field(default_factory=dict)


def _event(
    run_id: str,
    sequence: int,
    value: str = "v",
    *,
    sid: str = "s",
    creating: bool | None = None,
    deleting: bool = False,
) -> RecordedEvent:
    """Event ``sequence`` of ``run_id`` on surface ``sid``: it sets the surface's text, after
    creating it (by default in the run's first event); or it deletes the surface."""
    messages = [create(sid)] if (sequence == 0 if creating is None else creating) else []
    messages += [components(sid, column("root", "t"), text("t", f"{value} {sequence}"))]
    messages += [data(sid, path="/n", value=sequence)]
    if deleting:
        messages = [delete(sid)]
    body = {
        "version": "v0.9",
        "catalogId": BASIC,
        "surfaceId": sid,
        "messages": [{k: v for k, v in m.items() if k != "version"} for m in messages],
    }
    return event(sequence, body, run_id=run_id)


def _registry(*subs: tuple[str, bool] | tuple[str, bool, list[str]]) -> Registry:
    registry: Registry = {}
    for sub in subs:
        sid, delta = sub[0], sub[1]
        runs: Any = sub[2] if len(sub) == 3 else "*"
        doc = {"subscriberId": sid, "runs": runs, "delta": delta, "fullEvery": 3}
        registry, why = register(registry, sid.encode(), orjson.dumps(doc))
        assert why is None
    return registry


def _batch(*parts: tuple[int, list[RecordedEvent]], first: int = 0) -> Batch:
    """A decoded batch: per partition, its events at offsets ``first, first + 1, ...``."""
    return Batch(
        tuple(p for p, _ in parts),
        {
            p: Decoded(
                tuple(
                    LogEntry(first + i, e["runId"], e["sequence"], e) for i, e in enumerate(events)
                ),
                first + len(events),
            )
            for p, events in parts
        },
    )


def _plan(
    batch: Batch,
    cache: Mapping[str, Entry] | None = None,
    *,
    rebuilt: Mapping[str, RunSurfaces] | None = None,
    registry: Registry | None = None,
    held: int | None = None,
    cache_surfaces: int = 10_000,
) -> BatchPlan:
    cache = cache or {}
    planned = plan_batch(
        batch,
        cache,
        rebuilt=rebuilt or {},
        positions={},
        gathered=1,
        generation=1,
        registry=registry or {},
        policy=POLICY,
        held=sum(e.run.surface_count for e in cache.values()) if held is None else held,
        cache_surfaces=cache_surfaces,
    )
    assert isinstance(planned, BatchPlan)
    return planned


def _frames(plan: BatchPlan) -> list[tuple[str, str, str, dict[str, Any]]]:
    return [(s.subscriber_id, s.kind, s.reason, orjson.loads(s.value)) for s in plan.sends]


# -- decode and needed_runs ---------------------------------------------------------------


def test_decode_skips_tombstones_and_unowned_partitions_and_commits_past_the_last_record() -> None:
    one, two = _event(A, 0), _event(B, 0)
    batch = decode(
        {
            0: [_rec(4, one), Rec(5, None)],  # the last record is a tombstone
            1: [_rec(9, two)],  # not owned (any more, or not yet)
            2: [],
            3: [Rec(0, None)],  # tombstones only
        },
        {0, 2, 3},
        _registry(("s", False)),
    )
    assert batch.fetched == (0, 1, 3)
    assert batch.partitions == {0: Decoded((LogEntry(4, A, 0, one),), 6), 3: Decoded((), 1)}


def test_decode_parses_only_the_events_of_runs_someone_follows() -> None:
    """A run nobody follows keeps its run and sequence (from the key) but its JSON is never
    parsed: a value that is not JSON at all shows it."""
    followed = _event(A, 0)
    batch = decode(
        {0: [_rec(0, followed), Rec(1, b"not json", log_key(B, 3))]},
        {0},
        _registry(("s", False, [A])),
    )
    assert batch.partitions[0].events == (LogEntry(0, A, 0, followed), LogEntry(1, B, 3, None))


def test_a_run_followed_after_its_batch_was_decoded_makes_the_batch_a_refetch() -> None:
    """Decoded while nobody followed B, planned after someone began to: B's events were not
    parsed, so the batch is fetched again (then parsed) rather than planned without them."""
    records = {0: [_rec(5, _event(A, 0)), _rec(6, _event(B, 0))]}
    batch = decode(records, {0}, _registry(("s", False, [A])))
    planned = plan_batch(
        batch,
        {},
        rebuilt={},
        positions={0: 5},
        gathered=1,
        generation=1,
        registry=_registry(("s", False)),  # now follows every run, B too
        policy=POLICY,
        held=0,
        cache_surfaces=10,
    )
    assert planned == Refetch({0: 5})
    again = _plan(decode(records, {0}, _registry(("s", False))), registry=_registry(("s", False)))
    assert {f[0] for f in _frames(again)} == {"s"} and len(again.runs) == 2


@pytest.mark.parametrize(
    ("records", "cached", "want"),
    [
        pytest.param([(A, 0)], set(), {}, id="a run's first event: nothing to rebuild"),
        pytest.param([(A, 2)], set(), {A: Need(0, 10, 2)}, id="a later event of an uncached run"),
        pytest.param([(A, 2)], {A}, {}, id="a cached run"),
        pytest.param(
            [(A, 2), (A, 3), (B, 5)],
            set(),
            {A: Need(0, 10, 2), B: Need(0, 12, 5)},
            id="each run's first record in the batch names where to rebuild to",
        ),
        pytest.param([(A, 0), (A, 1)], set(), {}, id="a run that starts in the batch"),
    ],
)
def test_needed_runs(
    records: list[tuple[str, int]], cached: set[str], want: dict[str, Need]
) -> None:
    batch = _batch((0, [_event(run, seq) for run, seq in records]), first=10)
    assert needed_runs(batch, cached, _registry(("s", False))) == want


# -- plan_batch ---------------------------------------------------------------------------


def test_a_batch_gathered_across_a_rebalance_is_fetched_again_from_the_owned_positions() -> None:
    """Partition 1 was not owned when the batch was decoded but is now (taken meanwhile): it is
    sought back too; partition 2 is not owned any more (revoked): left alone."""
    batch = decode(
        {p: [_rec(0, _event(A, 0))] for p in (0, 1, 2)},
        {0, 2},
        {},
    )
    planned = plan_batch(
        batch,
        {},
        rebuilt={},
        positions={0: 7, 1: 3, 5: 9},
        gathered=1,
        generation=2,
        registry={},
        policy=POLICY,
        held=0,
        cache_surfaces=10,
    )
    assert planned == Refetch({0: 7, 1: 3})


def test_a_batch_folds_fans_out_and_commits() -> None:
    events = [_event(A, n) for n in range(3)]
    plan = _plan(_batch((0, events), (1, [])), registry=_registry(("full", False), ("d", True)))
    got = [(sid, kind, reason, frame["sequence"]) for sid, kind, reason, frame in _frames(plan)]
    assert got == [
        ("full", "full", "subscription", 0),
        ("d", "full", "first", 0),
        ("full", "full", "subscription", 1),
        ("d", "delta", "delta", 1),
        ("full", "full", "subscription", 2),
        ("d", "delta", "delta", 2),
    ]
    assert {s.key for s in plan.sends} == {f"{A}/s".encode()}
    assert {s.headers for s in plan.sends} == {()}
    assert plan.commits == {0: 3, 1: 0}
    assert list(plan.runs) == [A]
    kept = plan.runs[A]
    assert kept.partition == 0 and kept.run == rebuild_run(A, events)
    assert kept.cursors[("d", "s")].sequence == 2 and kept.cursors[("full", "s")].sequence == 2
    assert plan.fallbacks == {"first": 1} and plan.evict == () and plan.warnings == ()


def test_a_run_nobody_follows_is_neither_folded_nor_kept() -> None:
    # nothing would be sent for it: measured, rebuilding and folding such runs was 70% of a
    # default worker's CPU at 2,000 envelopes/s once its runs outgrew the cache
    plan = _plan(_batch((0, [_event(A, 0), _event(B, 0)])), registry=_registry(("x", False, [B])))
    assert [orjson.loads(s.value)["runId"] for s in plan.sends] == [B]
    assert list(plan.runs) == [B] and plan.evict == ()
    # a later event of a run nobody follows needs no rebuild
    later = _batch((0, [_event(A, 7), _event(B, 1)]))
    assert needed_runs(later, {B}, _registry(("x", False, [B]))) == {}


def test_a_cached_run_nobody_follows_any_more_leaves_the_cache() -> None:
    # its subscriber unsubscribed: its events are not folded, so it must not stay (stale)
    cache = {
        A: Entry(0, rebuild_run(A, [_event(A, 0)])),
        B: Entry(0, rebuild_run(B, [_event(B, 0)])),
    }
    plan = _plan(
        _batch((0, [_event(A, 1), _event(B, 1)])), cache, registry=_registry(("x", False, [B]))
    )
    assert list(plan.runs) == [B] and plan.evict == (A,)
    assert [orjson.loads(s.value)["runId"] for s in plan.sends] == [B]


def test_a_run_followed_after_its_needs_were_asked_is_fetched_again() -> None:
    # needed_runs was asked before a subscriber of A registered: A is neither cached nor
    # rebuilt, so the batch is fetched again (its next needed_runs rebuilds A)
    batch = _batch((0, [_event(A, 3)]))
    assert needed_runs(batch, set(), {}) == {}
    planned = plan_batch(
        batch,
        {},
        rebuilt={},
        positions={0: 40},
        gathered=1,
        generation=1,
        registry=_registry(("x", False, [A])),
        policy=POLICY,
        held=0,
        cache_surfaces=10,
    )
    assert planned == Refetch({0: 40})


def test_the_cached_run_wins_over_a_rebuilt_one_and_its_cursors_are_used() -> None:
    """A resync answer may cache a run while the batch's rebuild of it is in flight: the cached
    one (with the cursor its answer left) is folded; the delta goes from that cursor."""
    registry = _registry(("d", True))
    first = _plan(_batch((0, [_event(A, 0)])), registry=registry)
    entry = Entry(0, first.runs[A].run, dict(first.runs[A].cursors))
    stale = rebuild_run(A, [])
    plan = _plan(
        _batch((0, [_event(A, 1)])), {A: entry}, rebuilt={A: stale}, registry=registry, held=1
    )
    assert [(s.kind, s.reason) for s in plan.sends] == [("delta", "delta")]
    assert plan.runs[A].run == rebuild_run(A, [_event(A, 0), _event(A, 1)])
    assert set(plan.runs[A].cursors) == {("d", "s")}  # the cursors it moved, not all


def _cached(*runs: tuple[str, int]) -> OrderedDict[str, Entry]:
    """A cache, least recently used first, of runs with ``n`` surfaces each."""
    cache: OrderedDict[str, Entry] = OrderedDict()
    for run_id, n in runs:
        events = [_event(run_id, 0, sid=f"s{i}") for i in range(n)]
        cache[run_id] = Entry(0, rebuild_run(run_id, events))
    return cache


@pytest.mark.parametrize(
    ("cache", "batch", "bound", "evicted"),
    [
        pytest.param([(A, 1), (B, 1)], [], 2, (), id="within the bound"),
        pytest.param([(A, 1), (B, 1), (C, 1)], [], 1, (A, B), id="least recently used first"),
        pytest.param(
            [(A, 1), (B, 1), (C, 1)], [(A, 1)], 1, (B, C), id="a run the batch used moves last"
        ),
        pytest.param(
            [(A, 1), (B, 1)], [(C, 0)], 2, (A,), id="a run the batch starts counts and stays"
        ),
        pytest.param([(A, 3), (B, 1)], [], 1, (A,), id="the large run goes first if it is older"),
        pytest.param([(A, 1), (B, 3)], [], 1, (A,), id="one run larger than the bound stays"),
        pytest.param([], [(C, 0)], 0, (), id="the only run stays"),
    ],
)
def test_evictions(
    cache: list[tuple[str, int]],
    batch: list[tuple[str, int]],
    bound: int,
    evicted: tuple[str, ...],
) -> None:
    held = _cached(*cache)
    events = [_event(run, seq, "new") for run, seq in batch]
    everyone = _registry(("all", False))  # every run followed: each one folded and kept
    plan = _plan(_batch((0, events)), held, registry=everyone, cache_surfaces=bound)
    assert plan.evict == evicted


# -- laws ---------------------------------------------------------------------------------

RUNS = (A, B, C)
PARTITIONS = 2


def _log(steps: Sequence[tuple[int, bool]]) -> list[RecordedEvent]:
    """Interleaved events of three runs, each run's sequences 0, 1, 2, ...; some delete their
    surface (the run's next event re-creates it)."""
    heads = dict.fromkeys(RUNS, 0)
    deleted = dict.fromkeys(RUNS, False)
    out = []
    for n, (r, deleting) in enumerate(steps):
        run_id = RUNS[r]
        sequence = heads[run_id]
        heads[run_id] += 1
        if deleting and sequence and not deleted[run_id]:
            out.append(_event(run_id, sequence, deleting=True))
            deleted[run_id] = True
        else:
            out.append(_event(run_id, sequence, f"v{n}", creating=sequence == 0 or deleted[run_id]))
            deleted[run_id] = False
    return out


Frames = dict[tuple[str, bytes], list[bytes]]  # (subscriber, key) -> frames, in order


def _drive(
    events: list[RecordedEvent], cuts: Sequence[bool], cache_surfaces: int
) -> tuple[Frames, Frames]:
    """Plan ``events`` in batches (a new batch after each event ``cuts`` marks), applying each
    plan to a cache as the shell does and rebuilding each needed run from its own earlier
    events; the full subscriber's and the delta subscriber's frames, per key (the order a
    subscriber topic keeps)."""
    registry = _registry(("full", False), ("d", True))
    cache: OrderedDict[str, Entry] = OrderedDict()
    logged: list[tuple[int, RecordedEvent]] = []  # (offset, event) by partition below
    offsets = dict.fromkeys(range(PARTITIONS), 0)
    full: Frames = {}
    delta: Frames = {}
    pending: list[RecordedEvent] = []
    for n, recorded in enumerate(events):
        pending.append(recorded)
        if not (cuts[n % len(cuts)] if cuts else False) and n < len(events) - 1:
            continue
        by_partition: dict[int, list[Rec]] = {}
        for e in pending:
            p = partition_for_run(e["runId"], PARTITIONS)
            by_partition.setdefault(p, []).append(_rec(offsets[p], e))
            offsets[p] += 1
        pending = []
        batch = decode(by_partition, range(PARTITIONS), registry)
        rebuilt = {
            r: rebuild_run(r, [e for o, e in logged if e["runId"] == r and o < need.offset])
            for r, need in needed_runs(batch, cache, registry).items()
        }
        plan = _plan(
            batch, cache, rebuilt=rebuilt, registry=registry, cache_surfaces=cache_surfaces
        )
        for run_id, kept in plan.runs.items():
            entry = cache.pop(run_id, None) or Entry(kept.partition, kept.run)
            entry.run = kept.run
            entry.cursors.update(kept.cursors)
            cache[run_id] = entry
        for run_id in plan.evict:
            del cache[run_id]
        assert cache_surfaces >= 10 or len(cache) == 1
        for part in batch.partitions.values():
            logged += [(o, e) for o, _run, _seq, e in part.events if e is not None]
        for send in plan.sends:
            into = full if send.subscriber_id == "full" else delta
            into.setdefault((send.subscriber_id, send.key), []).append(send.value)
    return full, delta


_steps = st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(_steps, st.lists(st.booleans(), max_size=8))
def test_a_log_cut_into_any_batches_sends_what_one_batch_sends(
    steps: list[tuple[int, bool]], cuts: list[bool]
) -> None:
    events = _log(steps)
    assert _drive(events, cuts, 10_000) == _drive(events, [], 10_000)


@settings(max_examples=60, deadline=None)
@given(_steps, st.lists(st.booleans(), max_size=8))
def test_with_room_for_one_surface_a_full_subscriber_gets_the_same_frames(
    steps: list[tuple[int, bool]], cuts: list[bool]
) -> None:
    """Evicted runs are rebuilt from their own earlier events: the full subscriber's frames are
    those of the cache that never evicts. (A delta subscriber gets full frames instead of some
    deltas: the cursors leave with their run.)"""
    events = _log(steps)
    bounded_full, bounded_delta = _drive(events, cuts, 1)
    full, delta = _drive(events, cuts, 10_000)
    assert bounded_full == full
    assert {k: len(v) for k, v in bounded_delta.items()} == {k: len(v) for k, v in delta.items()}


# -- resync requests ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (b"not json", None),
        (b"[1]", None),
        (b'{"runId": "r", "surfaceId": "s"}', None),
        (b'{"subscriberId": "x", "runId": 7, "surfaceId": "s"}', None),
        (b'{"subscriberId": "x", "runId": "r", "surfaceId": ["s"]}', None),
        (
            b'{"subscriberId": "x", "runId": "t/run-a", "surfaceId": "s", "sequence": 3}',
            ResyncRequest("x", A, "s", None, partition_for_run(A, 4)),
        ),
        (
            orjson.dumps({"subscriberId": "x", "runId": A, "surfaceId": "~v1", "reason": DRIFT}),
            ResyncRequest("x", A, "~v1", DRIFT, partition_for_run(A, 4)),
        ),
    ],
)
def test_parse_resync(value: bytes, want: ResyncRequest | None) -> None:
    assert parse_resync(value, 4) == want


@pytest.mark.parametrize(
    ("value", "want"),
    [(b"nope", None), (b'"r"', None), (b'{"runId": 1}', None), (b'{"runId": "r"}', "r")],
)
def test_run_of_request(value: bytes, want: str | None) -> None:
    assert run_of_request(value) == want


def _request(sid: str = "d", surface: str = "s", reason: Any = None) -> ResyncRequest:
    return ResyncRequest(sid, A, surface, reason, 0)


def test_a_resync_for_a_run_without_events_is_not_answered() -> None:
    answer = answer_resync(
        _request(), (0, 7), cached=None, rebuilt={}, registry=_registry(("d", True)), policy=POLICY
    )
    assert answer is None


def test_a_resync_for_an_evicted_run_caches_the_rebuilt_run_and_answers_in_full() -> None:
    run = rebuild_run(A, [_event(A, 0), _event(A, 1)])
    answer = answer_resync(
        _request(),
        (3, 7),
        cached=None,
        rebuilt={A: run},
        registry=_registry(("d", True)),
        policy=POLICY,
    )
    assert answer is not None and answer.cache == run and answer.record is not None
    assert answer.record.headers == ((RESYNC_HEADER, b"3:7"),)
    assert answer.record.key == f"{A}/s".encode()
    assert (answer.record.subscriber_id, answer.record.kind, answer.record.reason) == (
        "d",
        "full",
        "resync",
    )
    frame = orjson.loads(answer.record.value)
    assert frame["resync"] is True and frame["sequence"] == 1
    assert frame["surface"] == run.projection.surfaces[SurfaceKey(A, "s")].content
    cursor = answer.cursors[("d", "s")]
    assert (cursor.sequence, cursor.resyncs, cursor.out_of_sync) == (1, 1, False)
    assert answer.drift is False


def test_a_resync_for_a_cached_run_counts_on_its_cursor() -> None:
    registry = _registry(("d", True))
    first = _plan(_batch((0, [_event(A, 0)])), registry=registry)
    entry = Entry(0, first.runs[A].run, dict(first.runs[A].cursors))
    answer = answer_resync(
        _request(reason=DRIFT), (0, 1), cached=entry, rebuilt={}, registry=registry, policy=POLICY
    )
    assert answer is not None and answer.cache is None and answer.drift is True
    assert answer.cursors[("d", "s")].resyncs == 1


@pytest.mark.parametrize(
    "request_", [_request(sid="nobody"), _request(surface="other")], ids=["unknown", "no-surface"]
)
def test_a_resync_nobody_can_use_sends_nothing_but_keeps_the_rebuilt_run(
    request_: ResyncRequest,
) -> None:
    run = rebuild_run(A, [_event(A, 0)])
    answer = answer_resync(
        request_,
        (0, 1),
        cached=None,
        rebuilt={A: run},
        registry=_registry(("d", True)),
        policy=POLICY,
    )
    assert answer is not None
    assert (answer.cache, answer.record, dict(answer.cursors)) == (run, None, {})


# -- catch-up -----------------------------------------------------------------------------


def test_a_late_subscriber_gets_every_live_surface_of_the_runs_it_follows() -> None:
    """Cached runs of the partition it follows (their cursors kept), then the rebuilt ones (not
    kept); other partitions', unfollowed runs and deleted surfaces send nothing."""
    c = [_event(C, 0, sid="gone"), _event(C, 1, sid="gone", deleting=True)]
    c += [_event(C, 2, sid="kept", creating=True)]
    cache = {
        A: Entry(0, rebuild_run(A, [_event(A, 0)])),
        B: Entry(1, rebuild_run(B, [_event(B, 0)])),  # another partition
        "t/other": Entry(0, rebuild_run("t/other", [_event("t/other", 0)])),  # not followed
        C: Entry(0, rebuild_run(C, c)),
    }
    sub = _registry(("late", False, [A, B, C, "t/rebuilt"]))["late"]
    rebuilt = {"t/rebuilt": rebuild_run("t/rebuilt", [_event("t/rebuilt", 0)])}
    planned = plan_catch_up(sub, 0, cache, rebuilt, POLICY)
    frames = [orjson.loads(s.value) for s in planned.sends]
    assert [(f["runId"], f["surfaceId"]) for f in frames] == [
        (A, "s"),
        (C, "kept"),
        ("t/rebuilt", "s"),
    ]
    assert [s.key for s in planned.sends] == [
        f"{f['runId']}/{f['surfaceId']}".encode() for f in frames
    ]
    assert {(s.kind, s.reason) for s in planned.sends} == {("full", "first")}
    assert {r: set(c) for r, c in planned.cursors.items()} == {
        A: {("late", "s")},
        C: {("late", "kept")},
    }
