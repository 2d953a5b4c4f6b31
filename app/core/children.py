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

May import: the standard library and app.core.pmap / app.core.refusal (pure).
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any, Final

from app.core.pmap import PMap
from app.core.refusal import Violation

__all__ = [
    "Graph",
    "NO_CHILDREN",
    "cycle_refusal",
    "fold_children",
    "locate_component",
    "touches_graph",
]

# parent component id -> the ids it references (``children``, or ``(child,)``)
Graph = PMap[str, tuple[str, ...]]
NO_CHILDREN: Final[Graph] = PMap()
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
    from ``app.core.fold.kinds_of``), starting from ``graph``, and the first cycle, if any
    (``check=False``: replay, which never re-validates a recorded event)."""
    changed: dict[str, tuple[str, ...]] = {}
    start = 0
    for index, kind in enumerate(kinds):
        if kind == "updateComponents":
            for component in messages[index][kind]["components"]:
                cid = component["id"]
                if "children" in component:
                    changed[cid] = tuple(component["children"])
                elif "child" in component:
                    changed[cid] = (component["child"],)
                elif cid in changed or cid in graph:  # a parent replaced by a leaf
                    changed[cid] = _LEAF
        elif kind == "createSurface" or kind == "deleteSurface":
            if changed:
                graph = graph.update(changed)
                if check:
                    found = _cycle(graph, changed, messages, start, index)
                    if found is not None:
                        return graph, found
            graph, changed, start = NO_CHILDREN, {}, index
    if changed:
        graph = graph.update(changed)
        if check:
            return graph, _cycle(graph, changed, messages, start, len(kinds))
    return graph, None


def _cycle(
    graph: Graph, changed: dict[str, tuple[str, ...]], messages: list[Any], start: int, end: int
) -> Violation | None:
    """The first cycle through a changed component, found by one iterative depth-first walk
    (``graph`` was acyclic before ``changed`` was set in it)."""
    get = graph.get
    # screen: a cycle through u needs a child of u that is itself a parent
    if all(not get(child) for kids in changed.values() for child in kids):
        return None
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in changed:
        if root in state:
            continue
        path: list[str] = [root]
        state[root] = 1
        iterators = [iter(get(root) or _LEAF)]
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
                kids = get(child)
                if kids:
                    state[child] = 1
                    path.append(child)
                    iterators.append(iter(kids))
                else:
                    state[child] = 2
    return None


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
    return Violation(
        "envelope_invalid",
        "children-cycle",
        path,
        f"component {parent[:80]!r} {what}"
        + (" (the cycle runs through components of earlier envelopes)" if across else "")
        + ": the children graph must be a tree (a renderer walking a cycle never stops)",
        {
            "rule": "children-cycle",
            "componentId": parent,
            "childId": child,
            "cycle": [node[:128] for node in cycle[:64]],
        },
    )
