"""`a2ui-stream publish` end to end with a worker (issue 19 item 3).

Before: a record over 1 MiB crashed publish with MessageSizeTooLargeError even when
A2UI_STREAM_MAX_RECORD_BYTES allowed 4 MiB (the producer kept aiokafka's 1 MiB request
limit), and without --wait nothing was said about any record although the README said it
printed each outcome. Now the producer's limit follows the setting, a record over it is named
and nothing is sent, and every record gets a line: where it went, or its outcome with --wait,
deduplicated included."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from app.core.common.examples import rfc0209_positive_payload
from app.devtools.fault_kit import WorkerProcess, apply_topics
from app.shell.cli.broker import Broker
from app.shell.settings import load_settings
from tests.integration.http_kit import wait_http

pytestmark = [pytest.mark.broker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 2 * 1024 * 1024


@pytest.fixture(scope="module")
def worker(broker: Broker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    unique = uuid.uuid4().hex[:8]
    settings = replace(
        load_settings({}),
        topic_prefix=f"pub{unique}.",
        app_id=f"a2ui-publish-{unique}",
        partitions=3,
        fast_groups=True,
    )
    asyncio.run(apply_topics(broker, settings))
    env = {"A2UI_STREAM_MAX_RECORD_BYTES": str(LIMIT), "A2UI_STREAM_HTTP_AUTH": "off"}
    started = WorkerProcess(broker, settings, "publish", tmp_path_factory.mktemp("pub"), env)
    started.start()
    try:
        wait_http(started)
        yield started
    finally:
        started.stop()


def publish(
    worker: WorkerProcess, path: Path, *args: str, limit: int = LIMIT
) -> subprocess.CompletedProcess[str]:
    env = {**worker.env(), "A2UI_STREAM_MAX_RECORD_BYTES": str(limit)}
    return subprocess.run(
        [sys.executable, "-m", "app.shell.cli", "publish", str(path), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=180,
    )


def big_record(run_id: str, size: int) -> bytes:
    """A valid v2 admission record of about ``size`` bytes: a data model of many strings of
    60,000 characters (under A2UI_STREAM_MAX_STRING_CHARS)."""
    payload = rfc0209_positive_payload()
    model = payload["messages"][2]["updateDataModel"]["value"]
    model.update({f"notes{n}": "x" * 60_000 for n in range(size // 60_000)})
    envelope = {
        "type": "ui.a2ui-surface",
        "schemaVersion": 2,
        "envelopeId": f"env-{uuid.uuid4().hex}",
        "correlationId": f"corr-{uuid.uuid4().hex}",
        "payload": payload,
        "meta": {"source": "ai-generation", "ts": "2026-12-01T00:00:00Z"},
    }
    return orjson.dumps({"runId": run_id, "envelope": envelope})


def test_a_record_up_to_the_setting_is_published_and_admitted(
    worker: WorkerProcess, tmp_path: Path
) -> None:
    path = tmp_path / "big.jsonl"
    record = big_record(f"big-{uuid.uuid4().hex[:8]}", 1_600_000)
    assert 1024 * 1024 < len(record) < LIMIT
    path.write_bytes(record + b"\n")
    done = publish(worker, path, "--wait", "60")
    assert done.returncode == 0, done.stderr  # before: MessageSizeTooLargeError
    assert done.stdout.startswith("0: admitted"), done.stdout


def test_a_record_over_the_setting_is_named_and_nothing_is_sent(
    worker: WorkerProcess, tmp_path: Path
) -> None:
    path = tmp_path / "two.jsonl"
    run = f"small-{uuid.uuid4().hex[:8]}"
    small = big_record(run, 0)
    path.write_bytes(small + b"\n" + big_record(run, 1_600_000) + b"\n")
    done = publish(worker, path, "--wait", "30", limit=1024 * 1024)
    assert done.returncode == 2, done
    assert "record 2 is" in done.stderr and "A2UI_STREAM_MAX_RECORD_BYTES=1,048,576" in done.stderr
    assert "nothing was published" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 2


def test_every_record_gets_a_line_and_a_second_publish_is_deduplicated(
    worker: WorkerProcess, tmp_path: Path
) -> None:
    path = ROOT / "examples" / "records.jsonl"
    quick = publish(worker, path)
    assert quick.returncode == 0, quick.stderr
    lines = quick.stdout.splitlines()
    assert len(lines) == 8 and all("outcome not awaited" in line for line in lines), lines
    assert "--wait" in quick.stderr
    waited = publish(worker, path, "--wait", "60")  # the same records again
    outcomes = [line.split(":", 1)[1].split()[0] for line in waited.stdout.splitlines()]
    # the admitted ones were recorded by the first publish: now deduplicated; refusals
    # cache nothing, so they are decided again (docs/admission.md): the second createSurface
    # is admitted this time, since the first publish ended with deleteSurface
    assert outcomes == [
        "deduplicated",
        "deduplicated",
        "admitted",
        "refused",
        "refused",
        "refused",
        "refused",
        "deduplicated",
    ], waited.stdout
    assert waited.returncode == 1
