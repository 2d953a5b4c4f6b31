"""`a2ui-stream config` prints every variable, and never a secret's value (issue 14 item 10)."""

from __future__ import annotations

import argparse

import pytest

from app.shell.cli.runtime import run_config
from app.shell.settings import shown_value


def test_config_masks_the_http_tokens(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("A2UI_STREAM_HTTP_TOKENS", "tok-alpha-secret, tok-beta-secret")
    monkeypatch.setenv("A2UI_STREAM_SECRETS_FILE", "/etc/a2ui/secrets.json")
    assert run_config(argparse.Namespace()) == 0
    out = capsys.readouterr().out
    assert "tok-alpha-secret" not in out and "tok-beta-secret" not in out
    assert "set, 2 tokens" in out
    assert "/etc/a2ui/secrets.json" in out  # the path is fine to show; its content never is


def test_config_shows_an_unset_token_list_as_unset(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("A2UI_STREAM_HTTP_TOKENS", raising=False)
    assert run_config(argparse.Namespace()) == 0
    line = next(
        line for line in capsys.readouterr().out.splitlines() if "A2UI_STREAM_HTTP_TOKENS" in line
    )
    assert "(unset)" in line


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("A2UI_STREAM_HTTP_TOKENS", "one", "(set, 1 token; values hidden)"),
        ("A2UI_STREAM_HTTP_TOKENS", " , ", "(set, 0 tokens; values hidden)"),
        # a credential added later is masked by its name before anyone lists it
        ("A2UI_STREAM_COMMAND_KEY", "k3y-material", "(set; value hidden)"),
        ("A2UI_STREAM_SASL_PASSWORD", "hunter2", "(set; value hidden)"),
        ("A2UI_STREAM_SECRETS_FILE", "/etc/s.json", "/etc/s.json (set)"),  # a path, not a secret
        ("A2UI_STREAM_WEB_HOST", "0.0.0.0", "0.0.0.0 (set)"),
    ],
)
def test_shown_value(name: str, value: str, shown: str) -> None:
    assert shown_value(name, value, "") == shown
