"""The per-run admission state: what the admission decision needs to know about a run's log.

Role: frozen values, derived from the run's recorded events only
(``app.core.admission.fold.apply``), so replay is ``reduce(apply, log, RunState.initial(run_id))``
and a fork that copies ``[0, fromSeq)`` folds exactly that prefix (openwop-a2ui.md §6). Updating a
state copies one trie path of a ``PMap`` (structural sharing), never the whole run.

What it holds:
- ``next_sequence``: the sequence the next recorded event gets (first 0, monotonic, §8);
- ``surfaces``: v2 surfaces by surfaceId: fold status, sticky taint, bound nodeIds, and whether
  the last envelope that touched the surface is still partial (§6, §7, E1);
- ``correlations``: correlationId -> type and the recorded outcome(s), for E2 re-emission (§2);
- ``v1_surface``: the run's v1 surface. Decision (docs/admission.md): a run has ONE v1 surface,
  the last admitted version-0/1 payload (RFC 0114: the recorded envelope is always the full
  surface and deltas patch the one last delivered), identified by that event's eventId.

Values are small immutable classes (``FrozenValue``: read-only attributes, compared and hashed by
value, ``_replace``), not named tuples or frozen dataclasses: compiled with mypyc
(docs/admission.md, "The compiled core") one is built by a native call in about 0.1 µs, where
``tuple.__new__`` of a named tuple takes about 0.4 µs and a frozen dataclass 1 µs, and every
admission builds five of them on a path whose whole budget is 20 µs (bench admission).

May import: the standard library and app.core.runlog.pmap.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import FunctionType, MappingProxyType
from typing import Any, ClassVar, Final, Literal, NamedTuple

from app.core.runlog.pmap import PMap

__all__ = [
    "FoldStatus",
    "Recorded",
    "SurfaceState",
    "V1Surface",
    "Correlation",
    "RunState",
    "initial_state",
    "FrozenValue",
    "NO_NODES",
    "NO_GRAPH",
    "Lifecycle",
    "dump",
    "load",
]

# "absent" is never stored: a surfaceId missing from ``surfaces`` is absent.
FoldStatus = Literal["absent", "live", "deleted"]

EMPTY: Final[PMap[Any, Any]] = PMap()  # shared: a PMap is immutable


class FrozenValue:
    """An immutable value: its ``_fields`` are read-only attributes (compiled: ``Final``
    attributes of a native class; from source: each is set once, by ``__init__``, and
    assigning or deleting it again raises ``AttributeError``, see ``_assign_once``), compared
    and hashed by value, copied with changes by ``_replace`` as a named tuple's are. A subclass
    names its fields twice, in ``__slots__`` and ``_fields``: compiled classes keep no
    ``__slots__`` at run time, and mypyc cannot initialize one class attribute from another."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in self._fields])

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not type(self):
            return False
        assert isinstance(other, FrozenValue)
        return self._values() == other._values()

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({shown})"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:  # copy, deepcopy and pickle
        return type(self), self._values()

    def _replace(self, **changes: Any) -> Any:
        values = {name: getattr(self, name) for name in self._fields}
        values.update(changes)
        return type(self)(**values)


def _assign_once(self: FrozenValue, name: str, value: Any) -> None:
    """From source, ``FrozenValue.__setattr__``: a slot is set once (by ``__init__``); setting
    it again raises, as assigning a ``Final`` attribute of the compiled class does."""
    if hasattr(self, name):
        raise AttributeError(
            f"{type(self).__name__}.{name} is read-only: build a new value (_replace)"
        )
    _set_slot(self, name, value)  # unset: __init__ is setting it


_set_slot: Final = object.__setattr__


def _refuse_delete(self: FrozenValue, name: str) -> None:
    raise AttributeError(f"{type(self).__name__}.{name} is read-only: it cannot be deleted")


def _interpreted() -> bool:
    """True when this module runs from source (a compiled module's functions are builtins)."""
    return type(_interpreted) is FunctionType


# Only from source: in a mypyc class a ``__setattr__`` would turn every attribute write of every
# ``__init__`` into a method call (mypyc calls it for ``self.x = ...`` too), on the admission
# path, and the compiled ``Final`` attributes refuse assignment already. From source it costs
# about 0.4 µs per field built (tests/core/test_run_state_frozen.py checks both builds).
if _interpreted():
    setattr(FrozenValue, "__setattr__", _assign_once)  # noqa: B010 (mypy: a method is not assignable)
    setattr(FrozenValue, "__delattr__", _refuse_delete)  # noqa: B010


class Recorded(FrozenValue):
    """Where an admitted envelope landed in the run log."""

    __slots__ = ("sequence", "event_id")
    _fields: ClassVar[tuple[str, ...]] = ("sequence", "event_id")

    def __init__(self, sequence: int, event_id: str) -> None:
        self.sequence: Final = sequence
        self.event_id: Final = event_id


NO_NODES: Final[frozenset[str]] = frozenset()  # shared: no node bound yet
NO_GRAPH: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType({})  # no children graph


class SurfaceState(FrozenValue):
    """One v2 surface, identity ``(runId, surfaceId)`` (§6).

    - ``tainted``: §7 / RFC 0209 §C.12: once any envelope in the surface's fold is untrusted,
      the surface is untrusted for good: a later trusted update, a deleteSurface or a re-create
      never launders it.
    - ``node_ids``: §7 binding: every nodeId that emitted an envelope for this surface (the
      approval gate).
    - ``partial``: E1: the last envelope that touched the surface was a non-final chunk
      (actions disabled).
    - ``children``: the children graph, parent component id -> child ids, across the
      surface's envelopes (app.core.admission.children: a cycle closed by a later envelope is
      refused); a dict that is never changed once built.
    """

    __slots__ = ("status", "tainted", "node_ids", "partial", "last", "children")
    _fields: ClassVar[tuple[str, ...]] = (
        "status",
        "tainted",
        "node_ids",
        "partial",
        "last",
        "children",
    )

    def __init__(
        self,
        status: FoldStatus,
        tainted: bool = False,
        node_ids: frozenset[str] = NO_NODES,
        partial: bool = False,
        last: Recorded | None = None,
        children: Mapping[str, tuple[str, ...]] = NO_GRAPH,
    ) -> None:
        self.status: Final = status
        self.tainted: Final = tainted
        self.node_ids: Final = node_ids
        self.partial: Final = partial
        self.last: Final = last
        self.children: Final = children


class V1Surface(FrozenValue):
    """The run's single v1 surface: the last admitted full v1 payload (RFC 0114)."""

    __slots__ = ("last", "tainted", "node_ids")
    _fields: ClassVar[tuple[str, ...]] = ("last", "tainted", "node_ids")

    def __init__(
        self, last: Recorded, tainted: bool = False, node_ids: frozenset[str] = NO_NODES
    ) -> None:
        self.last: Final = last
        self.tainted: Final = tainted
        self.node_ids: Final = node_ids


class Correlation(FrozenValue):
    """E2 (§2): what a correlationId produced.

    ``chunks`` maps a ``partial.index`` to the record of that chunk (E1: every chunk of one
    emission shares the correlationId); ``last`` is the latest record for the id; ``complete``
    is true once a final envelope (no ``partial`` or ``isPartial: false``) was recorded.
    """

    __slots__ = ("type", "last", "complete", "chunks")
    _fields: ClassVar[tuple[str, ...]] = ("type", "last", "complete", "chunks")

    def __init__(
        self, type: str, last: Recorded, complete: bool, chunks: PMap[int, Recorded] = EMPTY
    ) -> None:
        self.type: Final = type
        self.last: Final = last
        self.complete: Final = complete
        self.chunks: Final = chunks


class Lifecycle(NamedTuple):
    """The run lifecycle as its host events left it (app.core.runlog.run_lifecycle): the status,
    each interrupt ``(nodeId, "pending" | "resolved", sequence of that change)``, and, for a
    fork, its ``lineage``: the runs it descends from, nearest first (their SR-1 secrets are
    its secrets too)."""

    status: str = "running"
    interrupts: tuple[tuple[str, str, int], ...] = ()
    lineage: tuple[str, ...] = ()

    def interrupt(self, node_id: str) -> tuple[str, int] | None:
        """``(state, sequence)`` of the interrupt at node ``node_id``, or None when it has none."""
        for node, state, sequence in self.interrupts:
            if node == node_id:
                return state, sequence
        return None


class RunState(FrozenValue):
    """Admission state of one run. Build with ``RunState.initial(run_id)``."""

    __slots__ = ("run_id", "next_sequence", "surfaces", "correlations", "v1_surface", "lifecycle")
    _fields: ClassVar[tuple[str, ...]] = (
        "run_id",
        "next_sequence",
        "surfaces",
        "correlations",
        "v1_surface",
        "lifecycle",
    )

    def __init__(
        self,
        run_id: str,
        next_sequence: int = 0,
        surfaces: PMap[str, SurfaceState] = EMPTY,
        correlations: PMap[str, Correlation] = EMPTY,
        v1_surface: V1Surface | None = None,
        lifecycle: Lifecycle | None = None,
    ) -> None:
        self.run_id: Final = run_id
        self.next_sequence: Final = next_sequence
        self.surfaces: Final = surfaces
        self.correlations: Final = correlations
        self.v1_surface: Final = v1_surface
        self.lifecycle: Final[Lifecycle] = _NO_LIFECYCLE if lifecycle is None else lifecycle

    @classmethod
    def initial(cls, run_id: str) -> RunState:
        """The state of a run with an empty log."""
        return initial_state(run_id)

    def surface_status(self, surface_id: str) -> FoldStatus:
        """The fold status of surface ``surface_id`` (``absent``: the state holds none)."""
        found = self.surfaces.get(surface_id)
        return "absent" if found is None else found.status

    def tainted_surfaces_for_node(self, node_id: str) -> tuple[str, ...]:
        """§7: surfaces bound to ``node_id`` (any recorded envelope with that nodeId, deleted
        surfaces included, as openwop-app does) that are tainted, whoever tainted them. A
        non-empty answer means an approval at that node MUST NOT advance
        (``untrusted_content_blocks_approval``)."""
        found = sorted(
            sid for sid, s in self.surfaces.items() if s.tainted and node_id in s.node_ids
        )
        v1 = self.v1_surface
        if v1 is not None and v1.tainted and node_id in v1.node_ids:
            found.append("v1")
        return tuple(found)


_NO_LIFECYCLE: Final = Lifecycle()


# --- a JSON form, for a state table (the log stays the source of truth) -----------------------


def _rec(r: Recorded | None) -> list[Any] | None:
    return None if r is None else [r.sequence, r.event_id]


def _unrec(value: Any) -> Recorded | None:
    return None if value is None else _unrec_required(value)


def _unrec_required(value: Any) -> Recorded:
    return Recorded(int(value[0]), str(value[1]))


def dump(state: RunState) -> dict[str, Any]:
    """A JSON-ready form of ``state`` (``load`` inverts it)."""
    v1 = state.v1_surface
    return {
        "runId": state.run_id,
        "nextSequence": state.next_sequence,
        "surfaces": {
            sid: {
                "status": s.status,
                "tainted": s.tainted,
                "nodeIds": sorted(s.node_ids),
                "partial": s.partial,
                "last": _rec(s.last),
                "children": {cid: list(kids) for cid, kids in s.children.items()},
            }
            for sid, s in state.surfaces.items()
        },
        "correlations": {
            cid: {
                "type": c.type,
                "last": _rec(c.last),
                "complete": c.complete,
                "chunks": sorted([i, r.sequence, r.event_id] for i, r in c.chunks.items()),
            }
            for cid, c in state.correlations.items()
        },
        "v1Surface": None
        if v1 is None
        else {"last": _rec(v1.last), "tainted": v1.tainted, "nodeIds": sorted(v1.node_ids)},
        "lifecycle": {
            "status": state.lifecycle.status,
            "interrupts": [list(i) for i in state.lifecycle.interrupts],
            "lineage": list(state.lifecycle.lineage),
        },
    }


def load(obj: dict[str, Any]) -> RunState:
    """The ``RunState`` that ``dump`` wrote (a ``KeyError``/``TypeError`` means a corrupt table
    entry: the operator should rebuild it from the run log)."""
    surfaces = PMap(
        {
            sid: SurfaceState(
                s["status"],
                bool(s["tainted"]),
                frozenset(s["nodeIds"]),
                bool(s["partial"]),
                _unrec(s["last"]),
                {str(c): tuple(map(str, k)) for c, k in s.get("children", {}).items()},
            )
            for sid, s in obj["surfaces"].items()
        }
    )
    correlations = PMap(
        {
            cid: Correlation(
                c["type"],
                _unrec_required(c["last"]),
                bool(c["complete"]),
                PMap({int(i): Recorded(int(q), str(e)) for i, q, e in c["chunks"]}),
            )
            for cid, c in obj["correlations"].items()
        }
    )
    v1 = obj.get("v1Surface")
    life = obj.get("lifecycle") or {}
    lifecycle = Lifecycle(
        str(life.get("status", "running")),
        tuple((str(n), str(st), int(q)) for n, st, q in life.get("interrupts", ())),
        tuple(str(r) for r in life.get("lineage", ())),
    )
    return RunState(
        run_id=obj["runId"],
        next_sequence=int(obj["nextSequence"]),
        surfaces=surfaces,
        correlations=correlations,
        v1_surface=None
        if v1 is None
        else V1Surface(_unrec_required(v1["last"]), bool(v1["tainted"]), frozenset(v1["nodeIds"])),
        lifecycle=lifecycle,
    )


def initial_state(run_id: str) -> RunState:
    """``RunState.initial(run_id)`` as a plain function (compiled, a call to it is a native
    call; every fresh run's first decision makes one)."""
    return RunState(run_id)
