"""The validator's run states out of memory (``ValidatorConfig.cache_runs``): evict, load, plan.

Shell module. A partition keeps its share of ``cache_runs`` states in memory; the least recently
changed clean ones wait in the local store (``app.shell.worker.validator_store``), encoded as
the changelog holds them, until a record for them comes: ``plan_loaded`` puts back the states
a batch's keys name, and any other the core asks for (``Load``), before the batch is decided.

Its functions take the loop, whose partitions, store and counters they read and set. It
imports ``app.core`` and the shared shell modules; the loop's type only for annotations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from app.core.admission.host_commands_call import ForkSource
from app.core.admission.validator import SourceRecord
from app.core.admission.validator_batch import Load, PartitionPlan, Refetch, plan_batch
from app.core.runlog.run_snapshot import decode_state, encode_state
from app.shell.clock import now_rfc3339

if TYPE_CHECKING:
    from app.shell.worker.validator_loop import ValidatorLoop
    from app.shell.worker.validator_partition import OwnedPartition

__all__ = ["evict", "load", "load_keyed", "plan_loaded"]


def plan_loaded(
    loop: ValidatorLoop,
    batch: dict[int, list[SourceRecord]],
    owned: Mapping[int, OwnedPartition],
    fetched: Callable[[ForkSource], Any],
    *,
    gathered: int,
    generation: int,
) -> Refetch | tuple[PartitionPlan, ...]:
    """``plan_batch`` of ``batch`` for the partitions ``owned``, once every evicted state it
    needs is back in memory: those the records' keys name first, then any the core asks for
    (``Load``: nothing is decided then, and it is asked again)."""
    load_keyed(loop, batch)
    while True:
        planned = plan_batch(
            batch,
            {p: state.view() for p, state in owned.items()},
            gathered=gathered,
            generation=generation,
            policy=loop.policy,
            rules=loop.rules,
            now=now_rfc3339(),
            topics=loop.topics,
            fetched=fetched,
        )
        if not isinstance(planned, Load):
            return planned
        load(loop, planned)


def load_keyed(loop: ValidatorLoop, batch: dict[int, list[SourceRecord]]) -> None:
    """Put back into memory the evicted runs the records' keys name (a record's key is its
    runId, or intake refuses it before any state is read); ``plan_batch`` answers
    ``Load`` for any other."""
    for partition, records in batch.items():
        owned = loop.partitions.get(partition)
        if owned is None or not owned.evicted:
            continue
        wanted: set[str] = set()
        for record in records:
            if record.key is None:
                continue
            try:
                run_id = record.key.decode()
            except UnicodeDecodeError:
                continue
            if run_id in owned.evicted:
                wanted.add(run_id)
        if wanted:
            load(loop, Load({partition: frozenset(wanted)}))


def load(loop: ValidatorLoop, load: Load) -> None:
    """The evicted states ``load`` names, from the local store back into memory."""
    assert loop.store is not None
    for partition, run_ids in load.runs.items():
        owned = loop.partitions[partition]
        for run_id in run_ids:
            raw = loop.store.get(partition, run_id)
            state = None if raw is None else decode_state(run_id, raw)
            if state is None:  # not a state this version reads: the log is replayed
                loop.replay_next.add(partition)
                raise RuntimeError(
                    f"validator: an evicted run state of partition {partition} is unreadable"
                )
            owned.evicted.discard(run_id)
            owned.runs[run_id] = state
            loop.loads += 1


def evict(loop: ValidatorLoop, partition: int) -> None:
    """Keep at most this partition's share of ``cache_runs`` states in memory: the least
    recently changed clean ones go to the local store, encoded as the changelog holds
    them."""
    owned = loop.partitions.get(partition)
    if loop.store is None or owned is None:
        return
    share = max(1, -(-loop.config.cache_runs // max(1, len(loop.partitions))))
    victims = owned.evictable(len(owned.runs) - share)
    if not victims:
        return
    loop.store.put_many(
        partition, [(run_id, encode_state(owned.runs[run_id])) for run_id in victims]
    )
    for run_id in victims:
        del owned.runs[run_id]
        owned.evicted.add(run_id)
    loop.evictions += len(victims)
