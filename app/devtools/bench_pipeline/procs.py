"""The processes of one pass, waiting for them (consumer groups stable, offsets committed), and
the watcher: a ``read_committed`` consumer that times each record's outcome.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
)

from app.devtools.bench_pipeline.records import READY_TIMEOUT
from app.shell.wire import SOURCE_HEADER

__all__ = ["OutcomeWatcher", "Processes", "group_committed", "group_stable", "wait_until"]


@dataclass(eq=False)
class Processes:
    tmp: Path
    procs: list[tuple[subprocess.Popen[bytes], Path]] = field(default_factory=list)

    def spawn(self, argv: list[str], env: dict[str, str], name: str) -> None:
        log_path = self.tmp / f"{name}.log"
        with open(log_path, "ab") as log_file:
            proc = subprocess.Popen(argv, env=env, stdout=log_file, stderr=subprocess.STDOUT)
        self.procs.append((proc, log_path))

    def check(self) -> None:
        for proc, log_path in self.procs:
            if proc.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"a bench process exited ({proc.returncode}):\n{tail}")

    def tails(self) -> str:
        return "".join(
            f"\n--- {path.name}:\n{path.read_text(errors='replace')[-1500:]}"
            for _, path in self.procs
        )

    def stop(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc, _ in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()


async def wait_until(what: str, check: Callable[[], Any], procs: Processes | None) -> Any:
    """Poll ``check`` (async, None/False = not yet) every 50 ms, bounded."""
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        got = await check()
        if got:
            return got
        if procs is not None:
            procs.check()
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


# A broker seconds old has no group coordinator yet (its offsets topic is still being created
# and loaded): the admin calls below raise one of these, which means "not yet", not a failure.
_NO_COORDINATOR_YET = (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
)


async def group_stable(admin: AIOKafkaAdminClient, group: str, members: int) -> bool:
    try:
        [response] = await admin.describe_consumer_groups([group])
    except _NO_COORDINATOR_YET:
        return False
    _, _, state, _, _, found = response.groups[0]
    return state == "Stable" and len(found) == members


async def group_committed(admin: AIOKafkaAdminClient, group: str) -> dict[int, int]:
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    except _NO_COORDINATOR_YET:
        return {}  # nothing committed that anyone could read yet
    return {tp.partition: meta.offset for tp, meta in offsets.items() if meta.offset >= 0}


class OutcomeWatcher:
    """The bench's own consumer of the outcomes: the time each one became visible, keyed by
    the admission record it answers (``partition:offset``)."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int, isolation: str):
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            isolation_level=isolation,
            max_partition_fetch_bytes=8 * 1024 * 1024,
        )
        self.tps = [TopicPartition(t, p) for t in topics for p in range(partitions)]
        self.seen: dict[str, float] = {}
        self.by_topic: dict[str, int] = dict.fromkeys(topics, 0)
        self.duplicates = 0
        self.own_offsets = isolation == "read_uncommitted"  # raw: the records themselves

    async def start(self) -> None:
        await self.consumer.start()
        self.consumer.assign(self.tps)
        await self.consumer.seek_to_beginning(*self.tps)

    async def stop(self) -> None:
        await self.consumer.stop()

    async def until(self, count: int, procs: Processes | None, timeout: float = 300) -> float:
        """Read until ``count`` outcomes are seen; the time the last one was."""
        deadline = time.monotonic() + timeout
        last = time.perf_counter()
        while len(self.seen) < count:
            got = await self.consumer.getmany(timeout_ms=200, max_records=20000)
            now = time.perf_counter()
            for tp, records in got.items():
                for r in records:
                    if self.own_offsets:
                        source = f"{r.partition}:{r.offset}"
                    else:
                        raw = dict(r.headers or ()).get(SOURCE_HEADER)
                        if raw is None:
                            continue
                        source = raw.decode()
                    if source in self.seen:
                        self.duplicates += 1
                        continue
                    self.seen[source] = now
                    self.by_topic[tp.topic] += 1
                    last = now
            if procs is not None:
                procs.check()
            if time.monotonic() > deadline:
                tails = procs.tails() if procs is not None else ""
                raise RuntimeError(
                    f"{len(self.seen)} of {count} outcomes in {timeout:.0f} s{tails}"
                )
        return last
