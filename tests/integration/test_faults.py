"""The fault suite at CI size (docs/reliability.md): every scenario of
``app.devtools.fault_scenarios`` against a real broker, each ending with its accounting checked
against the core oracle and printed: published = admitted + refused + deduplicated, lost 0,
duplicated 0, mis-ordered 0, no worker crash, and every subscriber's reconstructed surfaces
equal to the log's materialization. ``a2ui-stream soak`` runs the same scenarios bigger.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.devtools.fault_scenarios import SCENARIOS, Report
from app.shell.cli.broker import Broker, start_broker
from app.shell.errors import BrokerUnavailableError
from tests.conftest import need_feature

pytestmark = [pytest.mark.broker, pytest.mark.slow]


async def _run(name: str, broker: Broker, size: int, tmp_path: Path) -> Report:
    report = await SCENARIOS[name].run(broker, size, tmp_path, 1)
    print(report)
    assert report.skipped is None, report.skipped
    assert report.ok, str(report)
    assert report.accounting.published >= size * 0.9
    assert report.accounting.admitted and report.accounting.refused
    return report


@pytest.fixture(scope="module")
def restartable_broker(broker: Broker) -> Iterator[Broker]:
    """The session broker when the harness can restart it; otherwise (CI's broker comes as
    KAFKA_BOOTSTRAP, which we did not start) a private local Apache Kafka for this module.
    Without either it is the ``needs_durability`` skip (a failure under
    A2UI_STREAM_REQUIRE_KAFKA=1); the marker itself would judge the session broker only."""
    if broker.features.durability:
        yield broker
        return
    try:
        private = start_broker("kafka")
    except BrokerUnavailableError:
        need_feature(broker, "durability")
        raise
    try:
        yield private
    finally:
        private.stop()


async def test_worker_sigkilled_repeatedly_mid_stream(broker: Broker, tmp_path: Path) -> None:
    report = await _run("sigkill-loop", broker, 3000, tmp_path)
    assert report.faults["worker SIGKILL"] >= 3
    assert report.subscribers == 2


async def test_broker_stops_and_restarts_mid_stream(
    restartable_broker: Broker, tmp_path: Path
) -> None:
    report = await _run("broker-restart", restartable_broker, 2000, tmp_path)
    assert report.faults["broker stop + restart"] == 1
    assert report.faults["broker SIGKILL + restart"] == 1
    assert report.subscribers == 2


async def test_a_member_killed_during_a_rebalance(broker: Broker, tmp_path: Path) -> None:
    report = await _run("rebalance-kill", broker, 3000, tmp_path)
    assert report.faults["member SIGKILLed during the rebalance"] == 1
    assert report.faults["rebalance (a member joined)"] == 1


async def test_subscribers_stop_reading_and_catch_up(broker: Broker, tmp_path: Path) -> None:
    report = await _run("subscriber-pause", broker, 2000, tmp_path)
    assert report.subscribers == 3 and report.surfaces > 0
    # The paused subscriber had fallen behind: it received most of its frames after the pause.
    before = report.figures["frames delivered before the pause"]
    assert report.figures["frames delivered to the paused subscriber"] > 2 * before


async def test_a_resync_storm(broker: Broker, tmp_path: Path) -> None:
    report = await _run("resync-storm", broker, 2000, tmp_path)
    assert report.subscribers >= 10
    assert report.faults["resync requests at once"] >= report.subscribers
    assert report.figures["resyncs answered"] == report.figures["resync requests"]


async def test_producers_retrying_with_the_same_correlation_ids(
    broker: Broker, tmp_path: Path
) -> None:
    report = await _run("producer-retries", broker, 2000, tmp_path)
    assert report.faults["producer re-sends"] > 200
    assert report.accounting.deduplicated > 200


async def test_a_member_stopped_past_its_session_timeout_then_resumed(
    broker: Broker, tmp_path: Path
) -> None:
    report = await _run("zombie-member", broker, 3000, tmp_path)
    assert report.faults["member SIGSTOPped past its session timeout"] == 2
    assert report.faults["zombie resumed (SIGCONT)"] == 2
    assert report.accounting.twice == 0
    assert report.figures.get("stops resumed before the group moved on", 0) < 2
    # The zombies did try: at least one commit of a resumed member was refused (fenced).
    assert report.figures["fenced (the validator's log)"] >= 1


async def test_owners_change_under_attached_sse_clients(broker: Broker, tmp_path: Path) -> None:
    report = await _run("sse-owner-change", broker, 2000, tmp_path)
    assert report.faults["owner change (a worker joined)"] == 2
    assert report.faults["owner stopped (SIGTERM)"] == 1
    assert report.faults["owner killed (SIGKILL)"] == 1
    figures = report.figures
    assert figures["SSE resumed with Last-Event-ID"] >= 1
    assert figures["SSE events received"] == figures["SSE events recorded for them"] > 0
    for name in ("missing", "duplicated", "misordered", "foreign"):
        assert figures[f"SSE {name}"] == 0, name
    assert report.subscribers == 2
