"""The validator's restore folds: a partition's state, rebuilt on assignment (issue 15 item 1).

Role: pure folds over the records the shell read back (the Kafka Streams restore of a task's
state store from its changelog). Two ways, one result:

- ``restore_from_snapshot``: the changelog partition folded by ``read_changelog`` (one record
  per live run and the checkpoint), then only the log and dead-letter tail past the
  checkpoint's ``log_from`` / ``dead_from``: its events are folded onto the runs they continue
  and its ``a2ui-source`` headers give ``seen``. It answers None when the changelog and the
  log disagree (the log holds less than the checkpoint says, a tail event does not continue
  its run's sequence, a record it cannot read): the log is the source of truth, and then
- ``restore_partition``: today's replay, ``reduce(apply, log)`` per run over the whole log
  and dead-letter partitions.

A law (tests/core/test_run_snapshot.py) checks that both give the same runs, ``seen`` and
next offset for whatever the batch step wrote, cut into batches and crashed anywhere.
``catch_up`` is what to write to the changelog after a restore so that it holds the restored
state (every run after a replay; the runs the tail changed, and tombstones for the runs a
``runs delete`` dropped, after a snapshot).

Without transactions (``A2UI_STREAM_TRANSACTIONS=off``, tansu) the shell writes a batch's
changelog records only once its log and dead-letter appends are acknowledged, so the
changelog lags the log (a crash between the two: the tail holds those events) and never leads
it unless the log itself lost records, which the checks above send to the replay.

May import: the standard library, orjson and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.core.admission.fold import apply
from app.core.admission.validator_batch import PartitionState, Send, Stored, source_of
from app.core.runlog.events import parse_event
from app.core.runlog.keys import run_of_log_key
from app.core.runlog.run_lifecycle import TERMINAL_STATUSES
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

__all__ = [
    "Restored",
    "Snapshot",
    "catch_up",
    "decoded",
    "read_changelog",
    "restore_from_snapshot",
    "restore_partition",
    "tail_runs",
]


@dataclass(frozen=True, slots=True)
class Restored:
    """A partition's state rebuilt: the runs (a fresh dict, handed to the shell's store), the
    admission offsets at or past ``start`` whose outcome is already written (``seen``), where
    deciding starts (``start``: the committed offset, or the checkpoint's when that is later),
    and the lower bounds of the log and dead-letter offsets of the outputs still to come
    (``log_from``, ``dead_from``: the first ``seen`` output, else the end read)."""

    runs: dict[str, RunState]
    seen: frozenset[int]
    start: int = 0
    log_from: int = 0
    dead_from: int = 0
    # Runs restored as the changelog holds them, still encoded (``Snapshot.raw`` that the
    # tail did not touch): part of the state, kept out of memory by the shell.
    raw: Mapping[str, bytes] = field(default_factory=dict)

    def state(self, committed: int | None = None) -> PartitionState:
        """The partition's state, resumed at ``committed`` (default: where the restore ended)."""
        start = self.start if committed is None else committed
        return PartitionState(self.runs, start, self.seen, self.log_from, self.dead_from)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A changelog partition folded: the latest state of each run (tombstones applied) and
    the partition's checkpoint (None: the partition was never written, e.g. a deployment
    older than the changelog, or a changelog that was deleted)."""

    runs: dict[str, RunState]
    checkpoint: Checkpoint | None
    # States not decoded (``read_changelog(decode=False)``): a restore decodes only the runs
    # its log tail continues (``decoded``); the shell keeps the rest as they are, out of
    # memory (its local store), so a restart does not decode every live run at once.
    raw: Mapping[str, bytes] = field(default_factory=dict)


class _Seen:
    """Outputs naming a source at or past ``start`` on ``partition``, and the first offset of
    such an output in the topic read."""

    def __init__(self, partition: int, start: int, end: int) -> None:
        self.partition, self.start = partition, start
        self.offsets: set[int] = set()
        self.first = end

    def note(self, record: Stored) -> None:
        source = source_of(record.headers)
        if source is not None and source[0] == self.partition and source[1] >= self.start:
            self.offsets.add(source[1])
            self.first = min(self.first, record.offset)


def read_changelog(
    partition: int, records: Iterable[Stored], *, decode: bool = True
) -> Snapshot | None:
    """The changelog partition's records, latest per key (as compaction keeps them; only the
    latest of each run is decoded, and with ``decode=False`` none: they stay in
    ``Snapshot.raw``). None when a record is not one this version wrote: the partition is
    then replayed from the log."""
    latest: dict[bytes, bytes | None] = {}
    for record in records:
        if record.key is None:
            return None
        latest[record.key] = record.value
    point = latest.pop(CHECKPOINT_KEY, None)
    checkpoint = None if point is None else decode_checkpoint(point)
    if point is not None and (checkpoint is None or checkpoint.partition != partition):
        return None
    runs: dict[str, RunState] = {}
    raw: dict[str, bytes] = {}
    for key, value in latest.items():
        if value is None:
            continue  # a tombstone: the run was deleted
        try:
            run_id = key.decode()
        except UnicodeDecodeError:
            return None
        if not decode:
            raw[run_id] = value
            continue
        state = decode_state(run_id, value)
        if state is None:
            return None
        runs[run_id] = state
    return Snapshot(runs, checkpoint, raw)


def tail_runs(log: Iterable[Stored]) -> set[str]:
    """The runs a log tail's records name (by key): those a restore folds onto."""
    return {run_of_log_key(record.key) for record in log if record.key is not None}


def decoded(snapshot: Snapshot, run_ids: Iterable[str]) -> Snapshot | None:
    """``snapshot`` with the states of ``run_ids`` decoded (moved from ``raw`` to ``runs``);
    None when one of them is not a state this version wrote (then: replay the log)."""
    raw, runs = dict(snapshot.raw), dict(snapshot.runs)
    for run_id in run_ids:
        value = raw.pop(run_id, None)
        if value is None:
            continue
        state = decode_state(run_id, value)
        if state is None:
            return None
        runs[run_id] = state
    return Snapshot(runs, snapshot.checkpoint, raw)


def restore_from_snapshot(
    partition: int,
    committed: int,
    snapshot: Snapshot,
    log: Iterable[Stored],
    dead: Iterable[Stored],
    *,
    log_end: int,
    dead_end: int,
) -> Restored | None:
    """The snapshot plus the log and dead-letter records from the checkpoint's ``log_from``
    and ``dead_from`` on (read up to ``log_end`` and ``dead_end``, the partitions' end offsets);
    None when they disagree (module docstring)."""
    checkpoint = snapshot.checkpoint
    if checkpoint is None or log_end < checkpoint.log_from or dead_end < checkpoint.dead_from:
        return None  # the log holds less than the changelog says: it was deleted or truncated
    if log_end == 0 and (snapshot.runs or snapshot.raw):
        return None
    start = max(committed, checkpoint.next_offset)
    runs = dict(snapshot.runs)
    touched: set[str] = set()
    seen_log, seen_dead = _Seen(partition, start, log_end), _Seen(partition, start, dead_end)
    for record in log:
        if record.key is None:
            continue
        run_id = run_of_log_key(record.key)
        if run_id in snapshot.raw:
            return None  # not decoded (``decoded`` was not given the tail): never guess
        if record.value is None:  # `runs delete` (a tombstone per event): the run is gone
            runs.pop(run_id, None)
            touched.discard(run_id)
            continue
        event = parse_event(record.value)
        if event is None:
            return None
        sequence = event["sequence"]
        state = runs.get(run_id) or RunState.initial(run_id)
        if sequence >= state.next_sequence:
            if sequence > state.next_sequence or state.lifecycle.status in TERMINAL_STATUSES:
                return None  # not the run's next event: the changelog is not this log's
            runs[run_id] = apply(state, event)
            touched.add(run_id)
        seen_log.note(record)
    for record in dead:
        seen_dead.note(record)
    for run_id in touched:
        runs[run_id] = compact(runs[run_id])
    return Restored(
        runs,
        frozenset(seen_log.offsets | seen_dead.offsets),
        start,
        seen_log.first,
        seen_dead.first,
        snapshot.raw,
    )


def restore_partition(
    partition: int,
    committed: int,
    log: Iterable[Stored],
    dead: Iterable[Stored],
    *,
    log_end: int = 0,
    dead_end: int = 0,
) -> Restored:
    """``reduce(apply, log)`` per run, in log order: the state ``decide`` needs is the log
    itself, folded by the function that made it (a property test checks replay = live), with
    the runs that ended compacted (app.core.runlog.run_snapshot). A tombstone (``runs delete``)
    drops the run. Outputs naming a source at or past ``committed`` on ``partition`` are ``seen``:
    their records must not be decided again."""
    runs: dict[str, RunState] = {}
    seen_log, seen_dead = (
        _Seen(partition, committed, log_end),
        _Seen(partition, committed, dead_end),
    )
    for record in log:
        if record.key is None:
            continue
        run_id = run_of_log_key(record.key)
        if record.value is None:
            runs.pop(run_id, None)
            continue
        event = parse_event(record.value)
        if event is not None:  # else not a recorded event (never written so): no run's
            runs[run_id] = apply(runs.get(run_id) or RunState.initial(run_id), event)
        seen_log.note(record)
    for record in dead:
        seen_dead.note(record)
    for run_id, state in runs.items():
        runs[run_id] = compact(state)
    return Restored(
        runs,
        frozenset(seen_log.offsets | seen_dead.offsets),
        committed,
        seen_log.first,
        seen_dead.first,
    )


def catch_up(
    topic: str, partition: int, before: Snapshot | None, restored: Restored
) -> tuple[Send, ...]:
    """The changelog records that make partition ``partition`` of ``topic`` hold ``restored``:
    the runs that differ from ``before`` (all of them when there was none), a tombstone for
    each run it held that is gone, and the checkpoint; nothing when it holds them already."""
    held: Mapping[str, RunState] = {} if before is None else before.runs
    written: Mapping[str, bytes] = {} if before is None else before.raw  # not decoded
    sends: list[Send] = []
    for run_id, state in restored.runs.items():
        if run_id in written:  # compared as written (decoding it would cost as much)
            encoded = encode_state(state)
            if encoded != written[run_id]:
                sends.append(Send(topic, partition, run_id.encode(), encoded, ()))
        elif held.get(run_id) != state:
            sends.append(Send(topic, partition, run_id.encode(), encode_state(state), ()))
    sends += [
        Send(topic, partition, run_id.encode(), value, ())
        for run_id, value in restored.raw.items()
        if written.get(run_id) != value
    ]
    kept = restored.runs.keys() | restored.raw.keys()
    sends += [
        Send(topic, partition, r.encode(), None, ()) for r in (*held, *written) if r not in kept
    ]
    checkpoint = Checkpoint(partition, restored.start, restored.log_from, restored.dead_from)
    if sends or before is None or before.checkpoint != checkpoint:
        sends.append(Send(topic, partition, CHECKPOINT_KEY, encode_checkpoint(checkpoint), ()))
    return tuple(sends)
