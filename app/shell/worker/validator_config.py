"""The validator's configuration: its topics, its group, how it batches, flushes and caches.

Shell module, a value: ``app.shell.worker.faust_app`` builds it from the settings
(``app.shell.settings``), ``app.shell.worker.validator_loop`` and its helpers read it. It
imports nothing of the app.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ValidatorConfig"]


@dataclass(frozen=True)
class ValidatorConfig:
    bootstrap: str
    admission_topic: str
    log_topic: str
    deadletter_topic: str
    partitions: int
    group_id: str
    # The worker's own transactional id: only probed at start (does the broker grant
    # transactions?), which also fences a worker of an earlier version that wrote with it.
    transactional_id: str
    transactions: str = "auto"  # "auto" | "on" | "off"
    max_record_bytes: int = 1_048_576
    resumes_topic: str = ""
    fast_groups: bool = False
    max_batch: int = 5000
    batch_ms: int = 10
    changelog_topic: str = ""  # the run-state changelog; "" restores by replay only
    # Seconds between two changelog flushes of a partition (Kafka Streams' commit interval):
    # each flush writes every run changed since the last one once, so a long run's state is
    # not encoded again for every small batch (measured: with a flush per batch, 1,000
    # envelopes/s of 50 long runs took the p50 latency from 46-63 ms to 409-702 ms). A restore
    # folds the log tail written since the last flush. 0: every batch.
    changelog_interval: float = 1.0
    # Run states one batch writes at most, and their encoded bytes (at least one state): a
    # flush of more is spread over the next batches, so one batch never encodes every live
    # run. A long run's state holds every correlationId it recorded (~120 bytes each): 8 runs
    # of 400 envelopes were ~300 KB (up to 1.4 MB) in one batch, encoded and acknowledged
    # while the whole loop waited (measured: a flushing commit took 212 ms at p90 against
    # 37 ms for the others; docs/pipeline.md "Performance").
    changelog_flush_runs: int = 32
    changelog_flush_bytes: int = 64 * 1024
    # Run states kept in memory, across the owned partitions (issue 15: a worker's memory
    # follows its live work, not its history); the others wait in a local store under
    # ``state_dir`` (app.shell.worker.validator_store) until a record for them comes. 0 or no
    # ``state_dir``: every state in memory.
    cache_runs: int = 0
    state_dir: str = ""

    def partition_transactional_id(self, partition: int) -> str:
        """``<app id>-validator-p<partition>``: the same on every worker of the group, so the
        partition's next owner fences its previous one (the group id is ``<app id>-validator``)."""
        return f"{self.group_id}-p{partition}"
