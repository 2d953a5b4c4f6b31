"""The tokens file (A2UI_STREAM_HTTP_TOKENS_FILE, issue 18 item 1): read once at start into the
core's principals, with the plain token list and the laptop mode; a bad file is an
OperatorError that says what to fix and never shows a token or a digest."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from app.core.http.principals import (
    TOKENLESS,
    Allowed,
    Forbidden,
    Principals,
    Unknown,
    authorize,
)
from app.core.http.snapshot import DEFAULT_TENANT
from app.shell.errors import OperatorError
from app.shell.http.principals_file import (
    describe_tokens_file,
    principals_for,
    read_principals_file,
)
from app.shell.settings import load_settings

TOKEN = "team-a-token-" + "7" * 32
DIGEST = hashlib.sha256(TOKEN.encode()).hexdigest()
RUN = "acme/r-0123456789abcdef"


def _write(tmp_path: Path, document: Any) -> str:
    path = tmp_path / "tokens.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


def _good(tmp_path: Path) -> str:
    return _write(
        tmp_path,
        {
            "principals": [
                {"name": "team-a", "token_sha256": DIGEST, "tenants": ["acme"], "rights": ["read"]}
            ]
        },
    )


def test_a_tokens_file_is_read_into_principals(tmp_path: Path) -> None:
    found = read_principals_file(_good(tmp_path))
    assert [p.name for p in found.entries] == ["team-a"]
    assert authorize(found, TOKEN, "read", RUN, DEFAULT_TENANT) == Allowed(found.entries[0])
    assert isinstance(authorize(found, TOKEN, "emit", RUN, DEFAULT_TENANT), Forbidden)
    assert authorize(found, TOKEN, "read", "beta/r-0123456789abcdef", DEFAULT_TENANT) == Unknown()


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ("{not json", "not JSON (Expecting property name"),
        (
            {"principals": [{"name": "team-a", "token": TOKEN, "tenants": ["acme"]}]},
            "principals[0] (team-a).token: plaintext tokens are not accepted",
        ),
        (
            {"principals": [{"name": "team-a", "token_sha256": TOKEN, "tenants": ["acme"]}]},
            "principals[0] (team-a).token_sha256: 64 hex digits are required",
        ),
        (
            {
                "principals": [
                    {"name": "t", "token_sha256": DIGEST, "tenants": ["acme"], "rights": ["rd"]}
                ]
            },
            "principals[0] (t).rights[0]: 'rd' is not a right",
        ),
    ],
)
def test_a_bad_file_names_the_variable_the_file_and_the_field(
    tmp_path: Path, document: Any, fragment: str
) -> None:
    path = _write(tmp_path, document)
    with pytest.raises(OperatorError) as refused:
        read_principals_file(path)
    message = str(refused.value)
    assert message.startswith(f"A2UI_STREAM_HTTP_TOKENS_FILE={path}: ")
    assert fragment in message and "\n" not in message
    assert TOKEN not in message and DIGEST not in message


def test_a_missing_or_unreadable_file_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(OperatorError, match="no such file; write the tokens file there"):
        read_principals_file(str(tmp_path / "absent.json"))
    with pytest.raises(OperatorError, match="cannot read it .IsADirectoryError"):
        read_principals_file(str(tmp_path))


def test_a_huge_file_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b" " * (4 * 1024 * 1024 + 1))
    with pytest.raises(OperatorError, match="larger than 4 MiB"):
        read_principals_file(str(path))


def test_principals_for_joins_the_plain_list_and_the_file(tmp_path: Path) -> None:
    env = {"A2UI_STREAM_HTTP_TOKENS": "plain-one", "A2UI_STREAM_HTTP_TOKENS_FILE": _good(tmp_path)}
    found = principals_for(load_settings(env))
    assert [p.name for p in found.entries] == ["A2UI_STREAM_HTTP_TOKENS[1]", "team-a"]
    assert isinstance(authorize(found, "plain-one", "admin", RUN, DEFAULT_TENANT), Allowed)
    plain_only = principals_for(load_settings({"A2UI_STREAM_HTTP_TOKENS": "x"}))
    assert [p.name for p in plain_only.entries] == ["A2UI_STREAM_HTTP_TOKENS[1]"]
    assert principals_for(load_settings({})) == Principals()  # auth on, nothing configured


def test_a_token_in_both_the_plain_list_and_the_file_is_refused(tmp_path: Path) -> None:
    env = {"A2UI_STREAM_HTTP_TOKENS": TOKEN, "A2UI_STREAM_HTTP_TOKENS_FILE": _good(tmp_path)}
    with pytest.raises(OperatorError) as refused:
        principals_for(load_settings(env))
    message = str(refused.value)
    assert "A2UI_STREAM_HTTP_TOKENS[1] and team-a have the same token" in message
    assert TOKEN not in message and DIGEST not in message


def test_the_laptop_mode_is_tokenless_and_reads_no_file(tmp_path: Path) -> None:
    env = {
        "A2UI_STREAM_HTTP_AUTH": "off",
        "A2UI_STREAM_HTTP_TOKENS_FILE": str(tmp_path / "absent.json"),
    }
    assert principals_for(load_settings(env)) is TOKENLESS


def test_describe_tokens_file_counts_principals_or_says_the_error(tmp_path: Path) -> None:
    assert describe_tokens_file("") == "no tokens file"
    path = _good(tmp_path)
    assert describe_tokens_file(path) == f"A2UI_STREAM_HTTP_TOKENS_FILE={path}: 1 principal"
    assert "not JSON" in describe_tokens_file(_write(tmp_path, "["))


def test_loading_logs_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    env = {"A2UI_STREAM_HTTP_TOKENS": "plain-one", "A2UI_STREAM_HTTP_TOKENS_FILE": _good(tmp_path)}
    found = principals_for(load_settings(env))
    assert caplog.records == []
    shown = repr(found)
    assert TOKEN not in shown and DIGEST not in shown and "plain-one" not in shown


def test_the_example_in_docs_http_md_parses_and_means_what_it_says(tmp_path: Path) -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "http.md").read_text()
    section = docs.split("## Tenant-scoped tokens", 1)[1]
    example = section.split("```json\n", 1)[1].split("```", 1)[0]
    found = read_principals_file(_write(tmp_path, example))
    assert [p.name for p in found.entries] == ["team-a", "ops"]
    team, ops = "team-a-example-token", "ops-example-token"
    assert isinstance(authorize(found, team, "act", "beta-eu/r-0123456789abcdef", "local"), Allowed)
    assert authorize(found, team, "read", "gamma/r-0123456789abcdef", "local") == Unknown()
    assert isinstance(authorize(found, team, "approve", RUN, "local"), Forbidden)
    assert isinstance(authorize(found, ops, "admin", "demo", "local"), Allowed)
