"""Measure the read side's candidate stores (issue 15 item 2; docs/http.md, "The store").

Not part of the product: a one-off measurement kept so the figures in docs/http.md can be
re-run. It writes the same events the way the run store does (one transaction per fetched batch,
with the partition's checkpoint in it) and reads one run's events back, for SQLite in WAL mode
(standard library) and, when they are importable, rocksdict (RocksDB) and lmdb:

    python scripts/bench_store.py [--events 200000] [--runs 2000] [--batch 1000]

(`pip install rocksdict lmdb` in a scratch environment to include them; the product depends on
neither.)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import struct
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path


def _event(run: str, sequence: int, rng: random.Random) -> bytes:
    """A recorded surface event of about 1.2 KB, shaped like the log's (fresh ids and text, so
    it compresses like real JSON rather than like a repeated byte)."""
    nonce = f"{rng.getrandbits(128):032x}"
    words = " ".join(f"{rng.getrandbits(24):x}" for _ in range(12))
    components = [
        {"id": "root", "component": "Column", "children": [f"c{i}" for i in range(6)]},
        *(
            {"id": f"c{i}", "component": "Text", "text": f"{words} {i}", "variant": "body"}
            for i in range(6)
        ),
    ]
    event = {
        "eventId": f"{run}#{sequence}",
        "runId": run,
        "sequence": sequence,
        "type": "ui.a2ui-surface",
        "schemaVersion": 1,
        "timestamp": "2026-12-01T10:00:00.000Z",
        "causationId": f"corr-{nonce}",
        "contentTrust": "trusted",
        "payload": {
            "envelope": {
                "type": "ui.a2ui-surface",
                "schemaVersion": 2,
                "envelopeId": f"env-{nonce}",
                "correlationId": f"corr-{nonce}",
                "payload": {
                    "version": "v0.9",
                    "messages": [
                        {
                            "version": "v0.9",
                            "updateComponents": {"surfaceId": "main", "components": components},
                        }
                    ],
                },
                "meta": {"source": "ai-generation", "ts": "2026-12-01T10:00:00Z"},
            },
            "version": 2,
            "trust": "trusted",
        },
    }
    return json.dumps(event, separators=(",", ":")).encode()


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _events(runs: int, total: int) -> Iterator[tuple[str, int, int, bytes]]:
    rng = random.Random(1)
    sequences = [0] * runs
    for offset in range(total):
        run = offset % runs
        sequence = sequences[run]
        sequences[run] += 1
        name = f"tenant/run-{run:06d}"
        yield name, sequence, offset, _event(name, sequence, rng)


def _key(run: str, sequence: int) -> bytes:
    return run.encode() + b"\x00" + struct.pack(">Q", sequence)


class Sqlite:
    name = "sqlite-wal"

    def __init__(self, path: Path) -> None:
        self.path = path / "p.sqlite"
        self.db = sqlite3.connect(self.path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        # the log offset is the rowid: appends go to the end of the table's B-tree, and the
        # (run, seq) index is small (a WITHOUT ROWID table of 1.2 KB rows was 4.7 KB/event)
        self.db.execute(
            "CREATE TABLE events (off INTEGER PRIMARY KEY, run TEXT, seq INTEGER, data BLOB)"
        )
        self.db.execute("CREATE UNIQUE INDEX by_run ON events (run, seq)")
        self.db.execute("CREATE TABLE checkpoint (id INTEGER PRIMARY KEY, next INTEGER)")

    def write(self, batch: list[tuple[str, int, int, bytes]]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany(
            "INSERT OR REPLACE INTO events VALUES (?, ?, ?, ?)",
            [(offset, run, seq, data) for run, seq, offset, data in batch],
        )
        self.db.execute("INSERT OR REPLACE INTO checkpoint VALUES (0, ?)", (batch[-1][2] + 1,))
        self.db.execute("COMMIT")

    def read(self, run: str) -> list[bytes]:
        rows = self.db.execute("SELECT data FROM events WHERE run = ? ORDER BY seq", (run,))
        return [row[0] for row in rows]

    def close(self) -> None:
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.db.close()


class Rocks:
    name = "rocksdict"

    def __init__(self, path: Path) -> None:
        import rocksdict

        self.rocksdict = rocksdict
        options = rocksdict.Options(raw_mode=True)
        options.create_if_missing(True)
        self.db = rocksdict.Rdict(str(path / "rocks"), options)

    def write(self, batch: list[tuple[str, int, int, bytes]]) -> None:
        wb = self.rocksdict.WriteBatch(raw_mode=True)
        for run, sequence, _offset, data in batch:
            wb.put(_key(run, sequence), data)
        wb.put(b"\xffcheckpoint", struct.pack(">Q", batch[-1][2] + 1))
        self.db.write(wb)

    def read(self, run: str) -> list[bytes]:
        prefix = run.encode() + b"\x00"
        found = []
        for key, value in self.db.items(from_key=prefix):
            if not key.startswith(prefix):
                break
            found.append(value)
        return found

    def close(self) -> None:
        self.db.close()


class Lmdb:
    name = "lmdb"

    def __init__(self, path: Path) -> None:
        import lmdb

        self.env = lmdb.open(str(path / "lmdb"), map_size=8 << 30, sync=True, metasync=False)

    def write(self, batch: list[tuple[str, int, int, bytes]]) -> None:
        with self.env.begin(write=True) as txn:
            for run, sequence, _offset, data in batch:
                txn.put(_key(run, sequence), data)
            txn.put(b"\xffcheckpoint", struct.pack(">Q", batch[-1][2] + 1))

    def read(self, run: str) -> list[bytes]:
        prefix = run.encode() + b"\x00"
        found = []
        with self.env.begin() as txn:
            cursor = txn.cursor()
            if cursor.set_range(prefix):
                for key, value in cursor:
                    if not key.startswith(prefix):
                        break
                    found.append(value)
        return found

    def close(self) -> None:
        self.env.close()


def _candidates() -> list[Callable[[Path], object]]:
    found: list[Callable[[Path], object]] = [Sqlite]
    for module, store in (("rocksdict", Rocks), ("lmdb", Lmdb)):
        try:
            __import__(module)
        except ImportError:
            print(f"({module} is not installed: skipped)")
            continue
        found.append(store)
    return found


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=2_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--reads", type=int, default=2_000)
    args = parser.parse_args()
    for make in _candidates():
        folder = Path(tempfile.mkdtemp(prefix="bench-store-"))
        store = make(folder)
        events = list(_events(args.runs, args.events))
        mean_bytes = sum(len(e[3]) for e in events) / len(events)
        started = time.perf_counter()
        for i in range(0, len(events), args.batch):
            store.write(events[i : i + args.batch])  # type: ignore[attr-defined]
        write_s = time.perf_counter() - started
        rng = random.Random(7)
        latencies = []
        for _ in range(args.reads):
            run = f"tenant/run-{rng.randrange(args.runs):06d}"
            t0 = time.perf_counter()
            got = store.read(run)  # type: ignore[attr-defined]
            latencies.append((time.perf_counter() - t0) * 1000)
            assert got, run
        store.close()  # type: ignore[attr-defined]
        size = _size(folder)
        print(
            f"{store.name:11s} write {write_s / args.events * 1e6:6.2f} us/event  "  # type: ignore[attr-defined]
            f"read of a {args.events // args.runs}-event run "
            f"p50 {statistics.median(latencies):.3f} ms "
            f"p99 {_pct(latencies, 0.99):.3f} ms  size {size / args.events:.0f} B/event "
            f"({size / 1e6:.0f} MB for {args.events} events of {mean_bytes:.0f} B)"
        )
        shutil.rmtree(folder, ignore_errors=True)
    os.sync()


if __name__ == "__main__":
    main()
