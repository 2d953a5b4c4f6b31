"""The harness reports what it started and what that broker can do."""

from __future__ import annotations

import pytest

from app.shell.cli.broker import BrokerFeatures, start_broker
from app.shell.errors import OperatorError


def test_explicit_tansu_reports_its_missing_features_and_is_not_a_fallback() -> None:
    # Under A2UI_STREAM_REQUIRE_KAFKA=1 an explicit choice of the embedded broker (what
    # `a2ui-stream up` does) is allowed; only falling back to it is an error.
    broker = start_broker("tansu", env={"A2UI_STREAM_REQUIRE_KAFKA": "1"})
    try:
        assert broker.kind == "tansu"
        assert broker.features == BrokerFeatures(
            compaction=False, transactions=False, durability=False, topic_configs=False
        )
        assert "compaction=no" in broker.summary()
        with pytest.raises(OperatorError, match="cannot be restarted"):
            broker.restart()
    finally:
        broker.stop()


def test_unknown_choice_is_an_operator_error() -> None:
    with pytest.raises(OperatorError, match="A2UI_STREAM_BROKER='zookeeper'"):
        start_broker("zookeeper", env={})


def test_external_without_bootstrap_says_what_to_set() -> None:
    with pytest.raises(OperatorError, match="KAFKA_BOOTSTRAP"):
        start_broker("external", env={})


def test_unknown_feature_name_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown broker feature"):
        BrokerFeatures(True, True, True).has("teleport")
