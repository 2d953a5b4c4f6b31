"""A v2 surface's children graph across the run's log, and the rule that it stays acyclic.

Role: pure. A renderer walks a surface's components from ``root`` through ``children`` (Row,
Column) and ``child`` (Button, Card) references; a cycle (``root.children = ["root"]``, or
``root -> a -> root``) makes an unguarded walk spin forever (issue 14 item 3: it froze the
viewer's tab). One envelope cannot show a cycle that a later one closes (``root -> a`` now,
``a -> root`` later), so the run state keeps each surface's graph, parent id -> child ids, and
every envelope that changes it is checked against the graph the fold would hold after it:
``envelope_invalid``, rule ``children-cycle``, at the ``children`` entry or ``child`` of this
envelope that closes the cycle.

Semantics follow the fold (a2ui-v09.md §5; web_core): a component replaces the one with the
same id (the last one in an envelope wins), ``createSurface`` starts a surface with no
components and ``deleteSurface`` drops them. Each stretch of messages between such boundaries
is checked when it ends. A child id that is no parent (a leaf, or not sent yet) ends a path.

The check is complete because the graph before the envelope was acyclic: any cycle now passes
through a component this envelope set, so one depth-first walk from those components finds it,
visiting each reachable component once (the graph is only walked when some changed component
has a child that is itself a parent).

May import: the standard library and app.core.runlog.pmap / app.core.admission.refusal /
app.core.admission.rules (pure).
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from types import MappingProxyType
from typing import Any, Final

from app.core.admission.refusal import Violation
from app.core.admission.rules import CHILDREN_CYCLE, refuse

__all__ = [
    "Graph",
    "NO_CHILDREN",
    "cycle_refusal",
    "fold_children",
    "locate_component",
    "touches_graph",
]

# parent component id -> the ids it references (``children``, or ``(child,)``). A plain dict,
# never changed once built: an envelope that changes the graph builds a new one (a C-level
# copy, about 0.3 µs per 100 parents, where a persistent map's bulk build measured 60 µs for
# 129); the state of the run before keeps the old one.
Graph = Mapping[str, tuple[str, ...]]
NO_CHILDREN: Final[Graph] = MappingProxyType({})
_LEAF: Final[tuple[str, ...]] = ()
_MESSAGES: Final = "/envelope/payload/messages"
_GRAPH_KINDS: Final = frozenset({"updateComponents", "createSurface", "deleteSurface"})


def touches_graph(kinds: tuple[str, ...]) -> bool:
    """Whether messages of these kinds can change a surface's children graph."""
    return not _GRAPH_KINDS.isdisjoint(kinds)


def fold_children(
    graph: Graph, messages: list[Any], kinds: tuple[str, ...], *, check: bool = True
) -> tuple[Graph, Violation | None]:
    """The surface's graph after ``messages`` (a v2 payload that passed its branch; ``kinds``
    from ``app.core.admission.fold.kinds_of``), starting from ``graph``, and the first cycle, if any
    (``check=False``: replay, which never re-validates a recorded event)."""
    changed: dict[str, tuple[str, ...]] = {}
    start = 0
    fresh = len(graph) == 0  # nothing before this stretch: every parent is in ``changed``
    for index, kind in enumerate(kinds):
        if kind == "updateComponents":
            # (typed as the branch schema guarantees: compiled, a dict[str, Any] lookup is a
            # direct dict call, an Any one a generic operation)
            components: list[dict[str, Any]] = messages[index][kind]["components"]
            for component in components:
                if "children" in component:
                    changed[component["id"]] = tuple(component["children"])
                elif "child" in component:
                    changed[component["id"]] = (component["child"],)
                else:
                    cid: str = component["id"]
                    if cid in changed or (not fresh and cid in graph):  # a parent made a leaf
                        changed[cid] = _LEAF
        elif kind == "createSurface" or kind == "deleteSurface":
            if changed:
                found = _cycle(graph, changed, fresh, messages, start, index) if check else None
                if found is not None:
                    return _updated(graph, changed, fresh), found
            graph, changed, start, fresh = NO_CHILDREN, {}, index, True
    if not changed:
        return graph, None
    found = _cycle(graph, changed, fresh, messages, start, len(kinds)) if check else None
    return _updated(graph, changed, fresh), found


def _updated(graph: Graph, changed: dict[str, tuple[str, ...]], fresh: bool) -> Graph:
    if fresh:
        return changed  # built here, handed over: nobody changes it again
    merged = dict(graph)
    merged.update(changed)
    return merged


def _cycle(
    base: Graph,
    changed: dict[str, tuple[str, ...]],
    fresh: bool,
    messages: list[Any],
    start: int,
    end: int,
) -> Violation | None:
    """The first cycle through a changed component of ``base`` updated with ``changed``,
    found by one iterative depth-first walk (``base`` was acyclic)."""
    if fresh:
        # The whole graph is ``changed``. Only INNER components (parents that are children
        # too) can lie on a cycle; when none has an inner child there is none, which C-speed
        # set operations tell for the usual layout (a root, rows and buttons of leaves).
        inner = set().union(*changed.values()).intersection(changed)
        if all(inner.isdisjoint(changed[node]) for node in inner):
            return None
    elif all(not _kids(base, changed, c) for kids in changed.values() for c in kids):
        return None  # a cycle through u needs a child of u that is itself a parent
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in changed:
        if root in state:
            continue
        path: list[str] = [root]
        state[root] = 1
        iterators = [iter(changed[root])]
        while iterators:
            child = next(iterators[-1], None)
            if child is None:
                state[path.pop()] = 2
                iterators.pop()
                continue
            seen = state.get(child, 0)
            if seen == 1:
                return cycle_refusal(path[path.index(child) :], changed, messages, start, end)
            if seen == 0:
                kids = changed.get(child) if fresh else _kids(base, changed, child)
                if kids:
                    state[child] = 1
                    path.append(child)
                    iterators.append(iter(kids))
                else:
                    state[child] = 2
    return None


def _kids(base: Graph, changed: dict[str, tuple[str, ...]], node: str) -> tuple[str, ...] | None:
    """``node``'s children in ``base`` updated with ``changed``."""
    kids = changed.get(node)
    return base.get(node) if kids is None else kids


def locate_component(node: str, messages: list[Any], start: int, end: int) -> tuple[int, int, Any]:
    """(message index, component index, component) of the LAST component ``node`` among
    ``messages[start:end]`` (the one the fold keeps). Refusal path only."""
    for index in range(end - 1, start - 1, -1):
        body = messages[index].get("updateComponents")
        if not isinstance(body, dict):
            continue
        components = body["components"]
        for position in range(len(components) - 1, -1, -1):
            if components[position].get("id") == node:
                return index, position, components[position]
    return start, 0, {}  # unreachable for a component this envelope set


def cycle_refusal(
    cycle: list[str], changed: Container[str], messages: list[Any], start: int, end: int
) -> Violation:
    """The refusal of ``cycle`` (each component's child is the next, the last's the first),
    at an edge that ``messages[start:end]`` set: the last component on it in ``changed``."""
    # (none only if the log already held a cycle, which an older host may have recorded)
    at = max((i for i, node in enumerate(cycle) if node in changed), default=len(cycle) - 1)
    parent, child = cycle[at], cycle[(at + 1) % len(cycle)]
    index, position, component = locate_component(parent, messages, start, end)
    path = f"{_MESSAGES}/{index}/updateComponents/components/{position}"
    if not component:
        path = f"{_MESSAGES}/{start}"
    elif "children" in component:
        path += f"/children/{list(component['children']).index(child)}"
    else:
        path += "/child"
    if child == parent:
        what = "is its own child"
    else:
        what = f"has child {child[:80]!r}, which is also its ancestor"
    across = any(node not in changed for node in cycle)
    return refuse(
        CHILDREN_CYCLE,
        path,
        f"component {parent[:80]!r} {what}"
        + (" (the cycle runs through components of earlier envelopes)" if across else "")
        + ": the children graph must be a tree (a renderer walking a cycle never stops)",
        {
            "rule": CHILDREN_CYCLE.id,
            "componentId": parent,
            "childId": child,
            "cycle": [node[:128] for node in cycle[:64]],
        },
    )
