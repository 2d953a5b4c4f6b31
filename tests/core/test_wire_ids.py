"""Run ids in URL paths (app.core.http.wire_ids): the projected and percent forms (openwop-a2ui.md
§8; identity.md §5 "Wire form"), the refusals, and the round-trip laws."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from app.core.http.wire_ids import (
    MAX_RUN_ID_CHARS,
    is_usable_run_id,
    project_run_id,
    split_run_path,
    unproject_run_id,
)

try:  # the OpenWOP Python client, when installed: a second implementation to agree with
    from openwop_client import wire_id as reference_client
except ImportError:  # pragma: no cover - depends on the environment
    reference_client = None

PROJECTED = re.compile(r"(?:[A-Za-z0-9._-]|~[0-9A-F]{2})*")
# A ``~`` or ``%`` followed by two hex digits: in a percent-form id such a ``~`` is ambiguous.
ESCAPE_LIKE = re.compile(r"[~%][0-9A-Fa-f]{2}")

usable_ids = st.text(min_size=1, max_size=80).filter(is_usable_run_id)


@pytest.mark.parametrize(
    ("segment", "run_id"),
    [
        ("acme~2Fr-9f3c", "acme/r-9f3c"),  # identity.md §5's example
        ("acme%2Fr-9f3c", "acme/r-9f3c"),  # the legacy percent form
        ("acme%2fr-9f3c", "acme/r-9f3c"),  # hex digits in either case
        ("acme~2fr-9f3c", "acme/r-9f3c"),
        ("a~7Eb", "a~b"),
        ("~3A", ":"),
        ("t~2Fa%3Ab", "t/a:b"),  # the two forms mixed
        ("plain-id_0.9", "plain-id_0.9"),
        ("a~b", "a~b"),  # a ~ that starts no escape is a literal ~ (the id grammars allow ~)
        ("a~2", "a~2"),
        ("a~2G", "a~2G"),
        ("~C3~A9t~C3~A9", "été"),
        ("%C3%A9", "é"),
        ("é", "é"),  # a raw non-ASCII character passes through as its UTF-8 bytes
        ("a+b", "a+b"),  # + is not a space in a path
        ("a" * MAX_RUN_ID_CHARS, "a" * MAX_RUN_ID_CHARS),
        ("~C3~A9" * MAX_RUN_ID_CHARS, "é" * MAX_RUN_ID_CHARS),
        ("~F0~9F~98~80" * MAX_RUN_ID_CHARS, "😀" * MAX_RUN_ID_CHARS),  # the longest raw form
    ],
)
def test_unproject_decodes(segment: str, run_id: str) -> None:
    assert unproject_run_id(segment) == run_id


@pytest.mark.parametrize(
    "segment",
    [
        pytest.param("", id="empty"),
        pytest.param("%", id="lone-percent"),
        pytest.param("a%2", id="short-percent"),
        pytest.param("a%zz", id="percent-not-hex"),
        pytest.param("~FF", id="not-utf8"),
        pytest.param("~C3", id="truncated-utf8"),
        pytest.param("~ED~A0~80", id="utf8-surrogate"),
        pytest.param("%00", id="nul"),
        pytest.param("a~0Ab", id="newline"),
        pytest.param("a~7Fb", id="del"),
        pytest.param("a~C2~85b", id="c1-nel"),
        pytest.param("a\tb", id="raw-tab"),
        pytest.param("a\x00b", id="raw-nul"),
        pytest.param("a\ud800b", id="lone-surrogate"),
        pytest.param("a" * (MAX_RUN_ID_CHARS + 1), id="too-long"),
        pytest.param("~2F" * (MAX_RUN_ID_CHARS + 1), id="too-long-decoded"),
        pytest.param("~F0~9F~98~80" * (MAX_RUN_ID_CHARS + 1), id="too-long-raw"),
    ],
)
def test_unproject_refuses(segment: str) -> None:
    assert unproject_run_id(segment) is None


@pytest.mark.parametrize(
    ("run_id", "wire"),
    [
        ("acme/r-9f3c", "acme~2Fr-9f3c"),
        ("a:b", "a~3Ab"),
        ("~", "~7E"),
        ("%", "~25"),
        (" ", "~20"),
        ("é", "~C3~A9"),
        ("A-z_0.9", "A-z_0.9"),
        ("a~2Fb", "a~7E2Fb"),  # never taken for an already projected id
    ],
)
def test_project_escapes_every_byte_outside_the_safe_set(run_id: str, wire: str) -> None:
    assert project_run_id(run_id) == wire


@given(usable_ids)
def test_law_unproject_inverts_project(run_id: str) -> None:
    wire = project_run_id(run_id)
    assert PROJECTED.fullmatch(wire)
    assert unproject_run_id(wire) == run_id


@given(usable_ids)
def test_law_percent_form_decodes_when_unambiguous(run_id: str) -> None:
    # quote() leaves ~ unescaped (RFC 3986 unreserved), so "a~2Fb" from a percent-form client
    # reads as "a/b": the one ambiguity of accepting both forms, shared with openwop_client.
    assume(not ESCAPE_LIKE.search(run_id))
    assert unproject_run_id(quote(run_id, safe="")) == run_id


def test_percent_form_tilde_ambiguity_is_read_as_projected() -> None:
    assert unproject_run_id(quote("a~2Fb", safe="")) == "a/b"


@pytest.mark.skipif(reference_client is None, reason="openwop_client is not installed")
@given(usable_ids)
def test_law_matches_the_reference_client(run_id: str) -> None:
    # The client guesses that an id without "/" holding an escaped slash is already projected;
    # outside that case the two projections agree byte for byte.
    assume("/" in run_id or not re.search(r"[~%]2F", run_id, re.IGNORECASE))
    assert project_run_id(run_id) == reference_client.project_id(run_id)
    assert reference_client.unproject_id(project_run_id(run_id)) == run_id


@pytest.mark.parametrize(
    ("raw_path", "prefix", "expected"),
    [
        ("/runs/acme~2Fr1/events/poll", "/runs/", ("acme/r1", "/events/poll")),
        ("/runs/acme%2Fr1/events/poll", "/runs/", ("acme/r1", "/events/poll")),
        ("/runs/abc:fork", "/runs/", ("abc", ":fork")),
        ("/runs/a~3Ab:fork", "/runs/", ("a:b", ":fork")),
        ("/runs/a%3Ab:fork", "/runs/", ("a:b", ":fork")),
        ("/runs/abc", "/runs/", ("abc", "")),
        ("/runs/abc/", "/runs/", ("abc", "/")),
        ("/runs/acme~2Fr1/interrupts/gate", "/runs/", ("acme/r1", "/interrupts/gate")),
        ("/runs/abc/cancel", "/runs/", ("abc", "/cancel")),
        ("/runs/abc/actions", "/runs/", ("abc", "/actions")),
        ("/runs/abc/envelopes", "/runs/", ("abc", "/envelopes")),
        ("/v1/runs/x/events", "/v1/runs/", ("x", "/events")),
        ("/v1/runs/x:fork", "/v1/runs/", ("x", ":fork")),
        ("/runs/abc/events?streamMode=debug&next=/a:b", "/runs/", ("abc", "/events")),
        ("/runs/abc?x=1", "/runs/", ("abc", "")),
        ("/runs/abc/events/x%2Fy", "/runs/", ("abc", "/events/x%2Fy")),  # the rest stays raw
    ],
)
def test_split_run_path(raw_path: str, prefix: str, expected: tuple[str, str]) -> None:
    assert split_run_path(raw_path, prefix) == expected


@pytest.mark.parametrize(
    ("raw_path", "prefix"),
    [
        pytest.param("/runs/", "/runs/", id="no-segment"),
        pytest.param("/runs//events", "/runs/", id="empty-segment"),
        pytest.param("/runs/:fork", "/runs/", id="method-only"),
        pytest.param("/runs/?a=b", "/runs/", id="query-only"),
        pytest.param("/v1/runs/x", "/runs/", id="other-prefix"),
        pytest.param("/runsabc", "/runs/", id="prefix-not-a-segment"),
        pytest.param("/runs/%zz/events", "/runs/", id="malformed-percent"),
        pytest.param("/runs/a~00b/events", "/runs/", id="control-char"),
    ],
)
def test_split_run_path_refuses(raw_path: str, prefix: str) -> None:
    assert split_run_path(raw_path, prefix) is None


@given(
    usable_ids,
    st.sampled_from(["/runs/", "/v1/runs/"]),
    st.sampled_from(["", "/events", "/events/poll", ":fork", "/interrupts/gate", "/cancel"]),
)
def test_law_split_finds_any_projected_run(run_id: str, prefix: str, rest: str) -> None:
    assert split_run_path(prefix + project_run_id(run_id) + rest, prefix) == (run_id, rest)
