"""The read side's persistent store of the partitions this worker owns (issue 15 item 2).

Shell module. One embedded RocksDB (``rocksdict``) per worker under
``A2UI_STREAM_DATA_DIR/run-store/<log topic>/<worker id>/``, holding, per owned log partition,
every live recorded event's bytes as the log holds them, a small summary per run and the
partition's checkpoint (the next log offset to read). Chosen by measurement against SQLite in
WAL mode and LMDB (``scripts/bench_store.py``, docs/http.md "The store"): a quarter of SQLite's
write cost per event and a fifth of its file size, reads of a run as fast.

It is a cache of the log, never a second source of truth:

- every write of a fetched batch (its events, the runs' summaries, the partition's
  checkpoint) is one atomic ``WriteBatch``, so after a crash the store holds a prefix of the
  log up to its checkpoint, and the tail resumes there; only records read ``read_committed``
  are written;
- a store that does not open (a torn or corrupted file: RocksDB checks its manifest and block
  checksums), or whose meta record is not this format and this log topic, is thrown away and
  rebuilt from the log (``RunStore.open`` says ``rebuilt``);
- a partition's data is thrown away, and read again from the log's beginning, when its
  checkpoint is past the log's end (the topic was recreated), or older than ``STALE_MS``:
  compaction drops a tombstone ``delete.retention.ms`` (24 h by default) after it was written,
  so data older than that could still hold a run the log has deleted.

Keys (one byte of kind, the partition in two bytes, then the run id, which the OpenWOP grammar
keeps free of NUL): ``e|p|run\\0seq`` an event, ``r|p|run`` a run's summary, ``c|p`` the
checkpoint, ``m`` the meta record.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import rocksdict

from app.core.runlog.run_lifecycle import INITIAL_STATUS, status_after
from app.shell.errors import OperatorError

__all__ = ["FORMAT", "STALE_MS", "RunStore", "RunSummary", "StoredEvent", "StoreLockedError"]

log = logging.getLogger("a2ui_stream.http")

FORMAT = 1
STALE_MS = 12 * 3600 * 1000  # half of Kafka's default delete.retention.ms (24 h)
_EVENT_HEAD = struct.Struct(">QqH")  # log offset, Kafka timestamp (ms), length of the type
_CHECKPOINT = struct.Struct(">qq")  # next log offset, written at (ms since the epoch)


class StoreLockedError(OperatorError):
    """Another process holds this worker's store (two workers with one A2UI_STREAM_WORKER_ID
    and one A2UI_STREAM_DATA_DIR)."""


@dataclass(frozen=True, slots=True)
class StoredEvent:
    sequence: int
    type: str
    data: bytes
    offset: int
    appended_ms: int


@dataclass(frozen=True, slots=True)
class RunSummary:
    run_id: str
    partition: int
    last_sequence: int
    events: int
    status: str
    updated_ms: int


def _p(partition: int) -> bytes:
    return partition.to_bytes(2, "big")


def _event_key(partition: int, run_id: str, sequence: int) -> bytes:
    return b"e" + _p(partition) + run_id.encode() + b"\x00" + sequence.to_bytes(8, "big")


def _run_key(partition: int, run_id: str) -> bytes:
    return b"r" + _p(partition) + run_id.encode()


def _checkpoint_key(partition: int) -> bytes:
    return b"c" + _p(partition)


_META_KEY = b"m"


def bounded_options(write_buffer_bytes: int, cache_bytes: int) -> rocksdict.Options:
    """RocksDB options whose memory does not grow with the data (this store and
    ``app.shell.worker.validator_store``): small memtables (RocksDB's server default is 64 MiB
    each), one block cache, and the SST files' index and filter blocks kept IN that cache
    (Kafka Streams' ``BoundedMemoryRocksDBConfig`` does the same). By default RocksDB holds
    every open file's index outside the cache, so its memory grows with what was ever written:
    measured, 1M records of 1.2 KB into a store with these sizes, RSS 57 -> 76 MB from 200k to
    1M records with the index outside the cache, 60 -> 61 MB with it inside (level 0's pinned
    there, so a fresh file's index is never read twice)."""
    options = rocksdict.Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_write_buffer_size(write_buffer_bytes)
    options.set_max_write_buffer_number(2)
    table = rocksdict.BlockBasedOptions()
    table.set_block_cache(rocksdict.Cache(cache_bytes))
    table.set_cache_index_and_filter_blocks(True)
    table.set_pin_l0_filter_and_index_blocks_in_cache(True)
    options.set_block_based_table_factory(table)
    options.set_compression_type(rocksdict.DBCompressionType.lz4())
    options.increase_parallelism(1)
    return options


def _options() -> rocksdict.Options:
    options = bounded_options(8 * 1024 * 1024, 16 * 1024 * 1024)
    options.set_paranoid_checks(True)
    return options


class RunStore:
    """The store. Synchronous: every call is a local read or one atomic write (a fraction of
    a millisecond for a run's events or a fetched batch); callers run it on the event loop."""

    def __init__(self, db: rocksdict.Rdict, path: Path, rebuilt: bool) -> None:
        self._db = db
        self.path = path
        self.rebuilt = rebuilt  # thrown away and started empty when opened

    @classmethod
    def open(cls, path: Path, log_topic: str) -> RunStore:
        """Open (or create) the store at ``path`` for ``log_topic``; a store that cannot be
        opened or is not ours is deleted and created empty (``rebuilt``)."""
        meta = orjson.dumps({"format": FORMAT, "logTopic": log_topic})
        path.mkdir(parents=True, exist_ok=True)
        rebuilt = False
        try:
            db = rocksdict.Rdict(str(path), _options())
        except Exception as exc:
            if "lock" in str(exc).lower():
                raise StoreLockedError(
                    f"the run store {path} is held by another process: give every worker "
                    "that shares A2UI_STREAM_DATA_DIR its own A2UI_STREAM_WORKER_ID"
                ) from None
            log.warning(
                "run store %s does not open (%s): rebuilding it from the log",
                path,
                type(exc).__name__,
            )
            db = cls._fresh(path)
            rebuilt = True
        found = db.get(_META_KEY)
        if found != meta:
            if found is not None:
                log.warning("run store %s is of another format or topic: rebuilding it", path)
                db.close()
                db = cls._fresh(path)
                rebuilt = True
            db.put(_META_KEY, meta)
        return cls(db, path, rebuilt)

    @staticmethod
    def _fresh(path: Path) -> rocksdict.Rdict:
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True, exist_ok=True)
        return rocksdict.Rdict(str(path), _options())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._db.flush_wal(True)
        with contextlib.suppress(Exception):
            self._db.close()

    # -- partitions ---------------------------------------------------------------------------

    def checkpoint(self, partition: int) -> tuple[int, int] | None:
        """``(next log offset, written at in ms)`` of the partition, or None: nothing kept."""
        raw = self._db.get(_checkpoint_key(partition))
        if raw is None:
            return None
        offset, at = _CHECKPOINT.unpack(raw)
        return int(offset), int(at)

    def checkpointed(self, now_ms: int | None = None) -> frozenset[int]:
        """The partitions whose checkpoint a tail would resume from (not older than
        ``STALE_MS``): what this store holds warm."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        found: set[int] = set()
        for key, value in self._scan(b"c"):
            if len(key) == 3 and now_ms - int(_CHECKPOINT.unpack(value)[1]) <= STALE_MS:
                found.add(int.from_bytes(key[1:], "big"))
        return frozenset(found)

    def resume_offset(self, partition: int, log_end: int, now_ms: int | None = None) -> int:
        """Where the tail of ``partition`` starts: its checkpoint, or 0 after dropping the
        partition's data when the checkpoint is missing, past ``log_end`` (the topic was
        recreated) or older than ``STALE_MS`` (a tombstone may have been compacted away)."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        found = self.checkpoint(partition)
        if found is not None:
            offset, at = found
            if offset <= log_end and now_ms - at <= STALE_MS:
                return offset
            log.info(
                "run store: partition %d's checkpoint (offset %d, %d s old) is not usable "
                "(log end %d): reading it from the beginning",
                partition,
                offset,
                (now_ms - at) // 1000,
                log_end,
            )
        self.drop(partition)
        return 0

    def drop(self, partition: int) -> None:
        """Forget everything of ``partition``."""
        batch = rocksdict.WriteBatch(raw_mode=True)
        for kind in (b"e", b"r"):
            batch.delete_range(kind + _p(partition), kind + _p(partition + 1))
        batch.delete(_checkpoint_key(partition))
        self._db.write(batch)

    # -- writes -------------------------------------------------------------------------------

    def writer(self) -> StoreWriter:
        return StoreWriter(self)

    # -- reads --------------------------------------------------------------------------------

    def summary(self, partition: int, run_id: str) -> RunSummary | None:
        raw = self._db.get(_run_key(partition, run_id))
        return None if raw is None else _summary(partition, run_id, raw)

    def events(self, partition: int, run_id: str) -> list[StoredEvent]:
        """The run's events in sequence order."""
        prefix = b"e" + _p(partition) + run_id.encode() + b"\x00"
        found: list[StoredEvent] = []
        for key, value in self._scan(prefix):
            sequence = int.from_bytes(key[len(prefix) :], "big")
            offset, appended, type_length = _EVENT_HEAD.unpack_from(value)
            start = _EVENT_HEAD.size
            event_type = value[start : start + type_length].decode()
            found.append(
                StoredEvent(sequence, event_type, value[start + type_length :], offset, appended)
            )
        return found

    def summaries(self, partition: int) -> Iterator[RunSummary]:
        prefix = b"r" + _p(partition)
        for key, value in self._scan(prefix):
            yield _summary(partition, key[len(prefix) :].decode(), value)

    def _scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        it = self._db.iter()
        it.seek(prefix)
        while it.valid():
            key = it.key()
            if not key.startswith(prefix):
                return
            yield key, it.value()
            it.next()


def _summary(partition: int, run_id: str, raw: bytes) -> RunSummary:
    doc: dict[str, Any] = orjson.loads(raw)
    return RunSummary(run_id, partition, doc["last"], doc["n"], doc["status"], doc["ms"])


class StoreWriter:
    """One fetched batch, written at once (``commit``): events, tombstones, the runs'
    summaries and each partition's checkpoint, atomically."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self._batch = rocksdict.WriteBatch(raw_mode=True)
        self._summaries: dict[tuple[int, str], dict[str, Any] | None] = {}
        self._checkpoints: dict[int, int] = {}
        self._written: set[bytes] = set()  # event keys put in this batch

    def _current(self, partition: int, run_id: str) -> dict[str, Any] | None:
        key = (partition, run_id)
        if key in self._summaries:
            return self._summaries[key]
        raw = self.store._db.get(_run_key(partition, run_id))
        found: dict[str, Any] | None = None if raw is None else orjson.loads(raw)
        self._summaries[key] = found
        return found

    def put(
        self,
        partition: int,
        run_id: str,
        sequence: int,
        event_type: str,
        data: bytes,
        offset: int,
        appended_ms: int,
    ) -> None:
        head = _EVENT_HEAD.pack(offset, appended_ms, len(event_type.encode()))
        key = _event_key(partition, run_id, sequence)
        self._batch.put(key, head + event_type.encode() + data)
        self._written.add(key)
        summary = self._current(partition, run_id)
        if summary is None:
            summary = {"last": -1, "n": 0, "status": INITIAL_STATUS, "ms": 0}
        if sequence > summary["last"]:  # a re-appended sequence replaces its event in place
            summary["n"] += 1
            summary["last"] = sequence
        summary["status"] = status_after(summary["status"], event_type)
        summary["ms"] = appended_ms
        self._summaries[(partition, run_id)] = summary

    def delete(self, partition: int, run_id: str, sequence: int) -> bool:
        """A tombstone; True when it removed the run's last event (the run is gone)."""
        key = _event_key(partition, run_id, sequence)
        held = key in self._written or self.store._db.get(key) is not None
        self._batch.delete(key)
        self._written.discard(key)
        summary = self._current(partition, run_id)
        if summary is None or not held:
            return False
        summary["n"] -= 1
        if summary["n"] <= 0:
            self._summaries[(partition, run_id)] = None
            return True
        return False

    def advance(self, partition: int, next_offset: int) -> None:
        self._checkpoints[partition] = max(next_offset, self._checkpoints.get(partition, 0))

    def commit(self, now_ms: int | None = None) -> None:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        for (partition, run_id), summary in self._summaries.items():
            if summary is None:
                self._batch.delete(_run_key(partition, run_id))
            else:
                self._batch.put(_run_key(partition, run_id), orjson.dumps(summary))
        for partition, offset in self._checkpoints.items():
            self._batch.put(_checkpoint_key(partition), _CHECKPOINT.pack(offset, now_ms))
        if not self._batch.is_empty():
            self.store._db.write(self._batch)
        self._batch = rocksdict.WriteBatch(raw_mode=True)
        self._summaries.clear()
        self._checkpoints.clear()
        self._written.clear()
