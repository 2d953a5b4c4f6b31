"""`a2ui-stream up` (the README's run command): embedded broker + topics + worker; Ctrl-C
stops everything it started."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from app.shell.cli.broker import free_port
from tests.integration.http_kit import non_loopback_address, send_raw


def _health(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _assert_laptop_mode_is_this_machine_only(port: int) -> None:
    """Issue 14 item 4: no token here, so only this machine and only its own pages."""
    base = f"http://127.0.0.1:{port}"
    address = non_loopback_address()
    if address is not None:  # the network: nothing listens there
        with pytest.raises(OSError):
            socket.create_connection((address, port), timeout=10).close()
    # DNS rebinding: a page on evil.example re-pointed at 127.0.0.1
    rebound = send_raw(base, "GET", "/ui/api/runs", headers={"Host": f"evil.example:{port}"})
    assert (rebound.status, rebound.body["error"]) == (403, "forbidden"), rebound.raw
    # CSRF: a cross-site 'simple' POST (text/plain, no preflight) creates nothing
    body = b'{"workflowId": "wf-csrf"}'
    plain = send_raw(base, "POST", "/runs", body, {"Content-Type": "text/plain"})
    assert (plain.status, plain.body["error"]) == (415, "unsupported_media_type"), plain.raw
    foreign = send_raw(
        base,
        "POST",
        "/runs",
        body,
        {"Content-Type": "application/json", "Origin": "https://evil.example"},
    )
    assert (foreign.status, foreign.body["error"]) == (403, "forbidden"), foreign.raw
    # Faust's pages (worker URLs, the assignment) are not served
    assert send_raw(base, "GET", "/router/").status == 404
    assert send_raw(base, "GET", "/ui/api/runs").status == 200  # the developer's own requests


def _port_open(bootstrap: str) -> bool:
    host, _, port = bootstrap.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.slow
def test_up_runs_the_embedded_broker_and_a_worker_until_ctrl_c(tmp_path) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
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
        log = ""
        while time.monotonic() < deadline and proc.poll() is None and "is up" not in log:
            time.sleep(0.3)
            log = (tmp_path / "up.log").read_text()
        assert "a2ui-stream is up" in log, f"no banner:\n{log[-3000:]}"
        # issue 19 item 2: the banner only once the worker answers, so a request right after
        # it works (before: printed 6-8 s before the worker answered; a curl failed)
        assert _health(port)
        assert (
            send_raw(f"http://127.0.0.1:{port}", "GET", "/runs/just-after-the-banner").status == 404
        )
        assert "publish admission records" in log and "a2ui.admission" in log
        bootstrap = log.split("export KAFKA_BOOTSTRAP=")[1].split()[0]
        assert _port_open(bootstrap)
        _assert_laptop_mode_is_this_machine_only(port)
        # a viewer left open: an SSE stream in progress when Ctrl-C comes (issue 19 item 7;
        # before: the web server waited 60 s for it, then 60 s more once cancelled)
        envelope = (
            Path(__file__).resolve().parents[2] / "examples" / "envelope-v2.json"
        ).read_bytes()
        posted = send_raw(
            f"http://127.0.0.1:{port}",
            "POST",
            "/runs/demo/envelopes",
            envelope,
            {"Content-Type": "application/json"},
        )
        assert posted.status == 201, posted.raw
        stream = socket.create_connection(("127.0.0.1", port), timeout=30)
        stream.sendall(f"GET /runs/demo/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        assert b" 200 " in stream.recv(4096).split(b"\r\n")[0]

        def read_on() -> None:  # as a browser does, until the server closes the stream
            with contextlib.suppress(OSError):
                while stream.recv(65536):
                    pass

        threading.Thread(target=read_on, daemon=True).start()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        stream.close()
        assert not _port_open(bootstrap), "Ctrl-C left the embedded broker running"
        # issue 19 item 5: the happy path logs no ERROR (before, at every embedded start:
        # "Unexpected error during InitProducerIdRequest" and "Topic ...-__assignor-__leader
        # not found in cluster metadata")
        log = (tmp_path / "up.log").read_text()
        assert "[ERROR]" not in log and "Traceback" not in log, log[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        out.close()
