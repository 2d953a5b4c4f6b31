"""The fault suite's worker processes (``WorkerProcess``: an ``a2ui-stream worker`` started,
killed, paused, its log and metrics read), the broker's open transactions, and the topics of a
settings' prefix. Part of the kit (``app.devtools.fault_kit``).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition

from app.shell.cli.broker import Broker, free_port
from app.shell.settings import Settings
from app.shell.worker.topics_admin import desired_for, ensure_topics

__all__ = ["WorkerProcess", "apply_topics", "open_transactions", "topic_names"]


def topic_names(settings: Settings) -> dict[str, str]:
    """Topic id -> topic name for these settings (topics/topics.json)."""
    return {spec.id: spec.name for spec in desired_for(settings)}


# -- workers ----------------------------------------------------------------------------------

# mode logs this when a service of the worker crashed (the worker may keep its process alive).
_CRASH_LINE = re.compile(rb"Crashed reason=")


class WorkerProcess:
    """`a2ui-stream worker` as a child process (the same command users run).

    It remembers whether each exit was ours (``kill``/``stop``): any other exit, or a service
    crash in its log, is a crash (``crashes``)."""

    def __init__(
        self,
        broker: Broker,
        settings: Settings,
        worker_id: str,
        tmp: Path,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.broker, self.settings, self.worker_id, self.tmp = broker, settings, worker_id, tmp
        self.extra_env = dict(extra_env or {})
        self.web_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.kills = 0
        self.paused = False
        self.exits: list[int] = []  # return codes of exits we did not cause

    def env(self) -> dict[str, str]:
        s = self.settings
        return {
            **os.environ,
            "KAFKA_BOOTSTRAP": self.broker.bootstrap,
            "A2UI_STREAM_TOPIC_PREFIX": s.topic_prefix,
            "A2UI_STREAM_PARTITIONS": str(s.partitions),
            "A2UI_STREAM_APP_ID": s.app_id,
            "A2UI_STREAM_FAST_GROUPS": "1",
            "A2UI_STREAM_WORKER_ID": self.worker_id,
            "A2UI_STREAM_WEB_PORT": str(self.web_port),
            "A2UI_STREAM_DATA_DIR": str(self.tmp / f"data-{self.worker_id}"),
            "A2UI_STREAM_LOG_LEVEL": "info",
            # far below the runs in play, so every scenario moves run states out of memory and
            # back under its faults (the validator's bounded cache, issue 15)
            "A2UI_STREAM_VALIDATOR_CACHE_RUNS": os.environ.get(
                "A2UI_STREAM_VALIDATOR_CACHE_RUNS", "8"
            ),
            # one deployment: every worker of the fleet verifies the others' host commands
            "A2UI_STREAM_GATEWAY_KEY": os.environ.get("A2UI_STREAM_GATEWAY_KEY")
            or hashlib.sha256(s.app_id.encode()).hexdigest(),
            **self.extra_env,
        }

    @property
    def log_path(self) -> Path:
        return self.tmp / f"worker-{self.worker_id}.log"

    def start(self) -> None:
        self._note_exit()
        self.starts += 1
        # the child writes to its own copy of the descriptor; ours is closed once it has started
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "app.shell.cli", "worker"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env(),
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _note_exit(self) -> None:
        """An exit we did not cause is a crash; forget the process either way."""
        if self.proc is not None and self.proc.poll() is not None:
            self.exits.append(int(self.proc.returncode))
            self.proc = None

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, an open transaction is left behind."""
        self.paused = False  # SIGKILL ends a stopped process too
        self._note_exit()
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
            self.kills += 1
            self.proc = None

    def pause(self) -> None:
        """SIGSTOP: the process stands still (a GC pause, a stalled VM) with whatever it held:
        no heartbeat, no request, an open transaction stays open."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        """SIGCONT: it carries on where it stood, unaware of what the group did meanwhile."""
        if self.proc is not None and self.paused:
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def stop(self) -> None:
        self.resume()  # a stopped process would not handle SIGTERM
        self._note_exit()
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
            self.proc = None

    @property
    def crashes(self) -> int:
        """Exits we did not cause, plus service crashes the worker logged."""
        self._note_exit()
        logged = 0
        if self.log_path.exists():
            logged = len(_CRASH_LINE.findall(self.log_path.read_bytes()))
        return len(self.exits) + logged

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.web_port}/metrics"
        with urllib.request.urlopen(url, timeout=3) as response:
            return str(response.read().decode())

    def counter(self, name: str) -> int:
        """The sum of one counter's samples on /metrics (0 while the worker is not serving)."""
        try:
            text = self.metrics()
        except OSError:
            return 0
        total = 0
        for line in text.splitlines():
            if line.startswith(name) and line[len(name) : len(name) + 1] in (" ", "{"):
                total += int(float(line.rsplit(" ", 1)[1]))
        return total

    def partitions(self) -> list[int]:
        """The admission partitions this worker's validator owns and has restored (the
        partitions of its consumer-lag gauge; none while it is not serving)."""
        try:
            text = self.metrics()
        except OSError:
            return []
        return sorted(
            int(m.group(1)) for m in re.finditer(r'a2ui_consumer_lag\{[^}]*partition="(\d+)"', text)
        )

    def outcomes_counted(self) -> int:
        """Records this incarnation decided (admitted, refused or deduplicated)."""
        return sum(
            self.counter(name)
            for name in ("a2ui_admitted_total", "a2ui_refused_total", "a2ui_deduplicated_total")
        )

    async def wait_progress(self, *, beyond: int = 0, timeout: float = 120.0) -> bool:
        """Wait (bounded) until this incarnation has decided more than ``beyond`` records."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await asyncio.to_thread(self.outcomes_counted) > beyond:
                return True
            if not self.alive():
                return False
            await asyncio.sleep(0.2)
        return False

    def log_count(self, needle: bytes) -> int:
        """How often ``needle`` occurs in this worker's log (all incarnations)."""
        return self.log_path.read_bytes().count(needle) if self.log_path.exists() else 0

    def tail(self, n: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-n:] if self.log_path.exists() else ""


async def open_transactions(
    bootstrap: str, topics: Sequence[str], partitions: Sequence[int], *, timeout: float = 10.0
) -> list[tuple[str, int]]:
    """The topic-partitions among ``topics`` x ``partitions`` where a transaction is open: the
    last stable offset is below the high watermark (records written, no commit or abort marker
    yet). Asked of the broker, so it is true of a producer that stands still (SIGSTOP)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed",
        fetch_max_wait_ms=50,
    )
    await consumer.start()
    try:
        tps = [TopicPartition(t, p) for t in topics for p in partitions]
        if not tps:
            return []
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)  # read_committed: the last stable offset
        deadline = time.monotonic() + timeout
        while any(consumer.last_stable_offset(tp) is None for tp in tps):
            if time.monotonic() > deadline:
                raise TimeoutError("no fetch response told the last stable offsets")
            await consumer.getmany(timeout_ms=100)
        return [
            (tp.topic, tp.partition)
            for tp in tps
            if (consumer.last_stable_offset(tp) or 0) < (consumer.highwater(tp) or 0)
        ]
    finally:
        await consumer.stop()


async def apply_topics(broker: Broker, settings: Settings) -> None:
    await ensure_topics(broker.bootstrap, desired_for(settings))
