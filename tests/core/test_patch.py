"""RFC 6902 diff/apply (app.core.projection.patch, patch_apply): the RFC's Appendix A examples
against the strict applier, the applier's refusals, the diff's shapes, and the laws
``apply_patch(old, diff(old, new)) == new`` and "the input is never mutated"."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.common.pointer import join
from app.core.projection.patch import diff, verified_diff
from app.core.projection.patch_apply import PatchError, apply_patch, parse_pointer
from app.core.projection.patch_equal import json_equal

# --- RFC 6902 Appendix A ------------------------------------------------------------------------

APPENDIX_A: list[tuple[str, Any, list[dict[str, Any]], Any]] = [
    (
        "A.1 add object member",
        {"foo": "bar"},
        [{"op": "add", "path": "/baz", "value": "qux"}],
        {"baz": "qux", "foo": "bar"},
    ),
    (
        "A.2 add array element",
        {"foo": ["bar", "baz"]},
        [{"op": "add", "path": "/foo/1", "value": "qux"}],
        {"foo": ["bar", "qux", "baz"]},
    ),
    (
        "A.3 remove object member",
        {"baz": "qux", "foo": "bar"},
        [{"op": "remove", "path": "/baz"}],
        {"foo": "bar"},
    ),
    (
        "A.4 remove array element",
        {"foo": ["bar", "qux", "baz"]},
        [{"op": "remove", "path": "/foo/1"}],
        {"foo": ["bar", "baz"]},
    ),
    (
        "A.5 replace a value",
        {"baz": "qux", "foo": "bar"},
        [{"op": "replace", "path": "/baz", "value": "boo"}],
        {"baz": "boo", "foo": "bar"},
    ),
    (
        "A.6 move a value",
        {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
        [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
        {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}},
    ),
    (
        "A.7 move an array element",
        {"foo": ["all", "grass", "cows", "eat"]},
        [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
        {"foo": ["all", "cows", "eat", "grass"]},
    ),
    (
        "A.10 add nested member object",
        {"foo": "bar"},
        [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
        {"foo": "bar", "child": {"grandchild": {}}},
    ),
    (
        "A.11 ignore unrecognized members",
        {"foo": "bar"},
        [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}],
        {"foo": "bar", "baz": "qux"},
    ),
    (
        "A.14 ~ escape ordering",
        {"/": 9, "~1": 10},
        [{"op": "replace", "path": "/~01", "value": 11}],
        {"/": 9, "~1": 11},
    ),
    (
        "A.14 ~1 is a slash",
        {"/": 9, "~1": 10},
        [{"op": "replace", "path": "/~1", "value": 8}],
        {"/": 8, "~1": 10},
    ),
    (
        "A.16 add an array value",
        {"foo": ["bar"]},
        [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
        {"foo": ["bar", ["abc", "def"]]},
    ),
    (
        "copy",
        {"a": {"b": 1}},
        [{"op": "copy", "from": "/a", "path": "/c"}],
        {"a": {"b": 1}, "c": {"b": 1}},
    ),
    (
        "add at the root replaces the document",
        {"a": 1},
        [{"op": "add", "path": "", "value": [1]}],
        [1],
    ),
    ("replace at the root", [1], [{"op": "replace", "path": "", "value": None}], None),
    (
        "add to an existing key replaces it",
        {"a": 1},
        [{"op": "add", "path": "/a", "value": 2}],
        {"a": 2},
    ),
    (
        "add at index == length appends",
        [1, 2],
        [{"op": "add", "path": "/2", "value": 3}],
        [1, 2, 3],
    ),
    ("empty key", {"": 1}, [{"op": "replace", "path": "/", "value": 2}], {"": 2}),
    (
        "null value is a value",
        {"a": 1},
        [{"op": "replace", "path": "/a", "value": None}],
        {"a": None},
    ),
]


@pytest.mark.parametrize(
    ("name", "doc", "patch", "expected"), APPENDIX_A, ids=[c[0] for c in APPENDIX_A]
)
def test_patch_appendix_a(name: str, doc: Any, patch: list[dict[str, Any]], expected: Any) -> None:
    before = copy.deepcopy(doc)
    patch_before = copy.deepcopy(patch)
    assert apply_patch(doc, patch) == expected
    assert doc == before and patch == patch_before  # never mutates its inputs


REFUSED: list[tuple[str, Any, Any]] = [
    (
        "A.8 test is excluded from frames",
        {"baz": "qux"},
        [{"op": "test", "path": "/baz", "value": "qux"}],
    ),
    (
        "A.12 add to a nonexistent target",
        {"foo": "bar"},
        [{"op": "add", "path": "/baz/bat", "value": "qux"}],
    ),
    ("remove a missing member", {"a": 1}, [{"op": "remove", "path": "/b"}]),
    ("replace a missing member", {"a": 1}, [{"op": "replace", "path": "/b", "value": 1}]),
    ("replace past the end", [1], [{"op": "replace", "path": "/1", "value": 1}]),
    ("remove past the end", [1], [{"op": "remove", "path": "/1"}]),
    ("add past the end", [1], [{"op": "add", "path": "/2", "value": 1}]),
    ("remove '-'", [1], [{"op": "remove", "path": "/-"}]),
    ("leading zero index", [1, 2], [{"op": "replace", "path": "/01", "value": 1}]),
    ("non-numeric index", [1], [{"op": "replace", "path": "/x", "value": 1}]),
    ("into a scalar", {"a": 1}, [{"op": "add", "path": "/a/b", "value": 1}]),
    ("missing value", {"a": 1}, [{"op": "add", "path": "/b"}]),
    ("missing path", {"a": 1}, [{"op": "remove"}]),
    ("no leading slash", {"a": 1}, [{"op": "remove", "path": "a"}]),
    ("bad escape", {"a": 1}, [{"op": "remove", "path": "/~2"}]),
    ("unknown op", {"a": 1}, [{"op": "merge", "path": "/a", "value": 1}]),
    ("move into own child", {"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a/b/c"}]),
    ("move from missing", {"a": 1}, [{"op": "move", "from": "/x", "path": "/y"}]),
    ("copy without from", {"a": 1}, [{"op": "copy", "path": "/y"}]),
    ("patch is not an array", {"a": 1}, {"op": "remove", "path": "/a"}),
    ("op is not an object", {"a": 1}, ["remove"]),
    ("remove the root", {"a": 1}, [{"op": "remove", "path": ""}]),
    ("path is not a string", {"a": 1}, [{"op": "remove", "path": 1}]),
]


@pytest.mark.parametrize(("name", "doc", "patch"), REFUSED, ids=[c[0] for c in REFUSED])
def test_patch_strict_applier_refuses(name: str, doc: Any, patch: Any) -> None:
    before = copy.deepcopy(doc)
    with pytest.raises(PatchError):
        apply_patch(doc, patch)
    assert doc == before


def test_patch_a_failing_op_applies_nothing_and_names_its_index() -> None:
    doc = {"a": 1}
    with pytest.raises(PatchError) as info:
        apply_patch(
            doc, [{"op": "replace", "path": "/a", "value": 2}, {"op": "remove", "path": "/z"}]
        )
    assert info.value.index == 1
    assert doc == {"a": 1}


def test_patch_later_op_does_not_mutate_an_earlier_value() -> None:
    value = {"x": 1}
    patch = [
        {"op": "add", "path": "/a", "value": value},
        {"op": "replace", "path": "/a/x", "value": 2},
    ]
    assert apply_patch({}, patch) == {"a": {"x": 2}}
    assert value == {"x": 1}


# --- pointers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "text"),
    [((), ""), (("a/b",), "/a~1b"), (("m~n",), "/m~0n"), (("~1",), "/~01"), (("", 0), "//0")],
)
def test_patch_pointer_round_trip(tokens: tuple[Any, ...], text: str) -> None:
    assert join("", *tokens) == text
    assert parse_pointer(text) == [str(t) for t in tokens]


# --- diff shapes --------------------------------------------------------------------------------

DIFFS: list[tuple[str, Any, Any, list[dict[str, Any]]]] = [
    ("equal", {"a": [1]}, {"a": [1]}, []),
    ("root scalar", 1, 2, [{"op": "replace", "path": "", "value": 2}]),
    (
        "type change object->array",
        {"a": {}},
        {"a": []},
        [{"op": "replace", "path": "/a", "value": []}],
    ),
    ("bool is not int", {"a": 1}, {"a": True}, [{"op": "replace", "path": "/a", "value": True}]),
    ("null", {"a": 1}, {"a": None}, [{"op": "replace", "path": "/a", "value": None}]),
    # Python's == says equal here; the strict pass must still find the change
    (
        "nested bool vs int",
        {"a": [1, 2]},
        {"a": [True, 2]},
        [{"op": "replace", "path": "/a/0", "value": True}],
    ),
    (
        "nested float vs int",
        {"x": {"y": 1.0}, "z": [0]},
        {"x": {"y": 1}, "z": [False]},
        [
            {"op": "replace", "path": "/x/y", "value": 1},
            {"op": "replace", "path": "/z/0", "value": False},
        ],
    ),
    (
        "escaped keys",
        {"a/b": 1, "c~d": 1},
        {"a/b": 2, "c~d": 2},
        [
            {"op": "replace", "path": "/a~1b", "value": 2},
            {"op": "replace", "path": "/c~0d", "value": 2},
        ],
    ),
    (
        "v1 leaf",
        {"surface": {"components": [{"text": "a"}, {"text": "b"}]}},
        {"surface": {"components": [{"text": "a"}, {"text": "Done"}]}},
        [{"op": "replace", "path": "/surface/components/1/text", "value": "Done"}],
    ),
    ("append", {"c": [1, 2, 3]}, {"c": [1, 2, 3, 4]}, [{"op": "add", "path": "/c/3", "value": 4}]),
    (
        "insert at front",
        {"c": [1, 2, 3]},
        {"c": [0, 1, 2, 3]},
        [{"op": "add", "path": "/c/0", "value": 0}],
    ),
    (
        "shrink",
        {"c": [1, 2, 3, 4]},
        {"c": [1, 4]},
        [{"op": "remove", "path": "/c/2"}, {"op": "remove", "path": "/c/1"}],
    ),
]


@pytest.mark.parametrize(("name", "old", "new", "expected"), DIFFS, ids=[c[0] for c in DIFFS])
def test_patch_diff_shapes(name: str, old: Any, new: Any, expected: list[dict[str, Any]]) -> None:
    patch = diff(old, new)
    assert patch == expected
    assert json_equal(apply_patch(old, patch), new)
    assert verified_diff(old, new) == expected


def test_patch_diff_emits_only_add_remove_replace() -> None:
    old = {"a": [1, 2, {"x": 1}], "b": {"c": "d"}, "e": 1}
    new = {"a": [{"x": 2}], "b": [], "f": {"g/h": None}}
    assert {op["op"] for op in diff(old, new)} <= {"add", "remove", "replace"}


def test_patch_json_equal_is_strict_on_types() -> None:
    assert not json_equal(1, True)
    assert not json_equal(1, 1.0)
    assert not json_equal({"a": 0}, {"a": False})
    assert json_equal({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert not json_equal([1, 2], [2, 1])
    # -0.0 and 0.0 are the same JSON number, at any depth, whatever bytes orjson writes
    assert json_equal(-0.0, 0.0) and json_equal([[[[-0.0]]]], [[[[0.0]]]])
    assert diff({"a": [[[-0.0]]]}, {"a": [[[0.0]]]}) == []


# --- the law, on arbitrary JSON ----------------------------------------------------------------

KEYS = st.one_of(
    st.sampled_from(["a", "b", "a/b", "~", "~0", "~1", "/", "", "0", "1", "-"]), st.text(max_size=4)
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=5),
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=6), st.dictionaries(KEYS, children, max_size=5)
    ),
    max_leaves=25,
)
SMALL_JSON = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=4)
    ),
    max_leaves=8,
)


@settings(max_examples=500, deadline=None)
@given(JSON, JSON)
def test_patch_law_apply_diff_reproduces_new(old: Any, new: Any) -> None:
    before_old, before_new = copy.deepcopy(old), copy.deepcopy(new)
    patch = diff(old, new)
    assert json_equal(apply_patch(old, patch), new)
    assert verified_diff(old, new) == patch
    assert json_equal(old, before_old) and json_equal(new, before_new)
    assert all(op["op"] in ("add", "remove", "replace") for op in patch)


@st.composite
def _edited(draw: st.DrawFn) -> tuple[Any, Any]:
    """A document and a small edit of it (what a projector sees): shared subtrees."""
    old = draw(st.dictionaries(KEYS, SMALL_JSON, min_size=1, max_size=5))
    new = dict(old)
    for _ in range(draw(st.integers(1, 3))):
        key = draw(KEYS)
        if draw(st.booleans()) and key in new:
            del new[key]
        else:
            new[key] = draw(SMALL_JSON)
    return old, new


@settings(max_examples=400, deadline=None)
@given(_edited())
def test_patch_law_on_small_edits(pair: tuple[Any, Any]) -> None:
    old, new = pair
    patch = verified_diff(old, new)
    assert patch is not None
    assert json_equal(apply_patch(old, patch), new)


def test_patch_verified_diff_gives_up_on_absurd_depth() -> None:
    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    assert verified_diff(deep, [0]) is not None  # different at the root: one replace
    other: Any = 2
    for _ in range(5000):
        other = [other]
    assert verified_diff(deep, other) is None  # a full frame instead, never a crash
