"""Memory of the read side per recorded event, before (the whole log in a RunIndex) and after
(the owned partitions in the run store), for docs/http.md (issue 15 item 2).

Not part of the product. Feeds N recorded events of about 1.5 KB (scripts/bench_store.py's
shape) into the index's record path in one process and reports the Python heap growth
(tracemalloc) and the RSS growth, per event:

    python scripts/measure_read_side.py new 20000
    python scripts/measure_read_side.py old 20000 /path/to/old_run_index.py
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import random
import resource
import sys
import tempfile
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import _event  # noqa: E402

from app.compiled_core import install  # noqa: E402

install()  # an entry point: the compiled core, as the worker uses it, before app.core is imported

from app.core.runlog.keys import log_key  # noqa: E402


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _records(n: int, runs: int) -> list[SimpleNamespace]:
    rng = random.Random(3)
    found = []
    for offset in range(n):
        run = f"tenant/run-{offset % runs:06d}"
        sequence = offset // runs
        found.append(
            SimpleNamespace(
                key=log_key(run, sequence),
                value=_event(run, sequence, rng),
                offset=offset,
                timestamp=1_700_000_000_000 + offset,
                headers=[("a2ui-source", f"0:{offset}".encode())],
            )
        )
    return found


async def main() -> None:
    kind, n = sys.argv[1], int(sys.argv[2])
    records = _records(n, max(1, n // 50))
    gc.collect()
    rss0 = _rss_kb()
    tracemalloc.start()
    if kind == "old":
        spec = importlib.util.spec_from_file_location("old_run_index", sys.argv[3])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        index = module.RunIndex("unused:9092", "log", "dead")
        for start in range(0, n, 2000):
            touched: set[str] = set()
            for record in records[start : start + 2000]:
                index._on_log(0, record, touched)
    else:
        from aiokafka import TopicPartition

        from app.shell.worker.run_index import RunIndex
        from app.shell.worker.run_store import RunStore

        index = RunIndex("unused:9092", "log", "dead", Path(tempfile.mkdtemp()) / "s")
        index._store = RunStore.open(index.store_path, "log")
        index.partitions, index.owned, index.ready_partitions = 1, {0}, {0}
        tp = TopicPartition("log", 0)
        for start in range(0, n, 2000):
            index._ingest({tp: records[start : start + 2000]})
    gc.collect()
    heap, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = _rss_kb() - rss0
    print(
        f"{kind}: {n} events: Python heap {heap / n:,.0f} B/event, "
        f"RSS +{rss / 1024:.0f} MB ({rss * 1024 / n:,.0f} B/event)"
    )


if __name__ == "__main__":
    asyncio.run(main())
