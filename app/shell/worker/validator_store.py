"""The validator's local store of the run states it keeps out of memory (issue 15).

Shell module. The validator holds the run states of the admission partitions it owns; since
runs that stay open (an agent that never ends its run) add up with history, it keeps only a
bounded number of them in memory (``A2UI_STREAM_VALIDATOR_CACHE_RUNS``) and the rest here,
encoded as the changelog encodes them (``app.core.runlog.run_snapshot``), as Kafka Streams keeps a
task's state in a local RocksDB store with a bounded cache in front. It is a cache, never a
source of truth: the run-state changelog is (and the log behind it). So the store is thrown
away when the worker starts and a partition's share when the partition is taken or leaves;
only states that a flush has already written to the changelog, or that a restore read from
it, are put here (``app.shell.worker.validator_cache``: a run changed since the last flush stays in
memory until it is flushed).

One embedded RocksDB (``rocksdict``, as the read side's run store: ``app.shell.worker.run_store``)
under ``A2UI_STREAM_DATA_DIR/validator-state/<worker id>/``, with small memtables and cache:
the point is to take memory off the worker, not to add a server's worth. Keys: the
partition in two bytes, then the run id.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterable
from pathlib import Path

import rocksdict

from app.shell.worker.run_store import bounded_options

__all__ = ["ValidatorStore"]


def _p(partition: int) -> bytes:
    return partition.to_bytes(2, "big")


def _options() -> rocksdict.Options:
    return bounded_options(4 * 1024 * 1024, 8 * 1024 * 1024)


class ValidatorStore:
    """Encoded run states by (partition, run id). Synchronous: each call is a local read or
    one write (a fraction of a millisecond); the loop calls it between its awaits."""

    def __init__(self, db: rocksdict.Rdict, path: Path) -> None:
        self._db = db
        self.path = path

    @classmethod
    def open(cls, path: Path) -> ValidatorStore:
        """A new, empty store at ``path`` (whatever was there is deleted: a cache of the
        changelog, rebuilt by every restore)."""
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True, exist_ok=True)
        return cls(rocksdict.Rdict(str(path), _options()), path)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._db.close()
        shutil.rmtree(self.path, ignore_errors=True)

    def put_many(self, partition: int, states: Iterable[tuple[str, bytes]]) -> None:
        batch = rocksdict.WriteBatch(raw_mode=True)
        for run_id, value in states:
            batch.put(_p(partition) + run_id.encode(), value)
        if not batch.is_empty():
            self._db.write(batch)

    def get(self, partition: int, run_id: str) -> bytes | None:
        found = self._db.get(_p(partition) + run_id.encode())
        return None if found is None else bytes(found)

    def drop(self, partition: int) -> None:
        """Forget every state of ``partition``."""
        batch = rocksdict.WriteBatch(raw_mode=True)
        batch.delete_range(_p(partition), _p(partition + 1))
        self._db.write(batch)
