"""The validator's batch step: what one fetched batch turns into.

Role: pure decisions over values (the Kafka Streams split between a task's processing and its
driver). The shell's validator loop fetches a batch of admission records, calls ``plan_batch``
once and performs what it returns: per owned partition, the records to write (topic,
partition, key, value, headers), the admission offset to commit with them (in that
partition's own transaction, docs/pipeline.md "Exactly once"), and the run states to keep once
that commit succeeded; or, for a batch gathered across a rebalance, the positions to fetch it
again from. With a changelog topic (``Topics.changelog``) the shell flushes, with a plan and in
its transaction (at most once a commit interval, as Kafka Streams' changelog), the latest state
of every run changed since the last flush and, once its appends are acknowledged, the
partition's checkpoint (app.core.admission.validator_changelog), from which
``app.core.admission.validator_restore`` rebuilds a partition; ``plan_unrecordable`` is the
last-resort outcome of a record whose outcome the broker refuses to take. The log ranges a
batch's fork commands need read first are app.core.admission.validator_forks'.

The rules it applies (each found by a fault scenario, docs/reliability.md):

- offsets only grow: a record below the partition's next offset to decide was decided already
  (before the offset its state was rebuilt for, or earlier in this very batch after a fetch
  position moved back) and is never decided again; nor is a record whose outcome the log or
  the dead letters already hold (``seen``: a broker without transactions, docs/pipeline.md);
- the offset committed is the next one to decide, never lower than the state's;
- a partition the loop does not own (not yet restored, revoked, fenced) is not decided;
- a batch gathered while the loop's generation changed (an assignment, a revocation, a restore
  moving a fetch position) may hold the same records twice: it is dropped and fetched again.

May import: the standard library, orjson and app.core.* (pure). No aiokafka, no asyncio.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from app.core.admission.dead_letter import dead_letter, redact_bytes
from app.core.admission.host_commands_call import ForkSource
from app.core.admission.payload_rules import PayloadRules
from app.core.admission.policy import HostPolicy
from app.core.admission.rules import RECORD_WRITE, refuse
from app.core.admission.validator import (
    Append,
    AppendMany,
    Duplicate,
    Reject,
    SourceRecord,
    letter_secrets,
    validate,
)
from app.core.runlog.run_snapshot import compact
from app.core.runlog.run_state import RunState

__all__ = [
    "SOURCE_HEADER",
    "TYPE_HEADER",
    "PartitionPlan",
    "PartitionState",
    "Load",
    "Refetch",
    "Send",
    "Stored",
    "Topics",
    "plan_batch",
    "plan_unrecordable",
    "source_of",
]

# Every output names the admission record it came from: ``a2ui-source: <partition>:<offset>``.
SOURCE_HEADER = "a2ui-source"
# On every log record the validator writes: the recorded event's ``type``, so the read side
# files an event (its run's status, the store's summary) without parsing it (issue 16: each
# record decoded at most once per process; docs/pipeline.md).
TYPE_HEADER = "a2ui-type"


@dataclass(frozen=True, slots=True)
class Topics:
    """Where the outcomes go, and the admission topic's limits."""

    log: str
    deadletter: str
    resumes: str
    partitions: int  # of the admission topic (= of the log and dead letters: co-partitioned)
    max_bytes: int  # admission records larger are record_too_large before parsing
    changelog: str = ""  # the run-state changelog (app.core.runlog.run_snapshot); "" writes none


@dataclass(frozen=True, slots=True)
class Send:
    """One record to produce."""

    topic: str
    partition: int
    key: bytes | None
    value: bytes | None  # None: a tombstone (the changelog's, for a deleted run)
    headers: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What the step knows of one owned, restored admission partition. ``runs`` is read here,
    never written: it is the shell's store, which the shell updates with a plan's ``runs``
    once the plan is committed (a copy per batch would cost as much as the store is large)."""

    runs: Mapping[str, RunState]
    next_offset: int  # the next admission offset to decide
    seen: frozenset[int] = frozenset()  # offsets at or past it whose outcome is written
    # Lower bounds of the log and dead-letter offsets of every output of the records from
    # ``next_offset`` on (``seen`` included): the checkpoint a plan writes carries them.
    log_from: int = 0
    dead_from: int = 0
    # Runs whose state the shell keeps out of memory (in its local store, bounded memory:
    # issue 15): a record for one of them is not decided until the shell has put its state
    # back into ``runs`` (``Load``); a run in neither has no recorded event.
    evicted: Set[str] = frozenset()


@dataclass(frozen=True, slots=True)
class PartitionPlan:
    """One partition's share of a batch: write ``sends`` and commit ``next_offset``, atomically
    (one transaction); only then keep ``runs`` (the runs it changed), ``next_offset`` and
    ``seen``, and count ``counts`` ((outcome, code) per record)."""

    partition: int
    sends: tuple[Send, ...]
    next_offset: int
    runs: Mapping[str, RunState]
    seen: frozenset[int]
    counts: tuple[tuple[str, str | None], ...]
    drifts: tuple[tuple[str, int, int], ...] = ()  # (runId, sequence, from): schema drift
    # The plan moved the partition (runs changed, the offset advanced): a changelog flush with
    # it writes ``changelog_sends`` of the runs changed since the last flush beside ``sends``,
    # and the ``checkpoint`` once they are acknowledged (it names where they ended; both are
    # app.core.admission.validator_changelog's).
    checkpointed: bool = False


@dataclass(frozen=True, slots=True)
class Refetch:
    """Drop the batch and fetch every owned partition again from ``positions``."""

    positions: Mapping[int, int]


@dataclass(frozen=True, slots=True)
class Load:
    """Nothing decided: put these evicted runs' states back into ``PartitionState.runs`` (per
    partition) and plan the same batch again. The shell loads the runs a batch's record keys
    name before it plans, so this answers only records whose key does not name their run."""

    runs: Mapping[int, frozenset[str]]


class _Evicted(Exception):  # noqa: N818 - control flow inside this module, never escapes it
    """A decision needed the state of an evicted run (``PartitionState.evicted``)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id


def _header(partition: int, offset: int) -> tuple[tuple[str, bytes], ...]:
    return ((SOURCE_HEADER, f"{partition}:{offset}".encode()),)


def _typed(header: tuple[tuple[str, bytes], ...], event_type: str) -> tuple[tuple[str, bytes], ...]:
    return (*header, (TYPE_HEADER, event_type.encode()))


def source_of(headers: Iterable[tuple[str, bytes]] | None) -> tuple[int, int] | None:
    """The admission (partition, offset) an output names in its ``a2ui-source`` header."""
    for name, value in headers or ():
        if name == SOURCE_HEADER:
            partition, _, offset = value.decode().partition(":")
            return int(partition), int(offset)
    return None


def plan_batch(
    batch: Mapping[int, Sequence[SourceRecord]],
    owned: Mapping[int, PartitionState],
    *,
    gathered: int,
    generation: int,
    policy: HostPolicy,
    rules: PayloadRules,
    now: str,
    topics: Topics,
    fetched: Callable[[ForkSource], Any] | None = None,
) -> Refetch | Load | tuple[PartitionPlan, ...]:
    """Decide a fetched batch (records by admission partition, in offset order). ``owned``:
    the partitions this loop decides for; ``gathered``/``generation``: the loop's generation
    when the batch began and now; ``fetched``: the log events of each fork source the batch
    needs (``fork_sources``, app.core.admission.validator_forks), read by the shell beforehand.
    ``Load`` when a decision needs an evicted run's state (nothing is decided then)."""
    if gathered != generation:
        return Refetch({p: state.next_offset for p, state in owned.items()})
    plans = []
    missing: dict[int, frozenset[str]] = {}
    for partition, records in batch.items():
        state = owned.get(partition)
        if state is None or not records:
            continue  # not ours (any more, or not yet)
        try:
            plans.append(
                _plan_partition(partition, records, state, policy, rules, now, topics, fetched)
            )
        except _Evicted as evicted:
            missing[partition] = frozenset({evicted.run_id})
    if missing:
        return Load(missing)
    return tuple(plans)


@dataclass
class _Staged:
    sends: list[Send] = field(default_factory=list)
    runs: dict[str, RunState] = field(default_factory=dict)
    counts: list[tuple[str, str | None]] = field(default_factory=list)
    drifts: list[tuple[str, int, int]] = field(default_factory=list)


def _plan_partition(
    partition: int,
    records: Sequence[SourceRecord],
    state: PartitionState,
    policy: HostPolicy,
    rules: PayloadRules,
    now: str,
    topics: Topics,
    fetched: Callable[[ForkSource], Any] | None,
) -> PartitionPlan:
    staged = _Staged()
    runs, stored, seen = staged.runs, state.runs, state.seen

    evicted = state.evicted

    def state_of(run_id: str) -> RunState | None:
        found = runs.get(run_id) or stored.get(run_id)
        if found is None and run_id in evicted:
            raise _Evicted(run_id)  # caught by plan_batch: the whole partition waits
        return found

    nxt = state.next_offset
    for record in records:
        if record.offset < nxt or record.offset in seen:
            staged.counts.append(("skipped", None))  # decided already (module docstring)
            nxt = max(nxt, record.offset + 1)
            continue
        nxt = record.offset + 1
        out = validate(
            record,
            state_of,
            policy,
            rules,
            now=now,
            partitions=topics.partitions,
            max_bytes=topics.max_bytes,
            fetched=fetched or _nothing,
        )
        _route(out, record, partition, topics, staged)
    checkpointed = bool(topics.changelog) and bool(runs or nxt > state.next_offset)
    return PartitionPlan(
        partition,
        tuple(staged.sends),
        nxt,
        runs,
        frozenset(o for o in seen if o >= nxt),
        tuple(staged.counts),
        tuple(staged.drifts),
        checkpointed,
    )


def _nothing(_source: ForkSource) -> None:
    return None


def _route(
    out: Append | AppendMany | Reject | Duplicate,
    record: SourceRecord,
    partition: int,
    topics: Topics,
    staged: _Staged,
) -> None:
    """Where one outcome goes: events to the log, dead letters beside them, a command's resume
    records to the resumes topic (in the same transaction: issue 7), all on the record's own
    partition number (the topics are co-partitioned) and naming their source."""
    header = _header(partition, record.offset)
    if isinstance(out, Append):
        staged.runs[out.run_id] = compact(out.state)  # a run that ended leaves memory
        staged.sends.append(
            Send(topics.log, partition, out.key, out.value, _typed(header, out.event_type))
        )
        staged.counts.append(("admitted", None))
        if out.drift is not None:
            staged.drifts.append((out.run_id, out.sequence, out.drift))
    elif isinstance(out, AppendMany):
        staged.runs[out.run_id] = compact(out.state)  # a cancelled run leaves memory
        for (_sequence, key, value), event_type in zip(out.records, out.types, strict=True):
            staged.sends.append(Send(topics.log, partition, key, value, _typed(header, event_type)))
        run_key = out.run_id.encode()
        for resumed in out.resumes:
            staged.sends.append(Send(topics.resumes, partition, run_key, resumed, header))
        staged.counts.append(("admitted", None))
    elif isinstance(out, Reject):
        staged.sends.append(Send(topics.deadletter, partition, out.key, out.value, header))
        staged.counts.append(("refused", out.code))
    else:
        staged.counts.append(("deduplicated", None))


def plan_unrecordable(
    record: SourceRecord,
    error: str,
    state: PartitionState,
    policy: HostPolicy,
    now: str,
    topics: Topics,
) -> PartitionPlan:
    """The outcome of a record whose outcome the broker will not take (its size, corruption):
    a ``record_unrecordable`` dead letter keeping the sha256 and size of its bytes but not the
    bytes (they are what could not be written), so that one record cannot stall its
    partition. ``error`` names the broker's refusal (a type name, never its text)."""
    secrets = letter_secrets(policy, None, record.key)
    letter = dead_letter(
        refuse(
            RECORD_WRITE,
            "",
            f"the outcome of this record could not be written to Kafka ({error}); "
            "its bytes are not kept, their sha256 and size are",
            {"error": error},
        ),
        record.value,
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        now=now,
        run_id=None,
        correlation_id=None,
        secrets=secrets,
        keep_bytes=False,
    )
    key = redact_bytes(record.key, secrets) if record.key is not None else None
    nxt = record.offset + 1
    send = Send(
        topics.deadletter,
        record.partition,
        key,
        orjson.dumps(letter),
        _header(record.partition, record.offset),
    )
    return PartitionPlan(
        record.partition,
        (send,),
        max(nxt, state.next_offset),
        {},
        frozenset(o for o in state.seen if o >= nxt),
        (("refused", "record_unrecordable"),),
        checkpointed=bool(topics.changelog),
    )


# -- what the restore reads ---------------------------------------------------------------


class Stored(Protocol):
    """A record read back from the log, the dead letters or the changelog (an aiokafka
    ConsumerRecord)."""

    @property
    def offset(self) -> int:
        """The record's offset in its partition."""

    @property
    def key(self) -> bytes | None:
        """The record's key."""

    @property
    def value(self) -> bytes | None:
        """The record's value (None: a tombstone)."""

    @property
    def headers(self) -> Sequence[tuple[str, bytes]]:
        """The record's headers."""
