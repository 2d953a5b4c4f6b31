"""One step of the validator's loop: a batch gathered, planned by the core, written and committed.

Shell module, called by ``app.shell.worker.validator_loop`` (``ValidatorLoop.run``, with the
lock held for ``process_batch``). ``gather_batch`` collects up to ``max_batch`` records for at
most ``batch_ms`` (``gather``); ``process_batch`` reads the fork sources the batch names
(``ValidatorLoop.read_source``), has ``app.core.admission.validator_batch.plan_batch`` plan it once
(``validator_cache.plan_loaded``, with the run states out of memory loaded) and hands the
plans to ``validator_commit``; a batch gathered across a rebalance is fetched again. A
partition whose commit failed ``ISOLATE_AFTER_FAILURES`` times in a row is decided one record
per transaction (``validator_commit.process_isolated``).

Its functions take the loop. It imports ``app.core`` and its sibling modules of the validator
(``validator_cache``, ``validator_commit``); the loop's type only for annotations.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from aiokafka import TopicPartition

from app.core.admission.validator import SourceRecord
from app.core.admission.validator_batch import Refetch
from app.core.admission.validator_forks import fork_sources
from app.shell.worker.gather import gather
from app.shell.worker.validator_cache import plan_loaded
from app.shell.worker.validator_commit import commit, process_isolated, settle

if TYPE_CHECKING:
    from app.shell.worker.validator_loop import ValidatorLoop

__all__ = ["ISOLATE_AFTER_FAILURES", "gather_batch", "process_batch"]

log = logging.getLogger("a2ui_stream.validator")

# Failed commits in a row after which a partition is decided one record per transaction
# (``validator_commit.process_isolated``).
ISOLATE_AFTER_FAILURES = 3


async def gather_batch(loop: ValidatorLoop) -> dict[TopicPartition, list[Any]]:
    """Up to ``max_batch`` records, collected for at most ``batch_ms`` from where the previous
    batch was gathered (``gather.gather``). One round of transactions (or one
    produce-then-commit round trip) per batch: the round trip, not the CPU, bounds a small
    batch, so batches are as large as the latency budget allows."""
    assert loop.consumer is not None
    batch = await gather(
        loop.consumer,
        max_records=loop.config.max_batch,
        window_s=loop.config.batch_ms / 1000,
        opened=loop.gathered_at,
    )
    loop.gathered_at = asyncio.get_running_loop().time() if batch else None
    return batch


async def process_batch(
    loop: ValidatorLoop, fetched: dict[TopicPartition, list[Any]], gathered: int
) -> None:
    """One batch: the core plans it, the plans are written and committed. Call with the
    lock held."""
    batch = {
        tp.partition: [
            SourceRecord(tp.topic, tp.partition, r.offset, r.key, r.value, tuple(r.headers or ()))
            for r in records
        ]
        for tp, records in fetched.items()
    }
    isolated = {
        p: records
        for p, records in batch.items()
        if loop.failures.get(p, 0) >= ISOLATE_AFTER_FAILURES and p in loop.partitions
    }
    sources = {s: await loop.read_source(s) for s in fork_sources(batch, loop.topics.max_bytes)}
    decided = {p: records for p, records in batch.items() if p not in isolated}
    planned = plan_loaded(
        loop,
        decided,
        loop.partitions,
        sources.get,
        gathered=gathered,
        generation=loop.generation,
    )
    if isinstance(planned, Refetch):
        # A rebalance ran while this batch was gathered: the listener runs beside getmany,
        # so the batch may hold records fetched before a restore moved the positions, and
        # again after it (found by CI: test_crash_safety_under_sigkill decided such records
        # twice). Fetch it again.
        log.info("validator: dropping a batch gathered across a rebalance")
        assert loop.consumer is not None
        for partition, position in planned.positions.items():
            loop.consumer.seek(loop.tp(partition), position)
        return
    results = await commit(loop, planned)
    loop.batches += 1
    loop.commits += len(planned)
    for plan, failure in zip(planned, results, strict=True):
        settle(loop, plan, failure)
    for partition, records in isolated.items():
        await process_isolated(loop, partition, records, sources)
