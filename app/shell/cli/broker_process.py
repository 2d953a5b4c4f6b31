"""What every path of the broker harness shares: the started broker it hands out, what a broker
can do, free loopback ports, the wait until a started broker answers, and the watcher that
cleans up after a detached one.

Shell module (the CLI's room): may start processes, open sockets and threads. The paths
themselves live in ``app.shell.cli.broker`` (the order, external, Docker),
``app.shell.cli.broker_kafka`` (a local Apache Kafka) and ``app.shell.cli.broker_tansu``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.shell.errors import BrokerUnavailableError, OperatorError

__all__ = [
    "APACHE_FEATURES",
    "FEATURES",
    "TANSU_FEATURES",
    "Broker",
    "BrokerFeatures",
    "ephemeral_start",
    "free_port",
    "run_async",
    "stop_process",
    "wait_ready",
    "watch_and_remove",
]

FEATURES = ("compaction", "transactions", "durability", "topic_configs")


@dataclass(frozen=True)
class BrokerFeatures:
    """What a broker can do that our tests care about (../shared/spec/kafka.md)."""

    compaction: bool
    transactions: bool
    durability: bool
    # Topic configs are described (config drift) and enforced (e.g. max.message.bytes).
    topic_configs: bool = True

    def has(self, feature: str) -> bool:
        if feature not in FEATURES:
            raise ValueError(f"unknown broker feature {feature!r}; known: {', '.join(FEATURES)}")
        return bool(getattr(self, feature))

    def as_dict(self) -> dict[str, bool]:
        return {name: self.has(name) for name in FEATURES}


APACHE_FEATURES = BrokerFeatures(compaction=True, transactions=True, durability=True)
TANSU_FEATURES = BrokerFeatures(
    compaction=False, transactions=False, durability=False, topic_configs=False
)


@dataclass
class Broker:
    """A running broker: where to connect, what it is, what it can do, and how to stop it."""

    kind: str  # "external" | "docker" | "apache-kafka" | "tansu"
    bootstrap: str
    features: BrokerFeatures
    description: str
    _stop: Callable[[], None] = field(repr=False, default=lambda: None)
    _restart: Callable[[bool], None] | None = field(repr=False, default=None)
    pid: int | None = None
    # A temporary directory the broker keeps its files in, removed by stop() (local Kafka
    # without --data-dir); a detached broker leaves it to a watcher (watch_and_remove).
    work_dir: Path | None = None

    @property
    def is_apache_kafka(self) -> bool:
        return self.kind in ("apache-kafka", "docker") or (
            self.kind == "external" and self.features.transactions
        )

    def stop(self) -> None:
        self._stop()

    def restart(self, *, hard: bool = False) -> None:
        """Stop and start the broker on the same ports and log directory (durability tests).
        ``hard``: SIGKILL instead of a controlled shutdown, so the restart recovers its log
        and transaction state from what was on disk."""
        if self._restart is None:
            raise OperatorError(
                f"the {self.kind} broker at {self.bootstrap} cannot be restarted here"
            )
        self._restart(hard)

    def summary(self) -> str:
        feats = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in self.features.as_dict().items())
        return f"{self.description} at {self.bootstrap} ({feats})"

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_start(source: Path = _EPHEMERAL) -> int | None:
    """The first port of the system's ephemeral range (Linux; None where it cannot be read)."""
    try:
        return int(source.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def free_port(source: Path = _EPHEMERAL) -> int:
    """A loopback port free now, for a listener started later: below the system's ephemeral
    range when there is room there, since a port of that range (what binding port 0 gives)
    can be taken meanwhile by any outgoing connection, a Kafka client's for one, before the
    process it is for binds it (seen: a fault scenario's worker, started a minute after its
    port was chosen, found it taken and exited)."""
    start = ephemeral_start(source)
    if start is not None and start > 4096:
        for _ in range(64):
            port = random.randrange(start // 2, start)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue  # a listener has it: another one
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_process(proc: subprocess.Popen[bytes], *, timeout: float) -> None:
    """Terminate ``proc`` (SIGTERM, a controlled shutdown) and wait up to ``timeout``; if it
    is still running then, kill it."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


# -- readiness --------------------------------------------------------------------------------


def run_async(coro: Any) -> Any:
    """Run a coroutine to completion from sync code, even when a loop is already running here."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result.get("value")


def _port_open(bootstrap: str) -> bool:
    host, _, port = bootstrap.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def _metadata_ok(bootstrap: str) -> bool:
    async def probe() -> bool:
        from aiokafka.admin import AIOKafkaAdminClient

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        try:
            await asyncio.wait_for(admin.start(), 10)
            await asyncio.wait_for(admin.list_topics(), 10)
            return True
        except Exception:
            return False
        finally:
            with contextlib.suppress(Exception):
                await admin.close()

    return bool(run_async(probe()))


def wait_ready(
    bootstrap: str, *, timeout: float, what: str, proc: subprocess.Popen[bytes] | None = None
) -> None:
    """Wait until the port answers and a metadata request succeeds; bounded by ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise BrokerUnavailableError(
                f"{what} exited with status {proc.returncode} while starting"
            )
        if _port_open(bootstrap) and _metadata_ok(bootstrap):
            return
        time.sleep(0.2)
    raise BrokerUnavailableError(f"{what} at {bootstrap} did not answer within {timeout:.0f}s")


# -- a detached broker ------------------------------------------------------------------------

# A watcher for a detached broker: polls its PID (a process that is not our child: kill(pid,
# 0) says whether it still exists) and removes its temporary directory once it is gone.
_WATCHER = """
import os, shutil, sys, time
pid, work = int(sys.argv[1]), sys.argv[2]
while True:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        break
    except PermissionError:
        pass
    time.sleep(1)
shutil.rmtree(work, ignore_errors=True)
"""


def watch_and_remove(broker: Broker) -> None:
    """For ``a2ui-stream broker --detach``: the broker outlives this process, and with it the
    temporary directory ``stop()`` would have removed. A small detached watcher removes the
    directory when the broker exits (stopped by its PID, as .ci/run does)."""
    if broker.pid is None or broker.work_dir is None:
        return
    subprocess.Popen(
        [sys.executable, "-c", _WATCHER, str(broker.pid), str(broker.work_dir)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
