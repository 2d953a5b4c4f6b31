"""The read side's store (app.shell.worker.run_store): what it keeps, and that a damaged or
stale store is detected and rebuilt from the log rather than served."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from app.shell.worker.run_store import STALE_MS, RunStore

TOPIC = "t.runs.log"


def _write(store: RunStore, partition: int, run: str, first: int, count: int, offset: int) -> None:
    writer = store.writer()
    for i in range(count):
        kind = "run.completed" if i == count - 1 and run.endswith("done") else "ui.a2ui-surface"
        writer.put(partition, run, first + i, kind, b'{"n":%d}' % (first + i), offset + i, 1000)
    writer.advance(partition, offset + count)
    writer.commit()


def test_events_summaries_checkpoints_and_tombstones(tmp_path: Path) -> None:
    store = RunStore.open(tmp_path / "s", TOPIC)
    _write(store, 1, "acme/r", 0, 3, 10)
    _write(store, 1, "acme/done", 0, 2, 13)
    _write(store, 2, "acme/r", 0, 1, 0)  # the same runId on another partition is another key
    assert [e.sequence for e in store.events(1, "acme/r")] == [0, 1, 2]
    assert store.events(1, "acme/r")[2].data == b'{"n":2}'
    assert store.summary(1, "acme/done").status == "completed"  # type: ignore[union-attr]
    assert {s.run_id for s in store.summaries(1)} == {"acme/r", "acme/done"}
    assert store.checkpoint(1)[0] == 15  # type: ignore[index]
    writer = store.writer()
    assert writer.delete(1, "acme/done", 0) is False
    assert writer.delete(1, "acme/done", 1) is True  # its last event: the run is gone
    assert writer.delete(1, "acme/done", 1) is False  # a tombstone for nothing counts nothing
    writer.commit()
    assert store.summary(1, "acme/done") is None and store.events(1, "acme/done") == []
    store.drop(1)
    assert store.events(1, "acme/r") == [] and store.checkpoint(1) is None
    assert [e.sequence for e in store.events(2, "acme/r")] == [0]
    store.close()


def test_a_checkpoint_the_log_cannot_back_is_not_resumed(tmp_path: Path) -> None:
    store = RunStore.open(tmp_path / "s", TOPIC)
    _write(store, 0, "acme/r", 0, 5, 0)
    assert store.resume_offset(0, log_end=9) == 5  # resumes where it stopped
    now = int(time.time() * 1000)
    assert store.resume_offset(0, log_end=9, now_ms=now + STALE_MS + 60_000) == 0  # stale
    assert store.events(0, "acme/r") == []  # ... and its data dropped
    _write(store, 0, "acme/r", 0, 5, 0)
    assert store.resume_offset(0, log_end=3) == 0  # the log is shorter: recreated
    assert store.events(0, "acme/r") == []
    store.close()


def test_a_store_of_another_topic_is_rebuilt(tmp_path: Path) -> None:
    store = RunStore.open(tmp_path / "s", TOPIC)
    _write(store, 0, "acme/r", 0, 2, 0)
    store.close()
    again = RunStore.open(tmp_path / "s", TOPIC)
    assert not again.rebuilt and len(again.events(0, "acme/r")) == 2
    again.close()
    other = RunStore.open(tmp_path / "s", "another.runs.log")
    assert other.rebuilt and other.events(0, "acme/r") == []
    other.close()


def test_a_damaged_store_is_detected_and_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = RunStore.open(path, TOPIC)
    _write(store, 0, "acme/r", 0, 50, 0)
    store.close()
    # a half-written store: its manifest and its current-file pointer torn mid-write
    for name in os.listdir(path):
        if name.startswith(("MANIFEST", "CURRENT")):
            data = (path / name).read_bytes()
            (path / name).write_bytes(data[: len(data) // 2] + b"\x00garbage")
    reopened = RunStore.open(path, TOPIC)
    assert reopened.rebuilt
    assert reopened.events(0, "acme/r") == [] and reopened.checkpoint(0) is None
    _write(reopened, 0, "acme/r", 0, 1, 0)  # and it works again
    assert len(reopened.events(0, "acme/r")) == 1
    reopened.close()


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from app.shell.worker.run_store import RunStore
    store = RunStore.open(Path(sys.argv[1]), "t.runs.log")
    print("open", flush=True)
    batch = 0
    while True:
        writer = store.writer()
        for i in range(100):
            offset = batch * 100 + i
            writer.put(0, f"acme/r{offset % 7}", offset, "ui.a2ui-surface", b"x" * 900, offset, 1)
        writer.advance(0, batch * 100 + 100)
        writer.commit()
        batch += 1
    """
)


def test_a_crash_mid_write_leaves_a_prefix_of_the_log_up_to_the_checkpoint(
    tmp_path: Path,
) -> None:
    """SIGKILL while batches are written: after reopening, the store holds exactly the events
    of the offsets below its checkpoint (every batch is atomic with its checkpoint), so the
    tail resumes there and the store never holds an event the checkpoint does not cover."""
    path = tmp_path / "s"
    for delay in (0.3, 0.7):
        with subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)],
            stdout=subprocess.PIPE,
            cwd=Path(__file__).resolve().parents[2],
        ) as child:  # closes its stdout pipe
            assert child.stdout is not None and child.stdout.readline() == b"open\n"
            time.sleep(delay)
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        store = RunStore.open(path, TOPIC)
        assert not store.rebuilt
        checkpoint = store.checkpoint(0)
        assert checkpoint is not None and checkpoint[0] > 0
        offsets = sorted(e.offset for run in range(7) for e in store.events(0, f"acme/r{run}"))
        assert offsets == list(range(checkpoint[0])), (len(offsets), checkpoint)
        store.drop(0)
        store.close()


def test_both_local_stores_keep_their_sst_indexes_in_the_block_cache(tmp_path: Path) -> None:
    """The index blocks of RocksDB's files count against the stores' block cache (and level 0's
    are pinned there): by default RocksDB holds every open file's index outside it, so a
    worker's memory grew with what it ever wrote (run_store.bounded_options). Measured by the
    cache's own pinned bytes after 20,000 writes to each, a flush and some reads: 87 bytes with
    RocksDB's default table options (nothing but the cache's own handles), about 9 KB and more
    with these."""
    from app.shell.worker.validator_store import ValidatorStore

    runs = RunStore.open(tmp_path / "runs", TOPIC)
    states = ValidatorStore.open(tmp_path / "states")
    try:
        for start in range(0, 20_000, 1000):
            _write(runs, 0, f"acme/r{start}", 0, 1000, start)
        states.put_many(0, [(f"acme/r{i}", b"x" * 300) for i in range(20_000)])
        for store in (runs, states):
            db = store._db  # noqa: SLF001
            db.flush()
            for i in range(0, 20_000, 500):
                db.get(b"probe%d" % i)
            pinned = db.property_int_value("rocksdb.block-cache-pinned-usage")
            assert pinned is not None and pinned > 1_000
    finally:
        runs.close()
        states.close()
