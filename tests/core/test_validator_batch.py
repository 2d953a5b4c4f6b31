"""The validator's batch step (app/core/admission/validator_batch.py): which records are decided,
what is written where, which offset is committed, what a batch gathered across a rebalance becomes;
and its laws: a batch decides as the oracle does record by record, however it is cut, and the
restore fold of what a plan wrote is the state the plan left (replay = live)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson
import pytest

from app.core.admission.host_commands_call import ForkSource, host_event
from app.core.admission.policy import HostPolicy
from app.core.admission.validator import Append, AppendMany, Reject, SourceRecord, validate
from app.core.admission.validator_batch import (
    SOURCE_HEADER,
    TYPE_HEADER,
    Load,
    PartitionPlan,
    PartitionState,
    Refetch,
    Send,
    Topics,
    plan_batch,
    plan_unrecordable,
    source_of,
)
from app.core.admission.validator_forks import fork_events
from app.core.admission.validator_restore import restore_partition
from app.core.runlog.keys import log_key, partition_for_run
from app.core.runlog.run_state import RunState
from app.devtools.fault_kit import RULES, corpus

PARTITIONS = 3
TOPICS = Topics("log", "dead", "resumes", PARTITIONS, 1_048_576)
NOW = "2026-12-01T00:00:00Z"
POLICY = HostPolicy()


@dataclass
class Stored:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    offset: int = 0


def _admission(seed: int = 3) -> dict[int, list[SourceRecord]]:
    by_partition: dict[int, list[SourceRecord]] = {p: [] for p in range(PARTITIONS)}
    for rec in corpus(runs=6, per_run=30, seed=seed):
        p = partition_for_run(rec.run, PARTITIONS)
        by_partition[p].append(SourceRecord("adm", p, len(by_partition[p]), rec.key, rec.value))
    return by_partition


def _fresh(next_offset: int = 0) -> PartitionState:
    return PartitionState({}, next_offset)


def _plan(
    batch: dict[int, list[SourceRecord]], owned: dict[int, PartitionState]
) -> tuple[PartitionPlan, ...]:
    plans = plan_batch(
        batch, owned, gathered=1, generation=1, policy=POLICY, rules=RULES, now=NOW, topics=TOPICS
    )
    assert isinstance(plans, tuple), plans  # neither a Refetch nor a Load
    return plans


def _oracle(records: Sequence[SourceRecord]) -> list[tuple[str, bytes | None, bytes]]:
    """(topic, key, value) of every output, deciding record by record with ``validate``."""
    states: dict[str, RunState] = {}
    out: list[tuple[str, bytes | None, bytes]] = []
    for rec in records:
        decided = validate(
            rec, states.get, POLICY, RULES, now=NOW, partitions=PARTITIONS, max_bytes=1_048_576
        )
        if isinstance(decided, Append):
            states[decided.run_id] = decided.state
            out.append(("log", decided.key, decided.value))
        elif isinstance(decided, AppendMany):
            states[decided.run_id] = decided.state
            out += [("log", key, value) for _seq, key, value in decided.records]
        elif isinstance(decided, Reject):
            out.append(("dead", decided.key, decided.value))
    return out


def test_a_batch_decides_as_the_oracle_and_routes_to_its_partition() -> None:
    batch = _admission()
    plans = _plan(batch, {p: _fresh() for p in batch})
    assert sorted(plan.partition for plan in plans) == [0, 1, 2]
    for plan in plans:
        records = batch[plan.partition]
        assert [(s.topic, s.key, s.value) for s in plan.sends] == _oracle(records)
        assert {s.partition for s in plan.sends} == {plan.partition}  # co-partitioned
        for send in plan.sends:
            assert source_of(send.headers) is not None
            assert send.headers[0][0] == SOURCE_HEADER
            # every log record names its event's type (the read side files it unparsed)
            typed = dict(send.headers).get(TYPE_HEADER)
            if send.topic == TOPICS.log:
                assert send.value is not None
                assert typed == orjson.loads(send.value)["type"].encode()
            else:
                assert typed is None
        assert plan.next_offset == records[-1].offset + 1
        assert len(plan.counts) == len(records)
        kinds = {outcome for outcome, _code in plan.counts}
        assert kinds == {"admitted", "refused", "deduplicated"}


@pytest.mark.parametrize("cut", [1, 7, 40])
def test_how_a_stream_is_cut_into_batches_changes_nothing(cut: int) -> None:
    records = _admission()[0]
    whole = _plan({0: records}, {0: _fresh()})[0]
    runs: dict[str, RunState] = {}
    state, sends = _fresh(), list[Send]()
    for first in range(0, len(records), cut):
        [plan] = _plan({0: records[first : first + cut]}, {0: state})
        runs.update(plan.runs)  # what the shell's store does once a plan is committed
        state = PartitionState(runs, plan.next_offset, plan.seen)
        sends += plan.sends
    assert sends == list(whole.sends) and state.next_offset == whole.next_offset
    assert runs == whole.runs


def test_records_already_decided_are_skipped_and_the_offset_never_goes_back() -> None:
    records = _admission()[1]
    # The batch holds records fetched twice (a fetch position moved back while it gathered).
    doubled = records[:20] + records[10:20]
    [plan] = _plan({1: doubled}, {1: _fresh()})
    [once] = _plan({1: records[:20]}, {1: _fresh()})
    assert plan.sends == once.sends and plan.next_offset == 20
    assert [c for c in plan.counts if c[0] == "skipped"] == [("skipped", None)] * 10
    # Records below the state's next offset, or whose outcome is written (seen), are skipped;
    # the committed offset is never below the state's.
    [later] = _plan({1: records[:5]}, {1: _fresh(12)})
    assert later.sends == () and later.next_offset == 12
    seen = PartitionState({}, 0, frozenset({0, 1, 2}))
    [skips] = _plan({1: records[:3]}, {1: seen})
    assert skips.sends == () and skips.next_offset == 3 and skips.seen == frozenset()


def test_partitions_not_owned_are_not_decided() -> None:
    batch = _admission()
    plans = _plan(batch, {1: _fresh()})  # 0 revoked, 2 not restored yet (or fenced)
    assert [plan.partition for plan in plans] == [1]
    assert _plan({1: []}, {1: _fresh()}) == ()


def test_a_batch_gathered_across_a_rebalance_is_fetched_again() -> None:
    owned = {0: _fresh(5), 2: _fresh(9)}
    planned = plan_batch(
        _admission(),
        owned,
        gathered=3,
        generation=4,
        policy=POLICY,
        rules=RULES,
        now=NOW,
        topics=TOPICS,
    )
    assert planned == Refetch({0: 5, 2: 9})


def test_restoring_what_a_plan_wrote_gives_the_state_it_left() -> None:
    records = _admission()[2]
    [plan] = _plan({2: records}, {2: _fresh()})
    log = [Stored(s.key, s.value, list(s.headers)) for s in plan.sends if s.topic == "log"]
    dead = [Stored(s.key, s.value, list(s.headers)) for s in plan.sends if s.topic == "dead"]
    restored = restore_partition(2, plan.next_offset, log, dead)
    assert restored.runs == plan.runs and restored.seen == frozenset()
    # Committed below what was written (a broker without transactions, a crash between the
    # writes and the commit): those records' outcomes are seen, not decided again.
    behind = restore_partition(2, 10, log, dead)
    written = {source_of(s.headers)[1] for s in plan.sends}  # type: ignore[index]
    assert behind.seen == frozenset(o for o in written if o >= 10)
    # Decided again from there, nothing is written twice (the rest are E2 duplicates).
    again = _plan({2: records}, {2: behind.state(10)})[0]
    assert again.sends == () and again.next_offset == plan.next_offset
    # Outputs of another partition's records are not this partition's.
    assert restore_partition(1, 0, log, dead).seen == frozenset()


def test_a_tombstone_removes_the_run_and_keyless_records_are_ignored() -> None:
    records = _admission()[2]
    [plan] = _plan({2: records}, {2: _fresh()})
    log = [Stored(s.key, s.value, list(s.headers)) for s in plan.sends if s.topic == "log"]
    run = next(iter(plan.runs))
    tombstones = [Stored(log_key(run, 0), None)]
    restored = restore_partition(2, plan.next_offset, [*log, *tombstones, Stored(None, b"{}")], [])
    assert run not in restored.runs and set(restored.runs) == set(plan.runs) - {run}


def test_an_unrecordable_record_keeps_its_digest_not_its_bytes() -> None:
    record = _admission()[0][4]
    plan = plan_unrecordable(
        record,
        "MessageSizeTooLargeError",
        PartitionState({}, 4, frozenset({4, 9})),
        POLICY,
        NOW,
        TOPICS,
    )
    [send] = plan.sends
    assert send.value is not None
    letter = orjson.loads(send.value)
    assert (send.topic, send.partition) == ("dead", 0)
    assert letter["code"] == "record_unrecordable" and letter["original"]["base64"] == ""
    assert letter["details"]["error"] == "MessageSizeTooLargeError"
    assert source_of(send.headers) == (0, 4)
    assert plan.next_offset == 5 and plan.seen == frozenset({9})
    assert plan.counts == (("refused", "record_unrecordable"),)


def test_a_fork_source_is_the_source_runs_events_in_sequence_order() -> None:
    def event(run: str, seq: int) -> Stored:
        value = orjson.dumps(host_event(run, seq, "run.created", {}, event_id=f"e{seq}", now=NOW))
        return Stored(log_key(run, seq), value)

    records = [event("src", 1), event("other", 0), event("src", 0), event("src", 2)]
    source = ForkSource("src", 2, 0, 0, 3)
    assert [e["sequence"] for e in fork_events(source, records)] == [0, 1]
    assert source_of([("x", b"1"), (SOURCE_HEADER, b"2:17")]) == (2, 17)
    assert source_of(None) is None


def test_a_record_for_an_evicted_run_waits_for_its_state() -> None:
    """Issue 15: a run whose state the shell keeps out of memory (``PartitionState.evicted``)
    is never decided as a run with no recorded event: the batch answers ``Load`` (nothing
    decided, nothing written) until the state is back in ``runs``; then it decides as if the
    state had never left. The shell loads by record key first; a keyless record is this
    path."""
    records = _admission()[0]
    p = records[0].partition
    *before, last = records
    [plan] = _plan({p: before}, {p: _fresh()})
    assert last.value is not None
    run_id = orjson.loads(last.value)["runId"]
    assert run_id in plan.runs
    keyless = SourceRecord("adm", p, last.offset, None, last.value)
    state = dict(plan.runs)
    evicted = PartitionState(
        {k: v for k, v in state.items() if k != run_id}, last.offset, evicted={run_id}
    )
    answer = plan_batch(
        {p: [keyless]},
        {p: evicted},
        gathered=1,
        generation=1,
        policy=POLICY,
        rules=RULES,
        now=NOW,
        topics=TOPICS,
    )
    assert answer == Load({p: frozenset({run_id})})
    loaded = PartitionState(state, last.offset, evicted=set())
    held = PartitionState(state, last.offset)
    [decided] = _plan({p: [keyless]}, {p: loaded})
    assert (decided,) == _plan({p: [keyless]}, {p: held})
    assert decided.sends and decided.counts == (("admitted", None),)
