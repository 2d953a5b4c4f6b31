"""The broker harness's local Apache Kafka: one KRaft node on loopback, from the Kafka jars
in the cache (``scripts/fetch-kafka.sh`` resolves them from Maven Central when ``mvn`` is
present), restartable on the same ports and log directory; a kept ``--data-dir`` is started
again as it is.

Shell module (the CLI's room): starts Java processes, reads and writes its work directory.
``app.shell.cli.broker`` picks this path (docs/broker.md); the shared parts (the ``Broker`` it
returns, ports, the readiness wait) are ``app.shell.cli.broker_process``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from app.shell.cli.broker_process import (
    APACHE_FEATURES,
    Broker,
    free_port,
    stop_process,
    wait_ready,
)
from app.shell.errors import BrokerUnavailableError, OperatorError

__all__ = [
    "KAFKA_VERSION",
    "REPO_ROOT",
    "kafka_jars_dir",
    "local_kafka_possible",
    "start_local_kafka",
]

KAFKA_VERSION = "3.9.1"
REPO_ROOT = Path(__file__).resolve().parents[3]


def _cache_dir(env: Mapping[str, str]) -> Path:
    base = env.get("A2UI_STREAM_CACHE") or str(Path.home() / ".cache" / "a2ui-stream")
    return Path(base)


def kafka_jars_dir(env: Mapping[str, str] | None = None, *, fetch: bool = False) -> Path | None:
    """The directory of Kafka jars in the cache; with ``fetch``, resolve them with Maven first."""
    env = os.environ if env is None else env
    libs = _cache_dir(env) / f"kafka-{KAFKA_VERSION}" / "libs"
    if (libs / ".complete").exists():
        return libs
    script = REPO_ROOT / "scripts" / "fetch-kafka.sh"
    if not fetch or shutil.which("mvn") is None or not script.exists():
        return None
    done = subprocess.run(
        ["bash", str(script), str(_cache_dir(env))], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise BrokerUnavailableError(f"could not resolve the Kafka jars: {done.stderr.strip()}")
    return libs if (libs / ".complete").exists() else None


def local_kafka_possible(env: Mapping[str, str]) -> bool:
    if shutil.which("java") is None:
        return False
    if kafka_jars_dir(env) is not None:
        return True
    return shutil.which("mvn") is not None and (REPO_ROOT / "scripts" / "fetch-kafka.sh").exists()


def _server_properties(port: int, cport: int, log_dir: Path) -> str:
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{cport}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT",
            f"log.dirs={log_dir}",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=4",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=4",
            "group.initial.rebalance.delay.ms=0",
            # Small segments and a short cleaner backoff so compaction is observable in tests.
            "log.cleaner.backoff.ms=500",
            "log.cleaner.min.compaction.lag.ms=0",
            "auto.create.topics.enable=false",
            "",
        ]
    )


class _LocalKafka:
    """One KRaft Apache Kafka process on loopback; restartable on the same ports and log dir."""

    def __init__(self, libs: Path, work: Path, say: Callable[[str], None]) -> None:
        self.libs, self.work, self.say = libs, work, say
        self.port, self.cport = free_port(), free_port()
        self.log_dir = work / "data"
        self.config = work / "server.properties"
        self.config.write_text(_server_properties(self.port, self.cport, self.log_dir))
        self.proc: subprocess.Popen[bytes] | None = None
        self._format()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _java(self, *args: str) -> list[str]:
        log4j = REPO_ROOT / "scripts" / "kafka" / "log4j.properties"
        return [
            "java",
            "-Xms256m",
            "-Xmx768m",
            "-XX:+UseG1GC",
            f"-Dlog4j.configuration=file:{log4j}",
            f"-Dkafka.logs.file={self.work / 'broker.log'}",
            "-cp",
            f"{self.libs}/*",
            *args,
        ]

    def _format(self) -> None:
        cluster_id = "a2uiStreamLocalKafka0"[:22]
        # --ignore-formatted: a --data-dir kept from an earlier run is started as it is, with
        # its topics and records (ports are new each start; the quorum is this one node)
        done = subprocess.run(
            self._java(
                "kafka.tools.StorageTool",
                "format",
                "-t",
                cluster_id,
                "-c",
                str(self.config),
                "--ignore-formatted",
            ),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise BrokerUnavailableError(f"kafka storage format failed: {done.stderr[-2000:]}")

    def start(self) -> None:
        # the broker writes to its own copy of the descriptor; ours is closed once it has started
        with open(self.work / "stdout.log", "ab") as out:
            self.proc = subprocess.Popen(
                self._java("kafka.Kafka", str(self.config)),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        try:
            wait_ready(self.bootstrap, timeout=90.0, what="local Apache Kafka", proc=self.proc)
        except BaseException:
            self.stop()
            raise
        self.say(f"broker: Apache Kafka {KAFKA_VERSION} (pid {self.proc.pid}) at {self.bootstrap}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_process(proc, timeout=30)

    def restart(self, hard: bool = False) -> None:
        if hard and self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.stop()
        self.start()


def start_local_kafka(
    env: Mapping[str, str], say: Callable[[str], None], data_dir: Path | None
) -> Broker:
    """Start a local Apache Kafka in ``data_dir`` (kept), or in a temporary directory that
    ``stop()`` removes; a ``BrokerUnavailableError`` says what is missing."""
    if shutil.which("java") is None:
        raise BrokerUnavailableError("local Apache Kafka needs Java 17 on PATH")
    libs = kafka_jars_dir(env, fetch=True)
    if libs is None:
        raise BrokerUnavailableError(
            "the Kafka jars are not in the cache and cannot be fetched: run scripts/fetch-kafka.sh "
            "(needs Maven) or set KAFKA_BOOTSTRAP"
        )
    work = data_dir or Path(tempfile.mkdtemp(prefix="a2ui-stream-kafka-"))
    if data_dir is not None and (data_dir / "data" / "meta.properties").exists():
        _refuse_in_use(data_dir)  # rewriting its config would break the running broker
        say(f"broker: reusing {data_dir} (kept from an earlier start: topics and records stay)")
    work.mkdir(parents=True, exist_ok=True)
    node = _LocalKafka(libs, work, say)
    try:
        node.start()
    except BrokerUnavailableError as exc:
        raise BrokerUnavailableError(f"{exc} (its log: {work / 'broker.log'})") from None

    def stop() -> None:
        node.stop()
        if data_dir is None:
            shutil.rmtree(work, ignore_errors=True)

    broker = Broker(
        "apache-kafka",
        node.bootstrap,
        APACHE_FEATURES,
        f"Apache Kafka {KAFKA_VERSION} (local KRaft, {work})",
        _stop=stop,
        _restart=node.restart,
        work_dir=None if data_dir is not None else work,
    )
    broker.pid = node.proc.pid if node.proc else None
    return broker


def _refuse_in_use(data_dir: Path) -> None:
    """A running Kafka holds a lock on ``data/.lock`` (Java's FileChannel.lock, an fcntl lock
    on Linux): a kept --data-dir that another broker is using is refused, not restarted."""
    import fcntl

    lock = data_dir / "data" / ".lock"
    if not lock.exists():
        return
    with open(lock, "a+b") as handle:
        try:
            fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise OperatorError(
                f"--data-dir {data_dir} is in use by a running broker: stop it first (its PID "
                "is in the --pid-file it was started with), or pass another --data-dir"
            ) from None
        fcntl.lockf(handle, fcntl.LOCK_UN)
