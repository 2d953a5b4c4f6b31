"""A small persistent (immutable) hash map with structural sharing.

Role: the run state keeps one entry per correlationId and per surface; a run may admit
thousands of envelopes, so copying a dict per decision would make every decision O(n) and a
run O(n^2). A small map (under ``_SMALL`` entries) is a plain dict copied on write, which is
the fastest thing CPython offers at that size; past it, ``PMap.set`` copies only the path from
the root to one leaf (a hash array mapped trie, 16-way, depth ~log16(n)) and shares everything
else with the previous version.

May import: the standard library only. Equality is by content (same keys, equal values), so
a map rebuilt by replay equals the live one whatever the insertion history.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from typing import Any, Final, Generic, TypeVar, cast

__all__ = ["PMap"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# 16-way: half the copying of a 32-way node per level, for at most one level more (callgrind,
# decide on a 3000-entry run: 32-way 81.3k instructions, 16-way 77.2k, 8-way 83.5k).
_BITS: Final = 4
_WIDTH: Final = 1 << _BITS
_MASK: Final = _WIDTH - 1
# hash() may be negative: use its low 60 bits (15 levels of 4). Compiled, an int that fits in
# 62 bits is a machine word; a 64-bit hash would make every shift and mask a PyLong operation.
_HASH_MASK: Final = (1 << 60) - 1
_MAX_SHIFT: Final = 60  # past the hash bits, keys with equal hashes share a collision bucket
_EMPTY_NODE: Final[tuple[Any, ...]] = (None,) * _WIDTH
_SMALL: Final = 48  # below this many entries a dict copy (~10 ns per entry) beats path copying


class _Leaf:
    """One key (or, past the hash bits, a bucket of colliding keys) at a trie position. Not a
    tuple, so ``type(slot) is tuple`` tells a child node from a leaf in one test; a plain class
    with ``Final`` attributes, which compiled builds natively (app/core/run_state.py)."""

    __slots__ = ("h", "items")

    def __init__(self, h: int, items: tuple[tuple[Any, Any], ...]) -> None:
        self.h: Final = h
        self.items: Final = items


def _set(root: tuple[Any, ...], h: int, key: Any, value: Any) -> tuple[tuple[Any, ...], bool]:
    """The new root with ``key`` set, and whether the key was new. Iterative: it walks down
    recording the path, then copies the path bottom-up. A node is copied as
    ``l = list(node); l[i] = x; tuple(l)``, about twice as fast as slicing and concatenating
    (``PMap.set`` on a 3000-entry run copies three 16-slot nodes per update)."""
    path: list[tuple[tuple[Any, ...], int]] = []
    node = root
    shift = 0
    leaf: _Leaf | None = None
    added = True
    while True:
        i = (h >> shift) & _MASK
        slot = node[i]
        if slot is None:
            leaf = _Leaf(h, ((key, value),))
            break
        if type(slot) is tuple:
            path.append((node, i))
            node = slot
            shift += _BITS
            continue
        found: _Leaf = slot
        if found.h == h:
            items = found.items
            for j, (k, _) in enumerate(items):
                if k == key:
                    entries = list(items)
                    entries[j] = (key, value)
                    leaf, added = _Leaf(h, tuple(entries)), False
                    break
            else:
                if shift + _BITS >= _MAX_SHIFT:
                    leaf = _Leaf(h, (*items, (key, value)))
            if leaf is not None:
                break
        # split: push the existing leaf one level down, then insert beside it
        path.append((node, i))
        below = list(_EMPTY_NODE)
        below[(found.h >> (shift + _BITS)) & _MASK] = found
        node = tuple(below)
        shift += _BITS
    copy = list(node)
    copy[i] = leaf
    new = tuple(copy)
    for parent, index in path[::-1]:  # (not reversed(): mypyc, scripts/compile_core.py)
        copy = list(parent)
        copy[index] = new
        new = tuple(copy)
    return new, added


def _iter(node: tuple[Any, ...]) -> Iterator[tuple[Any, Any]]:
    stack = [node]
    while stack:
        for slot in stack.pop():
            if slot is None:
                continue
            if type(slot) is _Leaf:
                leaf: _Leaf = slot
                yield from leaf.items
            else:
                stack.append(slot)


class PMap(Mapping[K, V], Generic[K, V]):
    """An immutable mapping; ``set`` returns a new map sharing all untouched nodes."""

    __slots__ = ("_small", "_root", "_len")

    def __init__(self, items: Mapping[K, V] | None = None) -> None:
        self._small: dict[Any, Any] | None = {}
        self._root = _EMPTY_NODE
        self._len = 0
        if items:  # (``set`` builds its result as ``PMap()``: keep the empty case cheap)
            for k, v in items.items():
                self._small, self._root, self._len = _assoc(
                    self._small, self._root, self._len, k, v
                )

    def set(self, key: K, value: V) -> PMap[K, V]:
        """A new map with ``key`` set to ``value``; this one is unchanged (structural sharing)."""
        new: PMap[K, V] = PMap()
        small = self._small
        if small is not None and (key in small or len(small) < _SMALL):  # the common, hot case
            copy = small.copy()
            copy[key] = value
            new._small, new._root, new._len = copy, _EMPTY_NODE, len(copy)
            return new
        if small is None:  # a trie already: copy one path
            new._root, added = _set(self._root, hash(key) & _HASH_MASK, key, value)
            new._small, new._len = None, self._len + added
            return new
        new._small, new._root, new._len = _assoc(small, self._root, self._len, key, value)
        return new

    def __getitem__(self, key: K) -> V:
        v = self.get(key, _MISSING)
        if v is _MISSING:
            raise KeyError(key)
        return cast(V, v)

    def get(self, key: K, default: Any = None) -> Any:
        """The value of ``key``, or ``default``, as ``dict.get``."""
        small = self._small
        if small is not None:
            return small.get(key, default)
        # the trie walk, inlined: ``get`` runs twice per admission decision
        h = hash(key) & _HASH_MASK
        node = self._root
        shift = 0
        while True:
            slot = node[(h >> shift) & _MASK]
            if type(slot) is tuple:
                node = slot
                shift += _BITS
                continue
            if slot is None:
                return default
            leaf: _Leaf = slot
            if leaf.h != h:
                return default
            for k, v in leaf.items:
                if k == key:
                    return v
            return default

    def __contains__(self, key: object) -> bool:
        return self.get(cast(K, key), _MISSING) is not _MISSING

    def __iter__(self) -> Iterator[K]:
        return (k for k, _ in self.items())

    def items(self) -> Iterator[tuple[K, V]]:  # type: ignore[override]
        """The ``(key, value)`` pairs, over a snapshot of the map."""
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
            root, _ = _set(root, hash(k) & _HASH_MASK, k, v)
    root, added = _set(root, hash(key) & _HASH_MASK, key, value)
    return None, root, n + added


_MISSING: Final[Any] = object()
