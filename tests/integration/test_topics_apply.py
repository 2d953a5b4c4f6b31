"""`a2ui-stream topics apply`: creates what is missing, is idempotent, and reports drift."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from app.shell.cli.broker import Broker
from app.shell.settings import Settings
from app.shell.worker.topics_admin import desired_for, ensure_topics

pytestmark = pytest.mark.broker


def _apply(broker: Broker, settings: Settings, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {
        **os.environ,
        "KAFKA_BOOTSTRAP": broker.bootstrap,
        "A2UI_STREAM_TOPIC_PREFIX": settings.topic_prefix,
        "A2UI_STREAM_PARTITIONS": str(settings.partitions),
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "app.shell.cli", "topics", "apply"],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
        check=False,
    )


def test_apply_creates_then_changes_nothing(broker: Broker, settings: Settings) -> None:
    first = _apply(broker, settings)
    assert first.returncode == 0, first.stderr
    names = [spec.name for spec in desired_for(settings)]
    for name in names:
        assert f"created  {name}" in first.stdout
    second = _apply(broker, settings)
    assert second.returncode == 0, second.stderr
    assert "created" not in second.stdout
    assert "nothing to do" in second.stdout


def test_apply_reports_partition_drift_with_nonzero_exit(
    broker: Broker, settings: Settings
) -> None:
    # The run topics exist with 3 partitions; the operator now asks for 4: that is drift.
    assert _apply(broker, settings).returncode == 0
    drifted = _apply(broker, settings, A2UI_STREAM_PARTITIONS="4")
    assert drifted.returncode == 1
    assert (
        f"DRIFT    {settings.topic_prefix}admission: partitions is 3, expected 4" in drifted.stdout
    )
    # Drift is reported, never "fixed": the topic keeps its 3 partitions.
    again = _apply(broker, settings)
    assert again.returncode == 0, again.stdout


@pytest.mark.needs_topic_configs
def test_apply_reports_config_drift(broker: Broker, settings: Settings) -> None:
    spec = next(s for s in desired_for(settings) if s.id == "log")
    wrong = replace(spec, config={**spec.config, "cleanup.policy": "delete"})
    asyncio.run(ensure_topics(broker.bootstrap, [wrong]))
    result = _apply(broker, settings)
    assert result.returncode == 1
    assert f"DRIFT    {spec.name}: cleanup.policy is delete, expected compact" in result.stdout


def test_apply_without_a_broker_says_what_to_do(settings: Settings) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP"}
    result = subprocess.run(
        [sys.executable, "-m", "app.shell.cli", "topics", "apply"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "KAFKA_BOOTSTRAP" in result.stderr
