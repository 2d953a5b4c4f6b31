"""The accounting of a fault scenario: what was published, what the pipeline wrote, and whether
anything was lost, duplicated, mis-ordered or decided differently than the oracle says.

Shell module (it reads topics). "Published" is what the admission topic holds, read back after
the scenario: a producer that retried after a broker outage may have put a record there twice,
and that is a second publication the pipeline must answer, not an error of the pipeline.

The oracle is the pure core itself: ``app.core.admission.validator.validate`` (exactly what the
worker calls) over the admission records in partition order, one state per run, with the worker's
policy. It gives the one correct outcome of every admission record (by its partition and
offset), so every log event and dead letter, which name their source record in the
``a2ui-source`` header, can be matched to it, whatever crashed in between:

- lost: a record whose outcome (event or dead letter) is absent although the validator's group
  committed past it (an absent outcome at or past the committed offset is pending: the
  pipeline stalled there, which fails the scenario too, but nothing was dropped);
- duplicated: a second outcome for one record, an output for a record the oracle says is an E2
  duplicate (a correlationId recorded twice), or a ``runId#sequence`` written twice (counted
  per extra output); ``twice`` counts the records themselves that got more than one outcome
  (what a member deciding records its successor decides too leaves behind);
- mis-ordered: a run whose log is not gap-free (0, 1, 2, ...) or whose events do not come from
  the oracle's records in the oracle's order (publication order);
- wrong: an event where a dead letter was due or the reverse, or another refusal code.

``published = admitted + refused + deduplicated`` holds when nothing is lost or wrong.

An SSE client's delivery (``sse_delivery``) is checked against its run's log the same way: every
recorded event exactly once, in sequence order, across however many connections it took.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer

from app.core.admission.payload_rules import PayloadRules
from app.core.admission.policy import HostPolicy
from app.core.admission.validator import (
    Append,
    AppendMany,
    Duplicate,
    Reject,
    SourceRecord,
    validate,
)
from app.core.admission.validator_batch import source_of
from app.core.projection.patch_equal import json_equal
from app.core.projection.subscriber_view import SubscriberView
from app.core.projection.surfaces import Projection, replay
from app.core.runlog.run_state import RunState
from app.shell.worker.kafka_io import partitions_of, read_topic

__all__ = [
    "Accounting",
    "Oracle",
    "Outputs",
    "SseDelivery",
    "Want",
    "committed_offsets",
    "compare_surfaces",
    "converged",
    "oracle",
    "read_outputs",
    "sse_delivery",
    "tally",
]

Source = tuple[int, int]  # admission (partition, offset)
ORACLE_NOW = "2026-11-30T00:00:00Z"


@dataclass(frozen=True)
class Want:
    """The oracle's outcome for one admission record."""

    kind: str  # "admitted" | "refused" | "deduplicated"
    events: tuple[tuple[str, int], ...] = ()  # (runId, sequence) it appends
    code: str | None = None  # the refusal code


@dataclass
class Oracle:
    wants: dict[Source, Want]
    runs: dict[str, list[tuple[int, Source]]]  # run -> [(sequence, source)] in log order


def oracle(
    records: Iterable[Any],
    policy: HostPolicy,
    rules: PayloadRules,
    *,
    partitions: int,
    max_bytes: int,
) -> Oracle:
    """Decide every admission record (aiokafka records of the admission topic) in partition
    order, exactly as the validator does."""
    states: dict[str, RunState] = {}
    out = Oracle({}, defaultdict(list))
    for rec in sorted(records, key=lambda r: (r.partition, r.offset)):
        headers = tuple(getattr(rec, "headers", None) or ())
        source = SourceRecord(rec.topic, rec.partition, rec.offset, rec.key, rec.value, headers)
        decided = validate(
            source,
            states.get,
            policy,
            rules,
            now=ORACLE_NOW,
            partitions=partitions,
            max_bytes=max_bytes,
        )
        src = (rec.partition, rec.offset)
        if isinstance(decided, Append):
            states[decided.run_id] = decided.state
            out.wants[src] = Want("admitted", ((decided.run_id, decided.sequence),))
            out.runs[decided.run_id].append((decided.sequence, src))
        elif isinstance(decided, AppendMany):
            states[decided.run_id] = decided.state
            events = tuple((decided.run_id, seq) for seq, _key, _value in decided.records)
            out.wants[src] = Want("admitted", events)
            out.runs[decided.run_id].extend((seq, src) for _run, seq in events)
        elif isinstance(decided, Duplicate):
            out.wants[src] = Want("deduplicated")
        else:
            assert isinstance(decided, Reject)
            out.wants[src] = Want("refused", code=decided.code)
    return out


@dataclass
class Outputs:
    """What the pipeline wrote: log events and dead letters, each with its source record."""

    events: list[tuple[dict[str, Any], Source | None]]
    dead_letters: list[tuple[dict[str, Any], Source | None]]

    def materialized(self) -> Projection:
        """The surfaces the log materializes (the projector's fold over the whole log)."""
        return replay([event for event, _src in self.events])


def _source(record: Any) -> Source | None:
    return source_of(record.headers)


async def read_outputs(
    bootstrap: str, log_topic: str, deadletter_topic: str, *, timeout: float = 120.0
) -> Outputs:
    """The committed log and dead letters, in offset order per partition."""
    log_records = await read_topic(
        bootstrap, log_topic, isolation="read_committed", timeout=timeout
    )
    dead = await read_topic(
        bootstrap, deadletter_topic, isolation="read_committed", timeout=timeout
    )
    return Outputs(
        [(orjson.loads(r.value), _source(r)) for r in log_records if r.value is not None],
        [(orjson.loads(r.value), _source(r)) for r in dead if r.value is not None],
    )


@dataclass
class Accounting:
    published: int = 0
    admitted: int = 0
    refused: int = 0
    deduplicated: int = 0
    lost: int = 0
    pending: int = 0
    duplicated: int = 0
    twice: int = 0  # records with more than one outcome (each also counted in duplicated)
    misordered: int = 0
    wrong: int = 0
    events: int = 0
    runs: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def balanced(self) -> bool:
        return self.published == self.admitted + self.refused + self.deduplicated

    @property
    def ok(self) -> bool:
        faults = self.lost or self.pending or self.duplicated or self.misordered or self.wrong
        return self.balanced and not faults

    def line(self) -> str:
        sign = "=" if self.balanced else "!="
        return (
            f"published={self.published} {sign} admitted={self.admitted} + "
            f"refused={self.refused} + deduplicated={self.deduplicated}; lost={self.lost} "
            f"duplicated={self.duplicated} (records with two outcomes={self.twice}) "
            f"misordered={self.misordered} wrong={self.wrong}"
            + (f" pending={self.pending}" if self.pending else "")
        )

    def note(self, problem: str) -> None:
        if len(self.problems) < 20:
            self.problems.append(problem)


def tally(
    published: int, want: Oracle, got: Outputs, committed: Mapping[int, int] | None = None
) -> Accounting:
    """Match every output to its source record and the oracle (module docstring);
    ``committed``: the validator group's committed admission offsets, by partition (without
    them every absent outcome counts as lost)."""
    acc = Accounting(published=published, events=len(got.events), runs=len(want.runs))
    by_source: dict[Source | None, list[tuple[str, Any]]] = defaultdict(list)
    for event, src in got.events:
        by_source[src].append(("event", (event["runId"], event["sequence"])))
    for letter, src in got.dead_letters:
        by_source[src].append(("dead", letter.get("code")))
    for src, outputs in by_source.items():
        if src not in want.wants:
            acc.wrong += len(outputs)
            acc.note(f"{len(outputs)} output(s) for an unknown source {src}")
    for src, wanted in want.wants.items():
        outputs = by_source.get(src, [])
        beyond = committed is not None and src[1] >= committed.get(src[0], 0)
        if not outputs and beyond and wanted.kind != "deduplicated":
            acc.pending += 1
            acc.note(f"{src}: no outcome yet, at or past the committed offset")
            continue
        _match(acc, src, wanted, outputs)
    keys = Counter((event["runId"], event["sequence"]) for event, _src in got.events)
    for key, n in keys.items():
        if n > 1:
            acc.duplicated += n - 1
            acc.note(f"{key[0]}#{key[1]} written {n} times")
    by_run: dict[str, list[tuple[int, Source | None]]] = defaultdict(list)
    for event, src in got.events:
        by_run[event["runId"]].append((event["sequence"], src))
    for run in set(by_run) | set(want.runs):
        seen, due = by_run.get(run, []), want.runs.get(run, [])
        gap_free = [seq for seq, _src in seen] == list(range(len(seen)))
        if not gap_free or seen != due[: len(seen)]:
            acc.misordered += 1
            acc.note(f"{run}: log order differs from publication order")
    return acc


def _match(acc: Accounting, src: Source, wanted: Want, outputs: list[tuple[str, Any]]) -> None:
    if wanted.kind == "deduplicated":
        if outputs:
            acc.duplicated += len(outputs)
            acc.twice += 1  # its outcome was "nothing new"; it got one more
            acc.note(f"{src}: an E2 duplicate got {len(outputs)} output(s)")
        else:
            acc.deduplicated += 1
        return
    if not outputs:
        acc.lost += 1
        acc.note(f"{src}: no outcome ({wanted.kind} was due)")
        return
    due = len(wanted.events) if wanted.kind == "admitted" else 1
    if len(outputs) > due:
        acc.duplicated += len(outputs) - due
        acc.twice += 1
        acc.note(f"{src}: {len(outputs)} outputs, {due} due")
    if wanted.kind == "admitted":
        right = all(kind == "event" for kind, _ in outputs) and {v for _, v in outputs} == set(
            wanted.events
        )
        acc.admitted += 1
    else:
        right = all(kind == "dead" and code == wanted.code for kind, code in outputs)
        acc.refused += 1
    if not right:
        acc.wrong += 1
        acc.note(f"{src}: got {outputs[:3]}, the oracle says {wanted}")


async def committed_offsets(bootstrap: str, group_id: str, topic: str) -> dict[int, int]:
    """The group's committed offsets on ``topic``, by partition (0 where none)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group_id, enable_auto_commit=False
    )
    await consumer.start()
    try:
        return {
            tp.partition: await consumer.committed(tp) or 0
            for tp in await partitions_of(consumer, topic)
        }
    finally:
        await consumer.stop()


def compare_surfaces(
    materialized: Projection, view: SubscriberView, runs: frozenset[str] | None = None
) -> list[str]:
    """Where a subscriber's reconstructed surfaces differ from the log's materialization (the
    runs it follows): content, sequence, trust, deletion, or a surface held stale."""
    differences: list[str] = []
    wanted = {
        (key.run_id, key.surface_id): surface
        for key, surface in materialized.surfaces.items()
        if runs is None or key.run_id in runs
    }
    held_keys = {key for key in view.surfaces if runs is None or key[0] in runs}
    for key in held_keys - set(wanted):
        differences.append(f"{key}: held but not in the log")
    for key, surface in wanted.items():
        held = view.get(*key)
        if held is None:
            differences.append(f"{key}: never delivered")
        elif held.stale:
            differences.append(f"{key}: held stale at sequence {held.sequence}")
        elif held.sequence != surface.sequence:
            differences.append(f"{key}: at sequence {held.sequence}, the log at {surface.sequence}")
        elif (held.trust, held.deleted) != (surface.trust, surface.deleted):
            differences.append(f"{key}: trust/deleted differ")
        elif not json_equal(held.content, surface.content):
            differences.append(f"{key}: content differs at sequence {held.sequence}")
    return differences


def converged(materialized: Projection, views: Mapping[str, SubscriberView]) -> bool:
    return all(not compare_surfaces(materialized, view) for view in views.values())


Delivered = tuple[int, str]  # (sequence, eventId) of one event as an SSE client received it


@dataclass
class SseDelivery:
    """How one SSE client's received events (all its connections, in arrival order) compare
    with its run's recorded events: ``missing`` recorded and never received, ``duplicated``
    received more than once (counted per extra copy), ``misordered`` received after an event
    of a higher sequence, ``foreign`` received but not recorded (another eventId at that
    sequence, or a sequence the log lacks)."""

    recorded: int = 0
    received: int = 0
    missing: int = 0
    duplicated: int = 0
    misordered: int = 0
    foreign: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicated or self.misordered or self.foreign)

    def note(self, problem: str) -> None:
        if len(self.problems) < 5:
            self.problems.append(problem)


def sse_delivery(recorded: Iterable[Delivered], received: Iterable[Delivered]) -> SseDelivery:
    """Compare an SSE client's ``received`` events with the ``recorded`` ones of its run (the
    log read read_committed): the target is ``received == recorded``, each exactly once in
    sequence order."""
    want, got = list(recorded), list(received)
    out = SseDelivery(recorded=len(want), received=len(got))
    known = set(want)
    seen: set[Delivered] = set()
    highest = -1
    for item in got:
        sequence, event_id = item
        if item not in known:
            out.foreign += 1
            out.note(f"#{sequence} ({event_id}) received, not recorded")
        elif item in seen:
            out.duplicated += 1
            out.note(f"#{sequence} received again")
        elif sequence < highest:
            out.misordered += 1
            out.note(f"#{sequence} received after #{highest}")
        seen.add(item)
        highest = max(highest, sequence)
    absent = [sequence for sequence, event_id in want if (sequence, event_id) not in seen]
    out.missing = len(absent)
    if absent:
        out.note(f"{len(absent)} recorded never received: #{absent[:5]}")
    return out
