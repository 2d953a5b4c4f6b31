"""`a2ui-stream broker --kind kafka` with --data-dir and --detach (issue 19 items 2 and 7).

Before: a --data-dir that existed failed ("already formatted"), and a detached broker stopped
by its PID (as .ci/run does) left its temporary directory behind. Now a kept directory starts
again with its topics and records, one in use by a running broker is refused (rewriting its
config broke that broker), and a detached broker's temporary directory goes when it stops."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from app.core.runlog.topic_plan import TopicSpec
from app.shell.cli.broker import free_port, kafka_jars_dir, local_kafka_possible
from app.shell.worker.kafka_io import read_topic, started
from app.shell.worker.topics_admin import ensure_topics

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _local_kafka() -> None:
    if not local_kafka_possible(os.environ) or kafka_jars_dir() is None:
        pytest.skip("needs Java and the Kafka jars in the cache (scripts/fetch-kafka.sh)")


def broker(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP", "A2UI_STREAM_BROKER")
    }
    return subprocess.run(
        [sys.executable, "-m", "app.shell.cli", "broker", "--kind", "kafka", "--detach", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=180,
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stop(pid: int, *, within: float = 60) -> None:
    os.kill(pid, 15)
    deadline = time.monotonic() + within
    while alive(pid):
        assert time.monotonic() < deadline, f"broker {pid} did not stop"
        time.sleep(0.2)


async def put(bootstrap: str, topic: str) -> None:
    await ensure_topics(bootstrap, [TopicSpec("kept", topic, 1, 1)])
    async with started(AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")) as producer:
        await producer.send_and_wait(topic, b"kept across restarts")


def test_a_kept_data_dir_starts_again_and_one_in_use_is_refused(tmp_path: Path) -> None:
    data, pid_file, topic = (
        tmp_path / "kafka",
        tmp_path / "kafka.pid",
        f"kept-{uuid.uuid4().hex[:8]}",
    )
    first = broker("--data-dir", str(data), "--pid-file", str(pid_file))
    assert first.returncode == 0, first.stderr
    pid = int(pid_file.read_text())
    try:
        asyncio.run(put(first.stdout.strip(), topic))
        busy = broker("--data-dir", str(data), "--pid-file", str(tmp_path / "other.pid"))
        assert busy.returncode == 2, busy
        assert "is in use by a running broker" in busy.stderr and "Traceback" not in busy.stderr
        assert alive(pid), "a second start on the same directory broke the running broker"
    finally:
        stop(pid)
    again = broker("--data-dir", str(data), "--pid-file", str(pid_file))
    assert again.returncode == 0, again.stderr  # before: "already formatted"
    assert "reusing" in again.stderr
    try:
        records = asyncio.run(read_topic(again.stdout.strip(), topic, timeout=60))
        assert [r.value for r in records] == [b"kept across restarts"]
    finally:
        stop(int(pid_file.read_text()))


def test_a_detached_broker_stopped_by_its_pid_leaves_no_directory(tmp_path: Path) -> None:
    pid_file = tmp_path / "kafka.pid"
    done = broker("--pid-file", str(pid_file))
    assert done.returncode == 0, done.stderr
    [work] = re.findall(r"local KRaft, (/[^)]+)\)", done.stderr)
    assert Path(work).is_dir()
    stop(int(pid_file.read_text()))
    deadline = time.monotonic() + 30
    while Path(work).exists():  # the watcher polls the PID once a second
        assert time.monotonic() < deadline, f"{work} is still there"
        time.sleep(0.2)


def test_a_worker_on_a_fresh_kafka_logs_no_error(tmp_path: Path) -> None:
    """Issue 19 item 5. Before: a worker on a Kafka that had never seen a consumer group
    logged "Group Coordinator Request failed: GroupCoordinatorNotAvailableError" at ERROR while
    the offsets topic was being created, and "Topic ...-__assignor-__leader not found"."""
    pid_file = tmp_path / "kafka.pid"
    started_broker = broker("--pid-file", str(pid_file))
    assert started_broker.returncode == 0, started_broker.stderr
    log = tmp_path / "worker.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "A2UI_STREAM_"))}
    env.update(
        KAFKA_BOOTSTRAP=started_broker.stdout.strip(),
        A2UI_STREAM_WEB_PORT=str(free_port()),
        A2UI_STREAM_DATA_DIR=str(tmp_path / "data"),
        A2UI_STREAM_HTTP_TOKENS="a-token-for-the-test",
        A2UI_STREAM_FAST_GROUPS="1",
    )
    with log.open("wb") as out:  # the worker writes to its own copy of the descriptor
        worker = subprocess.Popen(
            [sys.executable, "-m", "app.shell.cli", "worker"],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=env,
        )
    try:
        deadline = time.monotonic() + 120
        while "worker: ready" not in log.read_text():
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
    finally:
        worker.send_signal(15)
        worker.wait(timeout=90)
        stop(int(pid_file.read_text()))
    text = log.read_text()
    assert "[ERROR]" not in text and "Traceback" not in text, text[-3000:]
