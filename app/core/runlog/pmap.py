"""A small persistent (immutable) hash map with structural sharing.

Role: the run state keeps one entry per correlationId and per surface; a run may admit
thousands of envelopes, so copying a dict per decision would make every decision O(n) and a
run O(n^2). A small map (under ``_SMALL`` entries) is a plain dict copied on write, which is
the fastest thing CPython offers at that size; past it, the entries live in an
``immutables.Map`` (MagicStack's hash array mapped trie in C, the one PEP 567 put into
CPython for ``contextvars``), whose ``set`` copies only the path from the root to one leaf
and shares everything else with the previous version.

Why not our own trie: this module held one (16-way, in Python, compiled with mypyc) until
issue 16 measured a decision on a 3000-entry run: ``PMap.set`` there was 1.4-2.2 µs against
0.5-0.9 µs for ``immutables.Map.set`` at the same size, and two of them are in every
decision (docs/admission.md, "Speed").

May import: the standard library and ``immutables`` (a pure value type, no I/O). Equality is
by content (same keys, equal values), so a map rebuilt by replay equals the live one whatever
the insertion history.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from typing import Any, Final, Generic, TypeVar, cast

from immutables import Map

__all__ = ["PMap"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_SMALL: Final = 48  # below this many entries a dict copy (~10 ns per entry) beats path copying


class PMap(Mapping[K, V], Generic[K, V]):
    """An immutable mapping; ``set`` returns a new map sharing all untouched entries."""

    __slots__ = ("_small", "_big")

    def __init__(self, items: Mapping[K, V] | None = None) -> None:
        # exactly one of the two holds the entries: the dict while small, the trie after
        self._small: dict[Any, Any] | None = {}
        self._big: Map[Any, Any] | None = None
        if items:  # (``set`` builds its result as ``PMap()``: keep the empty case cheap)
            entries = dict(items.items())
            if len(entries) < _SMALL:
                self._small = entries
            else:
                self._small, self._big = None, Map(entries)

    def set(self, key: K, value: V) -> PMap[K, V]:
        """A new map with ``key`` set to ``value``; this one is unchanged (structural sharing)."""
        new: PMap[K, V] = PMap()
        small = self._small
        if small is not None:
            if key in small or len(small) < _SMALL:  # the common, hot case
                copy = small.copy()
                copy[key] = value
                new._small = copy
                return new
            big: Map[Any, Any] = Map(small)  # grow into a trie, once
        else:
            big = cast("Map[Any, Any]", self._big)
        new._small, new._big = None, big.set(key, value)
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
        return cast("Map[Any, Any]", self._big).get(key, default)

    def __contains__(self, key: object) -> bool:
        return self.get(cast(K, key), _MISSING) is not _MISSING

    def __iter__(self) -> Iterator[K]:
        return (k for k, _ in self.items())

    def items(self) -> Iterator[tuple[K, V]]:  # type: ignore[override]
        """The ``(key, value)`` pairs, over a snapshot of the map."""
        if self._small is not None:
            return iter(list(self._small.items()))
        return iter(cast("Map[K, V]", self._big).items())

    def __len__(self) -> int:
        small = self._small
        return len(small) if small is not None else len(cast("Map[Any, Any]", self._big))

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Mapping) or len(other) != len(self):
            return False
        missing = _MISSING
        return all(other.get(k, missing) == v for k, v in self.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PMap({dict(self.items())!r})"


_MISSING: Final[Any] = object()
