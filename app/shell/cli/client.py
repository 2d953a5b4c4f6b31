"""What every command that talks to a cluster does first: the checked bootstrap address.

Shell module (the CLI's room): probes the address given (``--bootstrap``, else
``KAFKA_BOOTSTRAP``) and quiets the Kafka client's log lines; the commands import it.
"""

from __future__ import annotations

import argparse

from app.shell.errors import OperatorError
from app.shell.settings import Settings
from app.shell.worker.kafka_io import parse_bootstrap, probe_bootstrap, quiet_client_logs

__all__ = ["checked_bootstrap", "client_command"]


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
