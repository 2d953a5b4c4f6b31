"""RFC 6902 JSON Patch for the projector: a diff that only emits add/remove/replace, and
``verified_diff`` (diff, apply, compare: a patch is only ever sent when it reproduces the target
exactly; issue 5 §3, RFC 0114 "MUST be a valid RFC 6902 document"). The strict applier is
``app.core.projection.patch_apply``; JSON equality, strict on types, and its fast paths are
``app.core.projection.patch_equal``.

Values are plain JSON values (dict, list, str, int, float, bool, None) and are never mutated:
``diff`` shares subtrees of ``new`` in the op values. Subtrees that are the SAME object in
``old`` and ``new`` (structural sharing, as ``app.core.projection.surfaces`` produces) are
skipped without being walked.

May import: the standard library, app.core.common.pointer (pure) and the room's modules
patch_apply and patch_equal.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any

from app.core.common.pointer import escape
from app.core.projection.patch_apply import PatchError, apply_patch
from app.core.projection.patch_equal import (
    equal_run,
    json_equal_bytes_first,
    json_equal_in_c,
    loosely_equal,
)

__all__ = [
    "diff",
    "verified_diff",
]

_MISSING: Any = object()


def diff(old: Any, new: Any) -> list[dict[str, Any]]:
    """An RFC 6902 patch turning ``old`` into ``new``, using only ``add``, ``remove`` and
    ``replace`` (never ``test``, ``move`` or ``copy``; RFC 0114 excludes ``test``, and move/copy
    are optional for a consumer). ``[]`` when they are equal. Op values share ``new``'s
    subtrees: treat the patch as read-only."""
    patch = _compute(old, new, strict=False)
    return patch if _reproduces(old, new, patch) else _compute(old, new, strict=True)


def verified_diff(old: Any, new: Any) -> list[dict[str, Any]] | None:
    """``diff(old, new)`` if applying it to ``old`` reproduces ``new`` exactly (JSON equality,
    strict on types), else ``None``: the caller then sends a full frame (issue 5 §3: every
    delta is verified before it is sent)."""
    for strict in (False, True):
        try:
            patch = _compute(old, new, strict)
        except RecursionError:  # deeper than any recorded event can be: send a full frame
            return None
        if _reproduces(old, new, patch):
            return patch
    return None


# Two passes. The fast one finds equal subtrees with Python's ``==`` (C, skipping identical
# objects), which cannot tell ``True`` from ``1`` or ``1`` from ``1.0``; the strict verification
# that follows catches such a miss, and then the strict pass (``==`` confirmed with orjson bytes)
# runs. Real surfaces almost never need it.
#
# Arrays, and the objects of the top ``_DIFF_WALK`` levels (the root, v1's ``surface``, v2's
# ``components`` and ``dataModel``), are diffed WITHOUT being compared in C first: ``==`` stops
# at the first difference, so on the path to a change every level would scan the same equal
# prefix again (a v1 leaf change compared the components before it four times). Walking those
# few wide objects costs one identity check per member, and an array's diff starts with the
# same C comparison that a pre-check would have made: for arrays of equal length (an edit in
# place, the common case), one pass over the pairs that yields the indices that differ; after
# an insertion or a removal, the equal head and tail.
_DIFF_WALK = 2


def _compute(old: Any, new: Any, strict: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if old is not new:
        _diff(old, new, "", out, strict, 0)
    return out


def _reproduces(old: Any, new: Any, patch: list[dict[str, Any]]) -> bool:
    try:
        applied = apply_patch(old, patch)
    except (PatchError, RecursionError):
        return False
    return json_equal_bytes_first(applied, new)


def _diff(
    a: Any, b: Any, path: str, out: list[dict[str, Any]], strict: bool, depth: int = _DIFF_WALK
) -> None:
    # below the walked levels, callers have ruled out equality already (in C, before building
    # the path); a walked container may be equal, and then adds nothing
    ta, tb = type(a), type(b)
    if ta is dict and tb is dict:
        _diff_object(a, b, path, out, strict, depth)
    elif ta is list and tb is list:
        _diff_array(a, b, path, out, strict)
    elif ta is tb and a == b:  # equal scalars (a walked level can reach here at the root)
        return
    else:  # a scalar change, or a type change (object -> array, ...): RFC 6902 §4.3
        out.append({"op": "replace", "path": path, "value": b})


def _diff_object(
    a: dict[str, Any],
    b: dict[str, Any],
    path: str,
    out: list[dict[str, Any]],
    strict: bool,
    depth: int = _DIFF_WALK,
) -> None:
    for key in a:
        if key not in b:
            out.append({"op": "remove", "path": path + "/" + escape(key)})
    walk = depth + 1 < _DIFF_WALK
    for key, value in b.items():
        old = a.get(key, _MISSING)
        if old is value:
            continue
        if old is _MISSING:
            out.append({"op": "add", "path": path + "/" + escape(key), "value": value})
            continue
        kind = type(old)
        if kind is type(value) and (kind is list or (walk and kind is dict)):
            _diff(old, value, path + "/" + escape(key), out, strict, depth + 1)
            continue
        # equal in C before any path is built (and, strictly, with the same JSON types)
        if (
            kind is type(value)
            and old == value
            and (
                not strict or (kind is not dict and kind is not list) or json_equal_in_c(old, value)
            )
        ):
            continue
        _diff(old, value, path + "/" + escape(key), out, strict)


_ne, _compress = operator.ne, itertools.compress


def _diff_array(
    a: list[Any], b: list[Any], path: str, out: list[dict[str, Any]], strict: bool
) -> None:
    la, lb = len(a), len(b)
    if la == lb and not strict:
        # Same length: every index is its own position (nothing to align), so one forward
        # pass in C compares each pair once and yields the indices that differ.
        ops: list[dict[str, Any]] = []
        for i in _compress(range(la), map(_ne, a, b)):
            _diff(a[i], b[i], f"{path}/{i}", ops, strict)
        if len(ops) > 1 and len(ops) >= lb:
            out.append({"op": "replace", "path": path, "value": b})  # as below
        else:
            out.extend(ops)
        return
    shortest = min(la, lb)
    prefix = equal_run(a, b, shortest, strict)
    # the equal tail (after an insertion or a removal too): only the middle is diffed
    suffix = equal_run(a, b, shortest - prefix, strict, tail=True) if prefix < shortest else 0
    ma, mb = la - prefix - suffix, lb - prefix - suffix
    equal = json_equal_in_c if strict else loosely_equal
    ops = []
    for i in range(prefix, prefix + min(ma, mb)):
        if not equal(a[i], b[i]):
            _diff(a[i], b[i], f"{path}/{i}", ops, strict)
    if mb > ma:  # RFC 6902 §4.1: add at index i <= len inserts; ascending keeps indices right
        for i in range(prefix + ma, prefix + mb):
            ops.append({"op": "add", "path": f"{path}/{i}", "value": b[i]})
    elif ma > mb:  # RFC 6902 §4.2: remove from the highest index down, so none shifts
        for i in range(prefix + ma - 1, prefix + mb - 1, -1):
            ops.append({"op": "remove", "path": f"{path}/{i}"})
    removes = max(0, ma - mb)
    weight = len(ops) - removes + removes // 4  # a remove carries no value: it is cheap
    if weight > 1 and weight >= lb:
        # as many valued ops as elements: one replace of the whole array is smaller, as exact
        out.append({"op": "replace", "path": path, "value": b})
    else:
        out.extend(ops)
