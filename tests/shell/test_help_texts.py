"""Help texts are written for users (issue 19 item 5): every command and subcommand has a
description, none shows raw ``double backticks``, an issue number or a module path, `worker`
says tokens are needed and `check --floor` says 1 or 2. Before: the soak, bench and check
descriptions were module docstrings (backticks, "issue 5 acceptance", app.shell.* paths) and
topics apply/list, deadletter list/show and runs had none."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from app.shell.cli import build_parser


def _walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield " ".join(("a2ui-stream", *path)), parser
    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name, child in action.choices.items():
                yield from _walk(child, (*path, name))


COMMANDS = dict(_walk(build_parser()))


def _text(name: str) -> str:
    return " ".join(COMMANDS[name].format_help().split())


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_a_description_written_for_users(name: str) -> None:
    parser = COMMANDS[name]
    assert parser.description, f"{name} has no description"
    text = parser.format_help()
    assert "``" not in text, name
    assert not re.search(r"\bissue \d+|issue \d+'s", text, re.I), name
    assert not re.search(r"\bapp\.(core|shell)\b|app/(core|shell)/", text), name


def test_worker_help_says_tokens_are_needed() -> None:
    text = _text("a2ui-stream worker")
    assert "A2UI_STREAM_HTTP_TOKENS" in text and "Authorization: Bearer" in text
    assert "401" in text


def test_check_floor_says_1_or_2() -> None:
    text = _text("a2ui-stream check")
    assert "1 (v1 envelopes only) or 2 (A2UI v0.9)" in text
    assert "0, 1 or 2" not in text


def test_subscribe_says_the_registration_stays() -> None:
    text = _text("a2ui-stream subscribe")
    assert "The registration outlives this command" in text and "unsubscribe ID" in text
