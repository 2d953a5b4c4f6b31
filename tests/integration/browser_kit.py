"""Headless Debian Chromium for the viewer test, driven by playwright-core from Node.js
(viewer/e2e/driver.mjs, one JSON command per line), with the rule for a missing browser: skip
on a laptop with the reason, fail in CI (CI=true or A2UI_STREAM_REQUIRE_KAFKA=1), where
.ci/run installs Chromium and the viewer's npm packages."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from app.core.admission.decision import RECORDED_EVENT_SCHEMA_VERSION, event_id_for
from app.core.runlog.keys import log_key, partition_for_run
from app.shell.cli.broker import require_kafka
from app.shell.http.viewer import DIST
from app.shell.settings import Settings
from app.shell.worker.topics_admin import desired_for

REPO = Path(__file__).resolve().parents[2]
VIEWER = REPO / "viewer"
DRIVER = VIEWER / "e2e" / "driver.mjs"


def chromium_path() -> str | None:
    configured = os.environ.get("A2UI_STREAM_CHROMIUM")
    if configured:
        return configured if Path(configured).is_file() else None
    return shutil.which("chromium") or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None
    )


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true" or require_kafka()


def missing_prerequisite() -> str | None:
    """Why the browser test cannot run here, or None."""
    if chromium_path() is None:
        return (
            "Chromium is not installed (Debian: apt-get install --no-install-recommends chromium)"
        )
    if shutil.which("node") is None:
        return "Node.js is not installed (the browser is driven by playwright-core from Node.js)"
    if not (VIEWER / "node_modules" / "playwright-core").is_dir():
        return "the viewer's npm packages are not installed (make viewer: npm ci in viewer/)"
    if not (DIST / "index.html").is_file():
        return "the viewer is not built (make viewer: npm ci && npm run build in viewer/)"
    return None


def require_browser() -> None:
    """Skip with the reason on a laptop; in CI a missing prerequisite is a failure."""
    reason = missing_prerequisite()
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"{reason}; CI must run the browser test (.ci/run installs what it needs)")
    pytest.skip(reason)


class BrowserDriver:
    """One Chromium (one page) behind viewer/e2e/driver.mjs."""

    def __init__(self, log: Path) -> None:
        env = {**os.environ, "A2UI_STREAM_CHROMIUM": chromium_path() or ""}
        self._log = open(log, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            ["node", str(DRIVER)],
            cwd=VIEWER,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        hello = self._answer(90)
        self.version = hello.get("version")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(b"")

    def _answer(self, timeout: float) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the browser driver did not answer in {timeout:g}s") from None
        if not line:
            raise AssertionError(f"the browser driver exited ({self.proc.poll()})")
        answer: dict[str, Any] = json.loads(line)
        if not answer.get("ok"):
            raise AssertionError(f"browser: {answer.get('error')}")
        return answer

    def call(self, cmd: str, timeout: float = 60, **args: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cmd": cmd, **args}).encode() + b"\n")
        self.proc.stdin.flush()
        return self._answer(timeout)

    def goto(self, url: str) -> None:
        self.call("goto", url=url)

    def wait(
        self,
        selector: str,
        text: str | None = None,
        *,
        timeout: float = 30,
        state: str = "visible",
    ) -> None:
        self.call(
            "wait",
            timeout=timeout + 10,
            selector=selector,
            text=text,
            state=state,
            waitMs=timeout * 1000,
        )

    def evaluate(self, expression: str, *, timeout: float = 30) -> Any:
        """The JSON value of ``expression`` evaluated on the page; AssertionError when the page
        does not answer within ``timeout`` seconds (a hung tab never does)."""
        return self.call("evaluate", timeout=timeout, expression=expression)["value"]

    def query(self, selector: str) -> list[dict[str, Any]]:
        elements: list[dict[str, Any]] = self.call("query", selector=selector)["elements"]
        return elements

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.call("close", timeout=30)
        except (AssertionError, OSError):
            pass
        finally:
            # EOF on its stdin: the driver's read loop ends and node exits (while stdin is open,
            # it stays up after "close" until killed)
            if self.proc.stdin is not None:
                with contextlib.suppress(OSError):
                    self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
            self._reader.join(timeout=10)  # its stdout ends with it
            if self.proc.stdout is not None and not self._reader.is_alive():
                self.proc.stdout.close()
            self._log.close()


# -- recorded events written straight to the log -------------------------------------------------


def recorded_surface(
    run_id: str, sequence: int, envelope: dict[str, Any], *, version: int = 2
) -> dict[str, Any]:
    """A ``ui.a2ui-surface`` event exactly as admission records an admitted envelope
    (app.core.admission.decision ``_record``; schemas/recorded-event), for a test that must put into
    the log what admission would refuse (an older log, another host, a bug: the viewer must never
    hang whatever the log holds)."""
    trust = (
        "untrusted" if envelope.get("meta", {}).get("contentTrust") == "untrusted" else "trusted"
    )
    event: dict[str, Any] = {
        "eventId": event_id_for(run_id, sequence),
        "runId": run_id,
        "sequence": sequence,
        "type": "ui.a2ui-surface",
        "schemaVersion": RECORDED_EVENT_SCHEMA_VERSION,
        "timestamp": "2026-12-01T00:00:00Z",
    }
    if "nodeId" in envelope:
        event["nodeId"] = envelope["nodeId"]
    event["causationId"] = envelope["correlationId"]
    event["contentTrust"] = trust
    event["payload"] = {"envelope": envelope, "version": version, "trust": trust}
    return event


async def append_to_log(bootstrap: str, settings: Settings, events: list[dict[str, Any]]) -> None:
    """Append recorded events to the deployment's log topic as the validator does: key
    ``runId#sequence`` (app.core.runlog.keys), on the
    run's partition, the event's JSON as the value."""
    log_topic = next(spec.name for spec in desired_for(settings) if spec.id == "log")
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for event in events:
            run_id, sequence = event["runId"], event["sequence"]
            await producer.send_and_wait(
                log_topic,
                orjson.dumps(event),
                key=log_key(run_id, sequence),
                partition=partition_for_run(run_id, settings.partitions),
            )
    finally:
        await producer.stop()
