"""The deployment's gateway key: what the HTTP gateway seals host commands with and the
validator verifies (app.core.admission.command_seal; issue 14 item 5).

Shell module (environment and a file). ``A2UI_STREAM_GATEWAY_KEY`` is the key when set (32
characters or more, the same on every worker of a deployment). Unset, the worker keeps a key in
its data directory (``gateway.key``, created once with 32 random bytes, mode 0600), so a single
worker, or several sharing a data directory, need no setup and a restarted worker still
verifies the commands its previous run published. Workers on several machines must share
``A2UI_STREAM_GATEWAY_KEY``: a command one worker's gateway sealed and another's validator
decides is refused otherwise (``forbidden``, rule ``command-gateway``, saying so).
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

from app.shell.errors import OperatorError
from app.shell.settings import Settings

__all__ = ["KEY_FILE", "gateway_key"]

log = logging.getLogger("a2ui_stream.gateway")

KEY_FILE = "gateway.key"


def gateway_key(settings: Settings) -> bytes:
    """The key host commands are sealed and verified with (never logged)."""
    if settings.gateway_key:
        return settings.gateway_key.encode("utf-8")
    path = settings.data_dir / KEY_FILE
    try:
        return _read_or_create(path)
    except OSError as exc:
        raise OperatorError(
            f"cannot keep the gateway key in {path} ({exc.strerror or exc}): make "
            "A2UI_STREAM_DATA_DIR writable, or set A2UI_STREAM_GATEWAY_KEY (32+ characters, the "
            "same on every worker)"
        ) from exc


def _read_or_create(path: Path) -> bytes:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_hex(32).encode("ascii"))
        try:
            os.link(scratch, path)  # atomic, and fails if another worker made it first
            log.warning(
                "A2UI_STREAM_GATEWAY_KEY is not set: host commands are sealed with a key kept "
                "in %s; workers on other machines must share one key (set "
                "A2UI_STREAM_GATEWAY_KEY)",
                path,
            )
        except FileExistsError:
            pass
        finally:
            scratch.unlink()
    key = path.read_bytes().strip()
    if len(key) < 32:
        raise OperatorError(
            f"{path} does not hold a gateway key (32+ characters): delete it to have a new one "
            "made, or set A2UI_STREAM_GATEWAY_KEY"
        )
    return key
