"""RFC 6901 JSON Pointers (app.core.common.pointer): the laws ``parse(join("", *tokens)) == tokens``
and ``unescape(escape(token)) == token`` for any tokens, the refusal of every ``~`` that is not
followed by ``0`` or ``1`` (and of what is not a pointer at all), and the readers built on it
(the applier's ``parse_pointer``, the projector's lenient ``parse_data_path``) agreeing with it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.common.pointer import PointerError, escape, join, parse, syntax_error, unescape
from app.core.projection.patch_apply import PatchError, parse_pointer
from app.core.projection.surfaces import parse_data_path

# Tokens rich in the characters that matter: "~", "/", "0", "1", and the empty token.
TOKEN = st.text(alphabet=st.sampled_from("~/01a2é"), max_size=8) | st.text(max_size=8)
TOKENS = st.lists(TOKEN, max_size=6)
# A pointer with at least one "~" that is not an escape: "~" then anything but "0" or "1"
# (or nothing: the end of the pointer).
_NOT_ESCAPE = st.sampled_from(["", "2", "~", "/", "a", "~0", "~1", "é"])


@st.composite
def _bad_pointers(draw: st.DrawFn) -> str:
    before = join("", *draw(TOKENS))
    after = join("", *draw(TOKENS))
    return before + "/" + escape(draw(TOKEN)) + "~" + draw(_NOT_ESCAPE) + after


# --- the laws -----------------------------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(TOKEN)
def test_pointer_unescape_inverts_escape(token: str) -> None:
    escaped = escape(token)
    assert "/" not in escaped
    assert syntax_error("/" + escaped) is None
    assert unescape(escaped) == token


@settings(max_examples=500, deadline=None)
@given(TOKENS)
def test_pointer_parse_inverts_join(tokens: list[str]) -> None:
    text = join("", *tokens)
    assert parse(text) == tokens
    assert parse_pointer(text) == tokens
    assert syntax_error(text) is None


@settings(max_examples=300, deadline=None)
@given(TOKENS, TOKENS)
def test_pointer_join_extends_a_base(base: list[str], more: list[str]) -> None:
    assert join(join("", *base), *more) == join("", *base, *more)
    assert parse(join(join("", *base), *more)) == base + more


@settings(max_examples=300, deadline=None)
@given(st.lists(TOKEN, min_size=1, max_size=6))
def test_pointer_lenient_data_path_reads_what_parse_reads(tokens: list[str]) -> None:
    text = join("", *tokens)
    if text != "/":  # "/" is the root for updateDataModel (a2ui-v09 §5), [""] for RFC 6901
        assert parse_data_path(text) == parse(text)


@settings(max_examples=500, deadline=None)
@given(_bad_pointers())
def test_pointer_refuses_every_bad_escape(text: str) -> None:
    assert syntax_error(text) is not None
    message = f"path {text!r}: '~' must be followed by 0 or 1 (RFC 6901 §3)"
    with pytest.raises(PointerError) as refused:
        parse(text)
    assert str(refused.value) == message
    with pytest.raises(PatchError) as patch_refused:
        parse_pointer(text)
    assert str(patch_refused.value) == message


# --- tables -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", []),
        ("/", [""]),
        ("//0", ["", "0"]),
        ("/a~1b/c~0d", ["a/b", "c~d"]),
        ("/~01", ["~1"]),  # §4: ~1 is decoded first, so ~01 is "~1", not "/"
        ("/~10", ["/0"]),
        ("/~0~1", ["~/"]),
    ],
)
def test_pointer_parse_table(text: str, tokens: list[str]) -> None:
    assert parse(text) == tokens


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (5, "a path is a string, not int"),
        (None, "a path is a string, not NoneType"),
        ("a/b", "path 'a/b' does not start with '/'"),
        ("/~", "path '/~': '~' must be followed by 0 or 1 (RFC 6901 §3)"),
        ("/a~2", "path '/a~2': '~' must be followed by 0 or 1 (RFC 6901 §3)"),
        ("/a~/b", "path '/a~/b': '~' must be followed by 0 or 1 (RFC 6901 §3)"),
        # the first "~" is followed by "~": refused, though dropping "~0" and "~1" from the
        # token ("~~01" -> "~1" -> "") would leave no "~" behind
        ("/~~01", "path '/~~01': '~' must be followed by 0 or 1 (RFC 6901 §3)"),
    ],
)
def test_pointer_parse_refusals(text: Any, message: str) -> None:
    with pytest.raises(PointerError) as refused:
        parse(text)
    assert str(refused.value) == message
    assert isinstance(refused.value, ValueError)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("/a~1b", None),
        ("/~2", '"~" at character 1 is not followed by 0 or 1'),
        ("/ok~0/x~", '"~" at character 7 is not followed by 0 or 1'),
        ("/~~01", '"~" at character 1 is not followed by 0 or 1'),
    ],
)
def test_pointer_syntax_error_names_the_character(text: str, error: str | None) -> None:
    assert syntax_error(text) == error


def test_pointer_escape_accepts_array_indices() -> None:
    assert escape(3) == "3"
    assert join("/messages", 0, "updateComponents", "a/b~") == "/messages/0/updateComponents/a~1b~0"
