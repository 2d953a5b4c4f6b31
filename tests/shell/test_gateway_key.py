"""The deployment's gateway key (app/shell/gateway_key.py; issue 14 item 5)."""

from __future__ import annotations

import stat
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from app.shell.errors import OperatorError
from app.shell.gateway_key import KEY_FILE, gateway_key
from app.shell.settings import Settings, load_settings


def _settings(tmp: Path, **env: str) -> Settings:
    return load_settings({"A2UI_STREAM_DATA_DIR": str(tmp), **env})


def test_the_configured_key_is_the_key_and_is_never_shown(tmp_path: Path) -> None:
    key = "k" * 40
    settings = _settings(tmp_path, A2UI_STREAM_GATEWAY_KEY=key)
    assert gateway_key(settings) == key.encode()
    assert key not in repr(settings)
    assert not (tmp_path / KEY_FILE).exists()


def test_a_short_configured_key_is_an_operator_error(tmp_path: Path) -> None:
    with pytest.raises(OperatorError, match="at least 32"):
        _settings(tmp_path, A2UI_STREAM_GATEWAY_KEY="short")


def test_unset_a_key_is_made_once_private_and_shared_by_every_worker_of_the_dir(
    tmp_path: Path,
) -> None:
    settings = _settings(tmp_path / "data")
    with ThreadPoolExecutor(8) as pool:  # eight workers starting at once
        keys = set(pool.map(lambda _i: gateway_key(settings), range(8)))
    assert len(keys) == 1
    (key,) = keys
    assert len(key) >= 32
    path = tmp_path / "data" / KEY_FILE
    assert path.read_bytes() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == [KEY_FILE]  # no scratch file left
    assert gateway_key(settings) == key  # a restarted worker


def test_a_damaged_key_file_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / KEY_FILE).write_text("x")
    with pytest.raises(OperatorError, match="delete it"):
        gateway_key(_settings(tmp_path))
    unwritable = replace(_settings(tmp_path), data_dir=Path("/proc/a2ui-no-such-dir"))
    with pytest.raises(OperatorError, match="A2UI_STREAM_GATEWAY_KEY"):
        gateway_key(unwritable)
