"""A small persistent (immutable) hash map with structural sharing.

Role: the run state keeps one entry per correlationId and per surface; a run may admit
thousands of envelopes, so copying a dict per decision would make every decision O(n) and a
run O(n^2). A small map (under ``_SMALL`` entries) is a plain dict copied on write, which is
the fastest thing CPython offers at that size; past it, ``PMap.set`` copies only the path from
the root to one leaf (a hash array mapped trie, 32-way, depth ~log32(n)) and shares everything
else with the previous version.

May import: the standard library only. Equality is by content (same keys, equal values), so
a map rebuilt by replay equals the live one whatever the insertion history.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from typing import Any, Generic, TypeVar, cast

__all__ = ["PMap"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_BITS = 5
_WIDTH = 1 << _BITS
_MASK = _WIDTH - 1
_MAX_SHIFT = 64  # beyond 64 hash bits, keys with equal hashes share a collision bucket
_EMPTY_NODE: tuple[Any, ...] = (None,) * _WIDTH
_SMALL = 48  # below this many entries a dict copy (~10 ns per entry) beats path copying


class _Leaf:
    """One key (or, past the hash bits, a bucket of colliding keys) at a trie position."""

    __slots__ = ("h", "items")

    def __init__(self, h: int, items: tuple[tuple[Any, Any], ...]) -> None:
        self.h = h
        self.items = items


def _h(key: Hashable) -> int:
    return hash(key) & 0xFFFF_FFFF_FFFF_FFFF


def _with(node: tuple[Any, ...], i: int, child: Any) -> tuple[Any, ...]:
    return node[:i] + (child,) + node[i + 1 :]


def _set(
    node: tuple[Any, ...], h: int, shift: int, key: Any, value: Any
) -> tuple[tuple[Any, ...], bool]:
    """Return the new node and whether the key was new."""
    i = (h >> shift) & _MASK
    slot = node[i]
    if slot is None:
        return _with(node, i, _Leaf(h, ((key, value),))), True
    if isinstance(slot, _Leaf):
        if slot.h == h:
            for j, (k, _) in enumerate(slot.items):
                if k == key:
                    items = slot.items[:j] + ((key, value),) + slot.items[j + 1 :]
                    return _with(node, i, _Leaf(h, items)), False
            if shift + _BITS >= _MAX_SHIFT:
                return _with(node, i, _Leaf(h, slot.items + ((key, value),))), True
        # split: push the existing leaf one level down, then insert beside it
        child = _with(_EMPTY_NODE, (slot.h >> (shift + _BITS)) & _MASK, slot)
        child, added = _set(child, h, shift + _BITS, key, value)
        return _with(node, i, child), added
    child, added = _set(slot, h, shift + _BITS, key, value)
    return _with(node, i, child), added


def _get(node: tuple[Any, ...], h: int, key: Any, default: Any) -> Any:
    shift = 0
    while True:
        slot = node[(h >> shift) & _MASK]
        if slot is None:
            return default
        if isinstance(slot, _Leaf):
            if slot.h != h:
                return default
            for k, v in slot.items:
                if k == key:
                    return v
            return default
        node = slot
        shift += _BITS


def _iter(node: tuple[Any, ...]) -> Iterator[tuple[Any, Any]]:
    stack = [node]
    while stack:
        for slot in stack.pop():
            if slot is None:
                continue
            if isinstance(slot, _Leaf):
                yield from slot.items
            else:
                stack.append(slot)


class PMap(Mapping[K, V], Generic[K, V]):
    """An immutable mapping; ``set`` returns a new map sharing all untouched nodes."""

    __slots__ = ("_small", "_root", "_len")

    def __init__(self, items: Mapping[K, V] | None = None) -> None:
        self._small: dict[Any, Any] | None = {}
        self._root = _EMPTY_NODE
        self._len = 0
        for k, v in (items or {}).items():
            self._small, self._root, self._len = _assoc(self._small, self._root, self._len, k, v)

    def set(self, key: K, value: V) -> PMap[K, V]:
        new = _new(PMap)
        small = self._small
        if small is not None and (key in small or len(small) < _SMALL):  # the common, hot case
            copy = small.copy()
            copy[key] = value
            new._small, new._root, new._len = copy, _EMPTY_NODE, len(copy)
            return new
        new._small, new._root, new._len = _assoc(small, self._root, self._len, key, value)
        return new

    def __getitem__(self, key: K) -> V:
        v = self.get(key, _MISSING)
        if v is _MISSING:
            raise KeyError(key)
        return cast(V, v)

    def get(self, key: K, default: Any = None) -> Any:
        if self._small is not None:
            return self._small.get(key, default)
        return _get(self._root, _h(key), key, default)

    def __contains__(self, key: object) -> bool:
        return self.get(cast(K, key), _MISSING) is not _MISSING

    def __iter__(self) -> Iterator[K]:
        return (k for k, _ in self.items())

    def items(self) -> Iterator[tuple[K, V]]:  # type: ignore[override]
        if self._small is not None:
            return iter(list(self._small.items()))
        return _iter(self._root)

    def __len__(self) -> int:
        return self._len

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Mapping) or len(other) != self._len:
            return False
        missing = _MISSING
        return all(other.get(k, missing) == v for k, v in self.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PMap({dict(self.items())!r})"


def _assoc(
    small: dict[Any, Any] | None, root: tuple[Any, ...], n: int, key: Any, value: Any
) -> tuple[dict[Any, Any] | None, tuple[Any, ...], int]:
    """The (small, root, len) of a map with ``key`` set; never mutates its inputs."""
    if small is not None:
        if key in small or len(small) < _SMALL:
            copy = small.copy()
            copy[key] = value
            return copy, root, len(copy)
        for k, v in small.items():  # grow into a trie
            root, _ = _set(root, _h(k), 0, k, v)
    root, added = _set(root, _h(key), 0, key, value)
    return None, root, n + added


_new = object.__new__
_MISSING: Any = object()
