"""Shared fixtures: one broker per test session, picked by the harness (app.shell.cli.broker).

Broker-feature tests are marked ``needs_compaction`` / ``needs_transactions`` /
``needs_durability``. On a broker without the feature they skip with a reason naming it; with
``A2UI_STREAM_REQUIRE_KAFKA=1`` (set by .ci/run) that skip is a failure instead.
"""

# ruff: noqa: E402 (the imports after install() are deliberately after it)
from __future__ import annotations

from app.compiled_core import install

# The test suite is an entry point: it uses the compiled core, as the worker does, when it is
# built and current (app/compiled_core.py). Before anything below imports app.core.
install()

import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.shell.cli.broker import FEATURES, Broker, require_kafka, start_broker
from app.shell.settings import Settings, load_settings

REPO_ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = REPO_ROOT.parent / "shared" / "upstream"


def _log(message: str) -> None:
    print(message, file=sys.stderr)


@pytest.fixture(scope="session")
def broker() -> Iterator[Broker]:
    started = start_broker(log=_log)
    _log(f"test broker: {started.summary()}")
    try:
        yield started
    finally:
        started.stop()


def need_feature(broker: Broker, feature: str) -> None:
    """Skip (or, under A2UI_STREAM_REQUIRE_KAFKA=1, fail) unless ``broker`` has ``feature``."""
    if broker.features.has(feature):
        return
    reason = f"needs broker feature '{feature}', which {broker.description} lacks"
    if require_kafka():
        pytest.fail(f"{reason}; A2UI_STREAM_REQUIRE_KAFKA=1 makes this skip a failure")
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _broker_features(request: pytest.FixtureRequest) -> None:
    wanted = [f for f in FEATURES if request.node.get_closest_marker(f"needs_{f}") is not None]
    if wanted:
        started: Broker = request.getfixturevalue("broker")
        for feature in wanted:
            need_feature(started, feature)


@pytest.fixture
def unique() -> str:
    """A short unique token for topic and group names (integration tests never share topics)."""
    return uuid.uuid4().hex[:10]


@pytest.fixture
def settings(unique: str) -> Settings:
    """Settings with a unique topic prefix and app id, 3 partitions, fast group joins."""
    base = load_settings({})
    return replace(
        base,
        topic_prefix=f"t{unique}.",
        app_id=f"a2ui-test-{unique}",
        partitions=3,
        fast_groups=True,
    )
