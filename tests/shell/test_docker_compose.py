"""docker-compose.yml runs only real a2ui-stream commands, on a pinned Apache Kafka image."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.shell.broker import APACHE_KAFKA_IMAGE
from app.shell.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _entrypoint() -> list[str]:
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("ENTRYPOINT"):
            return yaml.safe_load(line.removeprefix("ENTRYPOINT").strip())
    raise AssertionError("Dockerfile has no ENTRYPOINT")


def test_broker_image_is_pinned_apache_kafka() -> None:
    image = _compose()["services"]["kafka"]["image"]
    assert image == APACHE_KAFKA_IMAGE  # the same version the local harness runs
    assert ":" in image and not image.endswith(":latest")


@pytest.mark.parametrize("service", ["topics", "worker"])
def test_every_command_is_a_real_a2ui_stream_command(service: str) -> None:
    spec = _compose()["services"][service]
    assert "build" in spec, "the service must run our image"
    assert _entrypoint() == ["a2ui-stream"]
    args = spec["command"]
    parsed = build_parser().parse_args(args)  # argparse exits on an unknown command
    assert callable(parsed.func)


def test_services_have_healthchecks_and_order() -> None:
    services = _compose()["services"]
    assert "healthcheck" in services["kafka"] and "healthcheck" in services["worker"]
    assert services["topics"]["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert (
        services["worker"]["depends_on"]["topics"]["condition"] == "service_completed_successfully"
    )
