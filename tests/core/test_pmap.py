"""PMap (app/core/runlog/pmap.py) against a dict model: small maps, the hash trie, keys whose hashes
agree in the low bits (deep splits), equal past the 60 bits the trie uses (a collision bucket),
negative hashes, and old versions left as they were (structural sharing)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.runlog.pmap import PMap


class Key:
    """A key with a chosen hash: equal keys have equal names."""

    def __init__(self, name: int, h: int) -> None:
        self.name, self.h = name, h

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Key) and other.name == self.name

    def __repr__(self) -> str:
        return f"Key({self.name}, {self.h:#x})"


# Hashes from a few families: small, sharing the low 5/10/55 bits, equal in the low 60 bits the
# trie uses (then they share a collision bucket), negative; and any 64-bit hash.
_SAME_LOW_60 = [7 + (k << 60) for k in range(-8, 8)]
HASHES = (
    st.sampled_from(
        [0, 1, 33, 1 << 10, (1 << 10) + 1, (1 << 55) + 7, (1 << 55) + (1 << 50) + 7, -7, -(1 << 40)]
        + _SAME_LOW_60
    )
    | st.sampled_from(_SAME_LOW_60)
    | st.integers(-(2**63), 2**63 - 1)
)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 120), st.integers(0, 1000)),
        min_size=0,
        max_size=150,
    )
    | st.lists(  # past 48 entries: the hash trie
        st.tuples(st.integers(0, 120), st.integers(0, 1000)),
        min_size=60,
        max_size=150,
    ),
    st.data(),
)
def test_pmap_behaves_as_a_dict_and_never_changes_old_versions(
    ops: list[tuple[int, int]], data: st.DataObject
) -> None:
    hashes: dict[int, int] = {}
    versions: list[tuple[PMap[Any, Any], dict[Any, Any]]] = [(PMap(), {})]
    for name, value in ops:
        if name not in hashes:
            hashes[name] = data.draw(HASHES)
        key = Key(name, hashes[name])
        current, model = versions[-1]
        versions.append((current.set(key, value), {**model, key: value}))
    for pmap, model in versions:
        assert len(pmap) == len(model)
        assert dict(pmap.items()) == model
        for key, value in model.items():
            assert pmap[key] == value and key in pmap
        for name, h in hashes.items():
            if Key(name, h) not in model:
                assert pmap.get(Key(name, h)) is None
        assert pmap == PMap(model)
