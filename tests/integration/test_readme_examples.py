"""The README's "Your first surface", followed literally (issue 19 item 1): `a2ui-stream up`
(what `make up` runs once installed), then every command of that section, as written, over
the files in examples/, against the real broker. Only the addresses change: the worker's web
port (6066 may be taken here), the bootstrap the banner printed, and a topic prefix of its own
so the run ids of the README are fresh."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.shell.cli.broker import Broker, free_port

pytestmark = [pytest.mark.broker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
README_BASE = "http://127.0.0.1:6066"
CLI = str(Path(sys.executable).parent / "a2ui-stream")


def section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def commands(text: str) -> list[str]:
    """Every command of the section's ```sh blocks: continuation lines joined, the trailing
    ``  # comment`` dropped."""
    found: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s{2,}#\s.*$", "", line).strip()
            if line and not line.startswith("#"):
                found.append(re.sub(r"\s+", " ", line))
    return found


class Up:
    """`a2ui-stream up` in the background, with its output in a file."""

    def __init__(self, broker: Broker, tmp: Path) -> None:
        unique = uuid.uuid4().hex[:8]
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "KAFKA_BOOTSTRAP": broker.bootstrap,
            "A2UI_STREAM_TOPIC_PREFIX": f"readme{unique}.",
            "A2UI_STREAM_APP_ID": f"a2ui-readme-{unique}",
            "A2UI_STREAM_PARTITIONS": "3",
            "A2UI_STREAM_WEB_PORT": str(self.port),
            "A2UI_STREAM_DATA_DIR": str(tmp / "data"),
        }
        self.log = tmp / "up.log"
        with self.log.open("wb") as out:  # the child writes to its own copy of the descriptor
            self.proc = subprocess.Popen(
                [CLI, "up"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=ROOT,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_banner(self, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if "a2ui-stream is up" in self.output():
                return self.output()
            time.sleep(0.3)
        raise AssertionError(f"no banner:\n{self.output()[-3000:]}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode)


def ready(base: str) -> bool:
    """The worker answers run paths (its run index has read the log)."""
    try:
        urllib.request.urlopen(f"{base}/runs/probe-ready", timeout=5)
    except urllib.error.HTTPError as exc:
        return exc.code == 404
    except OSError:
        return False
    return False


@pytest.fixture(scope="module")
def up(broker: Broker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    started = Up(broker, tmp_path_factory.mktemp("readme"))
    try:
        yield started
    finally:
        assert started.stop() == 0, started.output()[-3000:]


def _verdicts(out: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in out.splitlines() if line.strip()]


def test_your_first_surface_works_when_followed_literally(up: Up) -> None:
    text = section("Your first surface")
    steps = commands(text)
    assert steps[0] == "make up"  # the test runs what it runs: .venv/bin/a2ui-stream up
    banner = up.wait_banner()
    bootstrap = banner.split("export KAFKA_BOOTSTRAP=")[1].split()[0]
    assert ready(up.base), up.output()[-3000:]  # the banner waits for the worker (item 2)
    env = {**up.env, "KAFKA_BOOTSTRAP": bootstrap}
    results: dict[str, subprocess.CompletedProcess[str]] = {}
    for step in steps[1:]:
        if step.startswith("export KAFKA_BOOTSTRAP="):
            assert "<port printed by make up>" in step
            continue
        assert step.startswith(("curl ", ".venv/bin/a2ui-stream ")), step
        command = step.replace(README_BASE, up.base).replace(".venv/bin/a2ui-stream", CLI, 1)
        results[step] = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, cwd=ROOT, env=env, timeout=180
        )

    def run(fragment: str) -> subprocess.CompletedProcess[str]:
        [key] = [step for step in results if step.endswith(fragment) or fragment in step]
        return results.pop(key)

    posted = run("--data-binary @examples/envelope-v2.json")
    assert orjson.loads(posted.stdout)["sequence"] == 0, posted
    acted = run("--data-binary @examples/action.json")
    assert orjson.loads(acted.stdout)["sequence"] == 1, acted
    polled = orjson.loads(run("events/poll?timeout=5'").stdout)
    assert [(e["sequence"], e["type"]) for e in polled["events"]] == [
        (0, "ui.a2ui-surface"),
        (1, "action.accepted"),
    ]
    event = polled["events"][0]
    assert (event["schemaVersion"], event["payload"]["envelope"]["schemaVersion"]) == (1, 2)

    checked = run("check examples/records.jsonl")
    assert checked.returncode == 1, checked.stderr
    offline = [v["outcome"] for v in _verdicts(checked.stdout)]
    assert (offline.count("admitted"), offline.count("refused")) == (3, 5)

    published = run("publish examples/records.jsonl --wait 30")
    assert published.returncode == 1, published.stderr  # some refused
    outcomes = [line.split(":", 1)[1].split()[0] for line in published.stdout.splitlines()]
    assert outcomes == offline, published.stdout

    logged = run("log demo-records")
    assert [line.split()[0] for line in logged.stdout.splitlines()] == ["0", "1", "2"]
    letters = run("deadletter list --run demo-records")
    assert len(letters.stdout.splitlines()) == 4, letters.stdout

    v1 = run("check --run demo-v1 examples/envelope-v1.json")
    assert (v1.returncode, _verdicts(v1.stdout)[0]["outcome"]) == (1, "refused")
    v1_floor1 = run("check --run demo-v1 --floor 1 examples/envelope-v1.json")
    assert (v1_floor1.returncode, _verdicts(v1_floor1.stdout)[0]["outcome"]) == (0, "admitted")
    assert not results, f"README commands this test does not check: {list(results)}"

    # the viewer page the section opens
    [page] = re.findall(r"`(http://127\.0\.0\.1:6066/ui/runs/demo)`", text)
    with urllib.request.urlopen(page.replace(README_BASE, up.base), timeout=10) as answer:
        assert answer.status == 200 and b"a2ui-viewer" in answer.read()
    # the happy path logs no ERROR (issue 19 item 5), refusals included: they are outcomes
    assert "[ERROR]" not in up.output() and "Traceback" not in up.output(), up.output()[-3000:]
