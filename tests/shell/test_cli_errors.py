"""Every CLI error is one or two lines that say what is wrong and what to do, exit status 2
for usage and configuration, no traceback unless --debug (issue 19 item 2).

Before: a wrong or unreachable KAFKA_BOOTSTRAP gave a 30-line traceback ending in
KafkaConnectionError (ValueError for `127.0.0.1:abc`) and "Unclosed AIOKafkaProducer" in
publish, log, deadletter list, subscribe and topics apply; a port in use printed the banner,
then OSError(98) inside 60 lines of traceback. No broker is needed: every case fails before
one would be used.
"""

from __future__ import annotations

import errno
import io
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from aiokafka.errors import KafkaConnectionError

from app.shell.errors import EXIT_BUG, EXIT_USAGE, OperatorError, explain, report

ROOT = Path(__file__).resolve().parents[2]

COMMANDS = {
    "publish": ["publish", "examples/records.jsonl"],
    "log": ["log", "demo"],
    "deadletter list": ["deadletter", "list"],
    "subscribe": ["subscribe", "--run", "demo"],
    "topics apply": ["topics", "apply"],
    "worker": ["worker"],
    "up": ["up"],
    "broker": ["broker"],
}
# (KAFKA_BOOTSTRAP, what the message must say)
ADDRESSES = {
    "127.0.0.1:9999": "nothing listens on 127.0.0.1:9999",
    "kafka:9092": "'kafka' does not resolve (kafka is the broker's name inside docker compose",
    "127.0.0.1": "'127.0.0.1' has no port",
    "127.0.0.1:abc": "'abc' is not a port",
}


def _cli(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "A2UI_STREAM_"))}
    return subprocess.run(
        [sys.executable, "-m", "app.shell.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**base, **env},
        timeout=120,
    )


def _assert_short(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    lines = done.stderr.splitlines()
    assert done.returncode == EXIT_USAGE, done
    assert 1 <= len(lines) <= 2, done.stderr
    assert lines[0].startswith("a2ui-stream: "), done.stderr
    assert "Traceback" not in done.stderr and "Unclosed" not in done.stderr, done.stderr
    for needle in needles:
        assert needle in done.stderr, done.stderr


@pytest.fixture(scope="module")
def matrix() -> dict[tuple[str, str], subprocess.CompletedProcess[str]]:
    """Every command against every bad address (two at a time: the machine is shared)."""
    cases = [(c, a) for c in COMMANDS for a in ADDRESSES]
    port = str(_free_port())

    def one(case: tuple[str, str]) -> subprocess.CompletedProcess[str]:
        command, address = case
        return _cli(COMMANDS[command], KAFKA_BOOTSTRAP=address, A2UI_STREAM_WEB_PORT=port)

    with ThreadPoolExecutor(2) as pool:
        return dict(zip(cases, pool.map(one, cases), strict=True))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("address", list(ADDRESSES))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_bad_or_unreachable_bootstrap_is_one_or_two_lines(
    matrix: dict[tuple[str, str], subprocess.CompletedProcess[str]], command: str, address: str
) -> None:
    done = matrix[(command, address)]
    _assert_short(done, ADDRESSES[address], address)
    assert "KAFKA_BOOTSTRAP" in done.stderr


def test_what_to_do_is_said() -> None:
    away = _cli(["log", "demo"], KAFKA_BOOTSTRAP="127.0.0.1:9999")
    assert "a2ui-stream up" in away.stderr and "set KAFKA_BOOTSTRAP" in away.stderr
    broker = _cli(["broker"], KAFKA_BOOTSTRAP="127.0.0.1:9999")
    assert "Unset KAFKA_BOOTSTRAP to start a broker here" in broker.stderr


def test_debug_adds_the_traceback_before_or_after_the_command() -> None:
    for args in (["--debug", "log", "demo"], ["log", "demo", "--debug"]):
        done = _cli(args, KAFKA_BOOTSTRAP="127.0.0.1:9999")
        assert done.returncode == EXIT_USAGE
        assert "Traceback" in done.stderr and "BrokerUnavailableError" in done.stderr
        assert done.stderr.splitlines()[-1].startswith("Start one")


@pytest.fixture
def listening() -> Iterator[int]:
    """A port something already listens on (it accepts and closes: not Kafka, not ours)."""
    server = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield int(server.getsockname()[1])
    finally:
        server.close()


@pytest.mark.parametrize("command", [["up"], ["worker"]])
def test_a_web_port_in_use_is_said_before_anything_starts(
    listening: int, command: list[str]
) -> None:
    done = _cli(command, A2UI_STREAM_WEB_PORT=str(listening), KAFKA_BOOTSTRAP="127.0.0.1:9999")
    _assert_short(done, f"127.0.0.1:{listening} is in use", f"A2UI_STREAM_WEB_PORT={listening + 1}")
    assert "a2ui-stream is up" not in done.stdout  # no banner, no broker started


def test_an_address_that_is_not_kafka_is_said(listening: int) -> None:
    done = _cli(["publish", "examples/records.jsonl"], KAFKA_BOOTSTRAP=f"127.0.0.1:{listening}")
    _assert_short(done, "not a Kafka broker")


def test_a_bad_setting_is_named() -> None:
    done = _cli(["log", "demo"], KAFKA_BOOTSTRAP="127.0.0.1:9999", A2UI_STREAM_PARTITIONS="x")
    _assert_short(done, "A2UI_STREAM_PARTITIONS='x' is not an integer")


def test_explain_maps_library_errors_the_operator_can_act_on() -> None:
    assert isinstance(explain(KafkaConnectionError("Unable to bootstrap")), OperatorError)
    in_use = OSError(errno.EADDRINUSE, "Address already in use")
    assert "A2UI_STREAM_WEB_PORT" in str(explain(in_use))
    assert explain(ValueError("x")) is None  # a bug


def test_a_bug_says_so_and_how_to_report_it() -> None:
    out = io.StringIO()
    assert report(ValueError("boom"), out=out) == EXIT_BUG
    assert out.getvalue().splitlines() == [
        "a2ui-stream: internal error: ValueError: boom",
        "  this is a bug in a2ui-stream: run the command again with --debug for the traceback, "
        "and report it with that",
    ]
    out = io.StringIO()
    try:
        raise ValueError("boom")
    except ValueError as exc:
        assert report(exc, debug=True, out=out) == EXIT_BUG
    assert "Traceback" in out.getvalue()
