"""CLI errors that need a real broker to happen (issue 19 items 2 and 3): a topic that is not
there is said, not read as empty; every error is still one or two lines, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from app.shell.cli.broker import Broker

pytestmark = [pytest.mark.broker]

ROOT = Path(__file__).resolve().parents[2]


def cli(broker: Broker, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "A2UI_STREAM_"))}
    return subprocess.run(
        [sys.executable, "-m", "app.shell.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**base, "KAFKA_BOOTSTRAP": broker.bootstrap, **env},
        timeout=180,
    )


def short(done: subprocess.CompletedProcess[str]) -> list[str]:
    lines = done.stderr.splitlines()
    assert "Traceback" not in done.stderr and "Unclosed" not in done.stderr, done.stderr
    assert 1 <= len(lines) <= 2, done.stderr
    return lines


@pytest.mark.parametrize("command", [["log", "demo"], ["deadletter", "list"]])
def test_a_topic_that_does_not_exist_is_said(broker: Broker, command: list[str]) -> None:
    prefix = f"nowhere{uuid.uuid4().hex[:8]}."
    done = cli(broker, *command, A2UI_STREAM_TOPIC_PREFIX=prefix)
    assert done.returncode == 2, done
    [line] = short(done)
    assert f"topic {prefix}" in line and "does not exist" in line
    assert "A2UI_STREAM_TOPIC_PREFIX" in line and "topics apply" in line


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ((), "stays registered (resume with --id"),  # before: nothing said
        (("--unsubscribe-on-exit",), "unsubscribed"),
    ],
)
def test_subscribe_says_what_becomes_of_its_registration(
    broker: Broker, extra: tuple[str, ...], said: str
) -> None:
    """Issue 19 item 7: a subscriber stays registered after Ctrl-C (so --id can resume it);
    the command says so, and how to remove it, when it stops."""
    import asyncio
    import signal
    import time
    from dataclasses import replace

    from app.devtools.fault_kit import apply_topics
    from app.shell.settings import load_settings

    unique = uuid.uuid4().hex[:8]
    settings = replace(load_settings({}), topic_prefix=f"sub{unique}.", partitions=1)
    asyncio.run(apply_topics(broker, settings))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "A2UI_STREAM_"))}
    env = {
        **base,
        "KAFKA_BOOTSTRAP": broker.bootstrap,
        "A2UI_STREAM_TOPIC_PREFIX": settings.topic_prefix,
        "A2UI_STREAM_PARTITIONS": "1",
    }
    sid = f"cli-{unique}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.shell.cli", "subscribe", "--run", "r", "--id", sid, *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while "subscribed as" not in proc.stderr.readline():
        assert proc.poll() is None and time.monotonic() < deadline
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest
    assert said in rest and (extra or f"a2ui-stream unsubscribe {sid}" in rest), rest
