"""One admission partition the validator owns: the values its driver keeps per partition.

Shell module, read by ``app.shell.worker.validator_loop`` and its helpers (``validator_take``
builds an ``OwnedPartition`` once a partition is restored, ``validator_commit`` installs each
committed plan in it and decides its changelog ``Flush``). It imports ``app.core`` and aiokafka's
producer type only: it does no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiokafka import AIOKafkaProducer

from app.core.admission.validator_batch import PartitionPlan, PartitionState
from app.core.admission.validator_changelog import advanced
from app.core.admission.validator_restore import Restored
from app.core.runlog.run_state import RunState

__all__ = ["Flush", "OwnedPartition"]


class OwnedPartition:
    """One owned, restored admission partition: its run-state store, where deciding resumes,
    and (with transactions) the producer that fences it."""

    __slots__ = (
        "dead_from",
        "dirty",
        "evicted",
        "failures",
        "flushed",
        "flushing",
        "cycle",
        "cycle_from",
        "pointed",
        "log_from",
        "next_offset",
        "offsets_at",
        "offset_committed",
        "producer",
        "runs",
        "seen",
    )

    def __init__(
        self, restored: Restored, producer: AIOKafkaProducer | None, flushed: float
    ) -> None:
        self.runs = restored.runs
        self.dirty: dict[str, RunState] = {}  # changed since the last changelog flush
        self.flushed = flushed  # when the last flush began (loop time)
        self.flushing = False  # a flush spread over batches is under way
        self.cycle: tuple[str, ...] = ()  # ... and the runs it has still to write
        self.cycle_from = (0, 0)  # ... and the log and dead-letter ends when it began
        self.pointed: tuple[int, int] | None = None  # the ends our last checkpoint named
        self.next_offset = restored.start
        # The admission offset last committed (a transaction's or the restore's) and when.
        self.offset_committed = restored.start
        self.offsets_at = flushed
        self.seen = restored.seen
        self.log_from, self.dead_from = restored.log_from, restored.dead_from
        self.producer = producer
        self.evicted: set[str] = set()  # states in the local store only (ValidatorStore)

    @property
    def held(self) -> int:
        """Run states this partition holds, in memory and in the local store."""
        return len(self.runs) + len(self.evicted)

    def view(self) -> PartitionState:
        return PartitionState(
            self.runs, self.next_offset, self.seen, self.log_from, self.dead_from, self.evicted
        )

    def evictable(self, excess: int) -> list[str]:
        """Up to ``excess`` runs to take out of memory, least recently changed first: only
        runs whose state the changelog holds as memory does (not changed since the last
        flush, not in a flush under way)."""
        found: list[str] = []
        if excess <= 0:
            return found
        pending = set(self.cycle)
        for run_id in self.runs:
            if run_id in self.dirty or run_id in pending:
                continue
            found.append(run_id)
            if len(found) >= excess:
                break
        return found

    def install(
        self,
        plan: PartitionPlan,
        ends: dict[str, int],
        flush: Flush | None,
        offsets_at: float | None,
    ) -> None:
        """The plan is committed: its run states are ours now. ``ends``: the offset past the
        last record batch it appended, per topic (a batch's base offset and its records: a
        lower bound, transaction markers take offsets too): the outputs of every later record
        are past it (unless some are written already: ``seen``). ``offsets_at``: when its
        commit included the admission offset (None: it did not)."""
        self.log_from, self.dead_from = advanced(self.view(), plan, ends)
        if offsets_at is not None:
            self.offset_committed, self.offsets_at = plan.next_offset, offsets_at
        self.dirty.update(plan.runs)
        if flush is not None:
            for run_id in flush.runs:  # written as the plan left them
                self.dirty.pop(run_id, None)
            if not self.flushing:
                self.flushed = flush.began
            self.flushing = bool(flush.rest)
            self.cycle, self.cycle_from = flush.rest, flush.began_from
            if flush.complete:
                self.pointed = flush.began_from
        for run_id, state in plan.runs.items():  # most recently changed last (``evictable``)
            self.runs.pop(run_id, None)
            self.runs[run_id] = state
        self.next_offset = plan.next_offset
        self.seen = plan.seen


@dataclass(frozen=True)
class Flush:
    """What a commit flushes to the changelog. A flush writes the runs dirty when it began
    (a fixed set: runs that change meanwhile wait for the next flush, so a flush spread over
    batches ends however busy the runs are), and its checkpoint names the log and dead-letter
    ends from when it began (``began_from``): the tail a restore folds then covers every
    change since, whether the state written holds it already (skipped) or not.
    ``runs``: written by this commit; ``rest``: still to write (none: the checkpoint goes)."""

    began: float
    began_from: tuple[int, int]
    runs: tuple[str, ...]
    rest: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return not self.rest
