"""What the commands that talk to a cluster share: the checked bootstrap address they start
with, the topic names of the settings, and a committed read of a topic to its end.

Shell module (the CLI's room): probes the address given (``--bootstrap``, else
``KAFKA_BOOTSTRAP``), quiets the Kafka client's log lines, reads topics; the commands import it.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from app.shell.errors import OperatorError
from app.shell.settings import Settings
from app.shell.worker.kafka_io import (
    parse_bootstrap,
    probe_bootstrap,
    quiet_client_logs,
    read_topic,
    require_topic,
)
from app.shell.worker.topics_admin import desired_for

__all__ = ["checked_bootstrap", "client_command", "read_committed", "topic_names"]

_READ_TIMEOUT = 120.0  # seconds to read a topic (or one partition of it) to its end


def checked_bootstrap(args: argparse.Namespace, settings: Settings) -> str:
    """The cluster to talk to (--bootstrap, else KAFKA_BOOTSTRAP), checked: a well-formed
    host:port list where something answers, or an OperatorError in words (issue 19 item 2)."""
    given = getattr(args, "bootstrap", None)
    bootstrap = given or settings.kafka_bootstrap
    if not bootstrap:
        raise OperatorError(
            "no broker: set KAFKA_BOOTSTRAP=host:port (or pass --bootstrap), "
            "or run `a2ui-stream up` to start the embedded broker"
        )
    source = "--bootstrap" if given else "KAFKA_BOOTSTRAP"
    bootstrap = parse_bootstrap(bootstrap, source=source)
    probe_bootstrap(bootstrap, source=source)
    return bootstrap


def client_command(args: argparse.Namespace, settings: Settings) -> str:
    """What every client command (publish, log, deadletter, subscribe, topics apply...) does
    first: aiokafka's log lines out of its output unless --debug, and the checked bootstrap."""
    quiet_client_logs(getattr(args, "debug", False))
    return checked_bootstrap(args, settings)


def topic_names(settings: Settings) -> dict[str, str]:
    """Each topic's name by its id in topics/topics.json (``admission``, ``log``, ...)."""
    return {spec.id: spec.name for spec in desired_for(settings)}


def read_committed(bootstrap: str, topic: str, partitions: list[int] | None = None) -> list[Any]:
    """The records of ``topic`` (of ``partitions``, default all) up to its end, committed
    ones only (read_committed); a missing topic is an ``OperatorError``."""

    async def read() -> list[Any]:
        await require_topic(bootstrap, topic)  # a missing topic is said, not read as empty
        return await read_topic(
            bootstrap,
            topic,
            isolation="read_committed",
            partitions=partitions,
            timeout=_READ_TIMEOUT,
        )

    return asyncio.run(read())
