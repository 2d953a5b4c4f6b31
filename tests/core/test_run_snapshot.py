"""The run-state changelog (app/core/runlog/run_snapshot.py) and the restore from it
(app/core/admission/validator_restore.py): its records round-trip, a run that ended is compacted
without changing a decision, and the law: restoring from the changelog and the log tail gives what
replaying the whole log gives, for whatever the batch step wrote, cut into batches anyhow,
with changelog flushes only every few batches (the commit interval), with batches whose
changelog records were lost (a broker without transactions going away between the log appends
and the changelog) and restores anywhere."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import jsonschema
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.admission.command_seal import HEADER, seal
from app.core.admission.fold import apply
from app.core.admission.policy import HostPolicy
from app.core.admission.validator import SourceRecord, validate
from app.core.admission.validator_batch import (
    PartitionPlan,
    PartitionState,
    Send,
    Topics,
    plan_batch,
)
from app.core.admission.validator_changelog import advanced, changelog_sends, checkpoint
from app.core.admission.validator_restore import (
    catch_up,
    decoded,
    read_changelog,
    restore_from_snapshot,
    restore_partition,
    tail_runs,
)
from app.core.runlog.run_snapshot import (
    CHECKPOINT_KEY,
    Checkpoint,
    compact,
    decode_checkpoint,
    decode_state,
    encode_checkpoint,
    encode_state,
)
from app.core.runlog.run_state import RunState
from app.devtools.fault_kit import RULES, corpus
from app.shell.schema_files import load_schema_documents

TOPICS = Topics("log", "dead", "resumes", 1, 1_048_576, "state")
KEY = b"k" * 32
POLICY = HostPolicy(command_key=KEY)
NOW = "2026-12-01T00:00:00Z"


@dataclass
class Stored:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)


def _command(
    run: str, command: dict[str, object]
) -> tuple[bytes, bytes, tuple[tuple[str, bytes], ...]]:
    value = orjson.dumps({"runId": run, "command": command})
    return run.encode(), value, ((HEADER, seal(KEY, value)),)


def _stream(seed: int) -> list[SourceRecord]:
    """The fault corpus (one partition) with sealed host commands mixed in: runs created,
    some through the approval gate, some resolved, some cancelled (terminal) mid-stream."""
    rng = random.Random(seed)
    raw: list[tuple[bytes | None, bytes, tuple[tuple[str, bytes], ...]]] = []
    runs: list[str] = []
    for rec in corpus(runs=5, per_run=16, seed=seed):
        if rec.run not in runs:
            runs.append(rec.run)
            workflow = "conformance-approval" if rng.random() < 0.5 else "w"
            raw.append(_command(rec.run, {"type": "run.create", "workflowId": workflow}))
        raw.append((rec.key, rec.value, ()))
        roll = rng.random()
        if roll < 0.04:
            raw.append(_command(rec.run, {"type": "run.cancel"}))
        elif roll < 0.08:
            raw.append(_command(rec.run, {"type": "interrupt.resolve", "nodeId": "gate"}))
    return [SourceRecord("adm", 0, i, k, v, h) for i, (k, v, h) in enumerate(raw)]


class Topic(list[Stored]):
    def append_send(self, send: Send) -> None:
        self.append(Stored(len(self), send.key, send.value, list(send.headers)))

    def end(self) -> int:
        return len(self)


def _plan(records: list[SourceRecord], state: PartitionState) -> PartitionPlan:
    planned = plan_batch(
        {0: records},
        {0: state},
        gathered=0,
        generation=0,
        policy=POLICY,
        rules=RULES,
        now=NOW,
        topics=TOPICS,
    )
    assert isinstance(planned, tuple), planned  # neither a Refetch nor a Load
    [plan] = planned or (PartitionPlan(0, (), state.next_offset, {}, state.seen, ()),)
    return plan


def _outputs(plan: PartitionPlan) -> list[tuple[str, bytes | None, bytes | None]]:
    return [(s.topic, s.key, s.value) for s in plan.sends if s.topic != "state"]


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    cuts=st.lists(st.integers(1, 40), min_size=1, max_size=12),
    lost=st.lists(st.booleans(), min_size=12, max_size=12),
    restores=st.lists(st.booleans(), min_size=12, max_size=12),
    flushes=st.lists(st.integers(0, 6), min_size=12, max_size=12),
)
def test_a_restore_from_the_changelog_equals_a_replay_of_the_log(  # noqa: C901 - the law simulates the loop's batches
    seed: int, cuts: list[int], lost: list[bool], restores: list[bool], flushes: list[int]
) -> None:
    """``flushes[i]``: how many run states batch i's commit writes (0: no flush, 6: all of
    them; the loop's ``changelog_flush_runs`` and ``changelog_flush_bytes``). A flush writes
    the runs dirty when it began, spread over batches however busy they are meanwhile, and
    its last batch writes the checkpoint naming the log and dead-letter ends from before its
    first (the loop's ``_Flush``)."""
    stream = _stream(seed)
    log, dead, changelog = Topic(), Topic(), Topic()
    runs: dict[str, RunState] = {}
    dirty: dict[str, RunState] = {}  # changed since the last flush (the loop's commit interval)
    todo: list[str] = []  # a flush under way: the runs it has still to write
    began = PartitionState(runs, 0)  # ... and the state before its first batch
    state = PartitionState(runs, 0)
    committed = 0
    first = 0
    for i, size in enumerate([*cuts, len(stream)]):
        batch = stream[first : first + size]
        first += size
        plan = _plan(batch, state)
        log_end = dead_end = None
        for send in plan.sends:
            if send.topic == "log":
                log.append_send(send)
                log_end = log.end()
            elif send.topic == "dead":
                dead.append_send(send)
                dead_end = dead.end()
        if i < len(lost) and lost[i]:
            # Without transactions: the outputs landed, the changelog records and the offset
            # commit did not; the loop drops the partition and takes it again (a restore).
            restore = True
        else:
            ends = {"log": log_end or 0, "deadletter": dead_end or 0}
            most = 1_000 if i >= len(flushes) or flushes[i] == 6 else flushes[i]
            latest = {**dirty, **plan.runs}
            if plan.checkpointed and (most or todo):
                if not todo:  # a flush begins
                    todo, began = list(latest), state
                written = {r: latest.get(r) or runs[r] for r in todo[: max(1, most)]}
                for send in changelog_sends("state", 0, written):
                    changelog.append_send(send)
                del todo[: len(written)]
                if not todo:
                    changelog.append_send(checkpoint("state", began, plan, {}))
                dirty = {r: s for r, s in latest.items() if r not in written}
            else:
                dirty = latest
            committed = plan.next_offset
            log_from, dead_from = advanced(state, plan, ends)  # the loop's install
            runs.update(plan.runs)
            state = PartitionState(runs, plan.next_offset, plan.seen, log_from, dead_from)
            restore = i < len(restores) and restores[i]
        if restore or first >= len(stream):
            snapshot = read_changelog(0, changelog)
            replayed = restore_partition(
                0, committed, log, dead, log_end=log.end(), dead_end=dead.end()
            )
            if snapshot is None or snapshot.checkpoint is None:
                # never flushed whole (or nothing written yet): the replay it is, as the loop
                restored = replayed
            else:
                point = snapshot.checkpoint
                found = restore_from_snapshot(
                    0,
                    committed,
                    snapshot,
                    log[point.log_from :],
                    dead[point.dead_from :],
                    log_end=log.end(),
                    dead_end=dead.end(),
                )
                assert found is not None
                restored = found
                assert restored.runs == replayed.runs
                # The way of a bounded validator: only the runs the tail continues decoded,
                # the others kept as they were written; together, the same state.
                raw = read_changelog(0, changelog, decode=False)
                assert raw is not None
                lazy = decoded(raw, tail_runs(log[point.log_from :]))
                assert lazy is not None
                lazily = restore_from_snapshot(
                    0,
                    committed,
                    lazy,
                    log[point.log_from :],
                    dead[point.dead_from :],
                    log_end=log.end(),
                    dead_end=dead.end(),
                )
                assert lazily is not None
                assert lazily.raw == lazy.raw  # the untouched runs, as written
                untouched = {r: decode_state(r, v) for r, v in lazily.raw.items()}
                assert {**untouched, **lazily.runs} == restored.runs
                assert not set(untouched) & set(lazily.runs)
                # ... and its catch-up leaves the changelog holding the same state
                copy = Topic(changelog)
                for send in catch_up("state", 0, lazy, lazily):
                    copy.append_send(send)
                again = read_changelog(0, copy)
                assert again is not None and again.runs == restored.runs
                assert (lazily.seen, lazily.start, lazily.log_from, lazily.dead_from) == (
                    restored.seen,
                    restored.start,
                    restored.log_from,
                    restored.dead_from,
                )
                # Deciding the rest of the stream from either gives the same outputs.
                rest = stream[min(replayed.start, restored.start) :]
                assert _outputs(_plan(rest, restored.state())) == _outputs(
                    _plan(rest, replayed.state())
                )
            for send in catch_up("state", 0, snapshot, restored):
                changelog.append_send(send)
            caught = read_changelog(0, changelog)
            assert caught is not None and caught.runs == restored.runs
            runs = dict(restored.runs)
            dirty, todo = {}, []
            state = restored.state()
            state = PartitionState(
                runs, state.next_offset, state.seen, state.log_from, state.dead_from
            )
            committed = max(committed, restored.start)
        if first >= len(stream):
            break


def _folded(seed: int) -> dict[str, RunState]:
    stream = _stream(seed)
    return {**restore_partition(0, 0, [], []).runs, **_plan(stream, PartitionState({}, 0)).runs}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_run_state_round_trips_and_fits_its_schema(seed: int) -> None:
    schema = load_schema_documents()["run-state"]
    runs = _folded(seed)
    assert runs
    for run_id, state in runs.items():
        value = encode_state(state)
        jsonschema.validate(orjson.loads(value), schema)
        assert decode_state(run_id, value) == state
        assert decode_state("another/run", value) is None  # not this key's
    checkpoint = Checkpoint(0, 17, 40, 3)
    jsonschema.validate(orjson.loads(encode_checkpoint(checkpoint)), schema)
    assert decode_checkpoint(encode_checkpoint(checkpoint)) == checkpoint


@pytest.mark.parametrize("value", [b"{", b"[]", b'{"format": 2, "state": {}}', b'{"format": 1}'])
def test_a_record_this_version_cannot_read_sends_the_restore_to_the_replay(value: bytes) -> None:
    assert decode_state("r", value) is None and decode_checkpoint(value) is None
    assert read_changelog(0, [Stored(0, b"r", value)]) is None
    assert read_changelog(0, [Stored(0, CHECKPOINT_KEY, value)]) is None


def test_a_run_that_ended_is_compacted_and_decided_the_same() -> None:
    """A cancelled run keeps its sequence, status and lineage only; every envelope and
    command of the stream is decided for it exactly as for its whole state."""
    stream = _stream(5)
    plan = _plan(stream, PartitionState({}, 0))
    whole: dict[str, RunState] = {}
    for send in plan.sends:
        if send.topic == "log" and send.value is not None:
            event = orjson.loads(send.value)
            run_id = event["runId"]
            whole[run_id] = apply(whole.get(run_id) or RunState.initial(run_id), event)
    ended = {r for r, s in whole.items() if s.lifecycle.status == "cancelled"}
    assert ended, "the stream cancels some run"
    for run_id in ended:
        assert plan.runs[run_id] == compact(whole[run_id])
        assert not plan.runs[run_id].surfaces and not plan.runs[run_id].correlations
    assert any(compact(whole[r]) != whole[r] for r in ended)  # something left memory
    compacted = {r: compact(s) for r, s in whole.items()}
    for record in stream:
        if record.key is None or record.key.decode(errors="replace") not in ended:
            continue
        assert validate(record, compacted.get, POLICY, RULES, now=NOW, partitions=1) == validate(
            record, whole.get, POLICY, RULES, now=NOW, partitions=1
        )
