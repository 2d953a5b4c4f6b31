"""JSON equality for RFC 6902 patches, strict on types: the readable reference and the fast paths
that shortcut it (STYLE rule 12; tests/core/test_fast_paths.py checks each against it). The
diff (``app.core.projection.patch``) finds equal subtrees with these, and every patch is
verified with ``json_equal_bytes_first`` before it is sent.

Equality is JSON equality, strict on types: ``1`` and ``true`` differ, ``1`` and ``1.0``
differ (orjson writes them differently), ``-0.0`` equals ``0.0``, object key order does not
matter (RFC 8259 objects are unordered). Subtrees that are the SAME object on both sides
(structural sharing, as ``app.core.projection.surfaces`` produces) are equal without a look.

May import: the standard library and orjson.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any

import orjson

__all__ = [
    "json_equal",
    "json_equal_reference",
    "json_equal_in_c",
    "json_equal_bytes_first",
    "loosely_equal",
    "equal_run",
]

_MISSING: Any = object()

# --- equality -----------------------------------------------------------------------------------
#
# One idea, JSON equality strict on types, with a readable reference and the fast paths that
# shortcut it (STYLE rule 12; tests/core/test_fast_paths.py checks each against it):
#
#   json_equal_reference     the reference: both values walked in Python (shared subtrees skipped)
#   json_equal               the same walk for the top levels, then json_equal_in_c below
#   json_equal_in_c          Python's ``==`` and orjson bytes (C); the reference if they cannot tell
#   json_equal_bytes_first   orjson bytes first when the documents share nothing, else json_equal
#   loosely_equal            a weaker screen (the diff's fast pass, whose patches are verified
#                            strictly): the reference implies it, and it implies ``==``
#   equal_run                the run of equal leading (trailing) pairs of two arrays, counted in C


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality, strict on types (``True != 1``, ``1 != 1.0``), objects unordered: the fast
    twin of ``json_equal_reference``. The top levels are walked in Python so that subtrees
    shared by both sides (the same object) are skipped without a look; deeper subtrees are
    compared in C (``json_equal_in_c``)."""
    return _walk_equal(a, b, _WALK_DEPTH)


def json_equal_reference(a: Any, b: Any) -> bool:
    """The reference of JSON equality: both values walked in Python all the way down (a subtree
    that is the same object on both sides is equal without a look). Objects are equal when they
    have the same keys with equal values, in any order; arrays when equal pairwise; scalars when
    of the same type and ``==`` (so ``-0.0`` equals ``0.0``)."""
    return _walk_equal(a, b, _ALL_LEVELS)


_WALK_DEPTH = 2  # the root and a wide container under it (components): where sharing pays off
_dumps = orjson.dumps


_ALL_LEVELS = -1  # counts down from -1 and so never reaches 0: walked all the way down


def _walk_equal(a: Any, b: Any, levels: int) -> bool:
    # ``levels``: how many container levels are walked here before json_equal_in_c
    if a is b:
        return True
    ta = type(a)
    if ta is not type(b):
        return False
    if ta is dict:
        if len(a) != len(b):
            return False
        if levels == 0:
            return json_equal_in_c(a, b)
        below = levels - 1
        for key, value in a.items():
            other = b.get(key, _MISSING)
            if value is not other and (other is _MISSING or not _walk_equal(value, other, below)):
                return False
        return True
    if ta is list:
        if len(a) != len(b):
            return False
        if levels == 0:
            return json_equal_in_c(a, b)
        below = levels - 1
        return all(x is y or _walk_equal(x, y, below) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def json_equal_in_c(a: Any, b: Any) -> bool:
    """``json_equal_reference``, done in C where possible: Python's ``==`` (which skips
    identical objects) rules out every difference except ``True == 1`` and ``1 == 1.0``; equal
    orjson bytes then prove equality. Otherwise (a key-order difference, ``-0.0`` against
    ``0.0``, a bool against a number, or a value orjson cannot encode) the reference walks."""
    if a is b:
        return True
    ta = type(a)
    if ta is not type(b) or a != b:
        return False
    if ta is not dict and ta is not list:
        return True
    try:
        if _dumps(a) == _dumps(b):
            return True
    except (TypeError, orjson.JSONEncodeError):
        pass
    return _walk_equal(a, b, _ALL_LEVELS)


def loosely_equal(a: Any, b: Any) -> bool:
    """The screen of the diff's fast pass, weaker than ``json_equal_reference``: the same type
    and Python's ``==`` (so ``[1]`` loosely equals ``[1.0]``, and ``[True]`` ``[1]``)."""
    return a is b or (type(a) is type(b) and a == b)


_ne, _not, _count_of = operator.ne, operator.not_, operator.countOf
_takewhile, _islice, _compress = itertools.takewhile, itertools.islice, itertools.compress


def equal_run(a: list[Any], b: list[Any], limit: int, strict: bool, tail: bool = False) -> int:
    """How many leading (``tail``: trailing) elements of ``a`` and ``b``, at most ``limit``, are
    equal: ``==`` (in C, stopping at the first difference). Strictly, the run found is then
    confirmed with orjson bytes (``True == 1`` in Python, not in JSON), so it is the run of
    pairs that ``json_equal_reference`` finds equal."""
    la, lb = len(a), len(b)
    if tail and limit and a[la - limit :] == b[lb - limit :]:
        count = limit  # everything after the head is equal (one slice comparison in C)
    else:
        # the pairs compared in C (``map``, ``takewhile`` and ``countOf`` iterate without a
        # Python frame per element), stopping at the first unequal pair
        unequal = map(_ne, reversed(a), reversed(b)) if tail else map(_ne, a, b)
        count = _count_of(_takewhile(_not, _islice(unequal, limit)), False)
    if strict and count:
        x, y = (a[la - count :], b[lb - count :]) if tail else (a[:count], b[:count])
        same = json_equal_in_c
        if not same(x, y):  # a True == 1 inside: count one by one
            count = 0
            while count < limit and (
                same(a[la - 1 - count], b[lb - 1 - count]) if tail else same(a[count], b[count])
            ):
                count += 1
    return count


def json_equal_bytes_first(applied: Any, new: Any) -> bool:
    """``json_equal(applied, new)`` (the fast twin of ``json_equal_reference`` for a patch's
    verification), choosing the cheaper way: documents that share subtrees
    (the projector's v2 surfaces) are walked, skipping shared subtrees; documents that share
    nothing (two decoded v1 payloads) are compared as bytes first, in C."""
    if type(applied) is dict and type(new) is dict:
        shared = any(
            value is applied.get(key) for key, value in new.items() if type(value) in (dict, list)
        )
        if not shared:
            try:
                if orjson.dumps(applied) == orjson.dumps(new):
                    return True
            except (TypeError, orjson.JSONEncodeError):
                pass
    return json_equal(applied, new)
