"""`a2ui-stream worker` refuses the laptop mode on a non-loopback bind before it touches a
broker, with one line that says what to do (issue 14 item 4)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_worker_refuses_auth_off_on_every_interface() -> None:
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP": "127.0.0.1:9",  # never reached
        "A2UI_STREAM_HTTP_AUTH": "off",
        "A2UI_STREAM_WEB_HOST": "0.0.0.0",
    }
    done = subprocess.run(
        [sys.executable, "-m", "app.shell.cli", "worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "A2UI_STREAM_WEB_HOST=127.0.0.1" in lines[0]
