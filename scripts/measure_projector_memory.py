"""What the projector holds, with and without its bound (issue 15 item 3), in this process.

Drives the real ``ProjectorLoop`` with the shell tier's in-memory Kafka double
(tests/shell/memory_kafka.py): RUNS runs on 6 log partitions, EVENTS envelopes each (a v2
surface of 12 components and a growing data model, updated every event), folded in
interleaved order with one full subscriber. For each cache size it prints the surfaces and
runs held, the heap they take (tracemalloc, after a full collection, minus the loop built
empty), the rebuilds and how long the fold took; then the same with half of the partitions
revoked. Usage: .venv/bin/python scripts/measure_projector_memory.py [RUNS] [EVENTS]
"""

# ruff: noqa: E402 (the imports after install() are deliberately after it)
from __future__ import annotations

import asyncio
import gc
import sys
import time
import tracemalloc
from typing import Any

import pytest

from app.compiled_core import install

install()  # an entry point: the compiled core, as the worker uses it, before app.core is imported

from tests.shell import test_projector_loop as kit
from tests.shell.memory_kafka import MemoryKafka

kit.PARTITIONS = 6


def _publish(kafka: MemoryKafka, run_id: str, sequence: int) -> None:
    kit._publish(kafka, run_id, sequence, [f"{run_id} line {i} at {sequence}" for i in range(12)])


async def measure(runs: int, events: int, cache: int) -> dict[str, Any]:
    kafka = MemoryKafka()
    names = [f"t/run-{i}" for i in range(runs)]
    with pytest.MonkeyPatch.context() as monkeypatch:
        loop = kit._loop(kafka, monkeypatch, cache=cache)
        kit._subscribe(loop, "full", delta=False)
        await loop.consumer.assign({kit._tp(p) for p in range(kit.PARTITIONS)})
        await kit._taken(loop)
        for n in range(events):
            for run in names:
                _publish(kafka, run, n)
        for p in range(kit.PARTITIONS):  # frames are not what is measured: drop them
            kafka.logs.pop(("sub-full", p), None)
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        started = time.perf_counter()
        await kit._drain(loop)
        elapsed = time.perf_counter() - started
        kafka.logs.pop(("sub-full", 0), None)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
        surfaces, cached = loop.held, len(loop.runs)
        await loop.consumer.revoke({kit._tp(p) for p in range(kit.PARTITIONS // 2)})
        gc.collect()
        after_revoke = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
    return {
        "cache": cache,
        "surfaces": surfaces,
        "runs": cached,
        "heap_mb": held / 2**20,
        "after_revoke_surfaces": loop.held,
        "after_revoke_mb": after_revoke / 2**20,
        "rebuilds": dict(loop.rebuilt),
        "evicted": loop.evicted,
        "seconds": elapsed,
    }


async def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    events = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    print(f"{runs} runs x {events} envelopes on {kit.PARTITIONS} partitions")
    for cache in (10_000_000, 10_000, 256):
        r = await measure(runs, events, cache)
        print(
            f"cache {r['cache']:>10,}: {r['surfaces']:,} surfaces / {r['runs']:,} runs held, "
            f"heap {r['heap_mb']:.1f} MB; half the partitions revoked: "
            f"{r['after_revoke_surfaces']:,} surfaces, {r['after_revoke_mb']:.1f} MB; "
            f"evicted {r['evicted']:,}, rebuilt {r['rebuilds']}, fold {r['seconds']:.1f} s"
        )


if __name__ == "__main__":
    asyncio.run(main())
