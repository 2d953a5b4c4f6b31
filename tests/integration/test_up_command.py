"""`a2ui-stream up` (the README's run command): embedded broker + topics + worker; Ctrl-C
stops everything it started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from app.shell.broker import _free_port


def _health(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _port_open(bootstrap: str) -> bool:
    host, _, port = bootstrap.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.slow
def test_up_runs_the_embedded_broker_and_a_worker_until_ctrl_c(tmp_path) -> None:  # type: ignore[no-untyped-def]
    port = _free_port()
    # The README's run command on a laptop: nothing set, the embedded broker by explicit choice
    # (so even under A2UI_STREAM_REQUIRE_KAFKA=1 this is not a fallback).
    env = {
        k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP", "A2UI_STREAM_BROKER")
    }
    env.update(
        A2UI_STREAM_WEB_PORT=str(port),
        A2UI_STREAM_DATA_DIR=str(tmp_path / "data"),
        A2UI_STREAM_APP_ID=f"a2ui-up-{port}",
    )
    out = open(tmp_path / "up.log", "w+")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.shell.cli", "up"],
        stdout=out,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None and not _health(port):
            time.sleep(0.3)
        log = (tmp_path / "up.log").read_text()
        assert _health(port), f"worker never answered /health:\n{log[-3000:]}"
        assert "publish admission records" in log and "a2ui.admission" in log
        bootstrap = log.split("export KAFKA_BOOTSTRAP=")[1].split()[0]
        assert _port_open(bootstrap)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        assert not _port_open(bootstrap), "Ctrl-C left the embedded broker running"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
