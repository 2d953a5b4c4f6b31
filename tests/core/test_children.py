"""The children graph across a surface's envelopes (app/core/admission/children.py): cycles refused
with the pointer of the edge that closes them, against a plain reference (a whole-graph walk)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.admission.children import NO_CHILDREN, Graph, fold_children
from app.core.admission.fold import kinds_of

M = "/envelope/payload/messages"


def col(cid: str, *children: str) -> dict[str, Any]:
    return {"id": cid, "component": "Column", "children": list(children)}


def card(cid: str, child: str) -> dict[str, Any]:
    return {"id": cid, "component": "Card", "child": child}


def text(cid: str) -> dict[str, Any]:
    return {"id": cid, "component": "Text", "text": cid}


def update(*components: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": "v0.9",
        "updateComponents": {"surfaceId": "s", "components": list(components)},
    }


CREATE = {"version": "v0.9", "createSurface": {"surfaceId": "s", "catalogId": "c"}}
DELETE = {"version": "v0.9", "deleteSurface": {"surfaceId": "s"}}
DATA = {"version": "v0.9", "updateDataModel": {"surfaceId": "s", "value": {}}}


def run(graph: Graph, *messages: dict[str, Any]) -> tuple[Graph, Any]:
    return fold_children(graph, list(messages), kinds_of(list(messages)))


def built(*messages: dict[str, Any]) -> Graph:
    graph, violation = run(NO_CHILDREN, *messages)
    assert violation is None
    return graph


TREE = built(CREATE, update(col("root", "a", "b"), card("a", "t"), text("t"), text("b")))


@pytest.mark.parametrize(
    ("base", "messages", "path"),
    [
        (
            NO_CHILDREN,
            [update(col("root", "x", "root"))],
            f"{M}/0/updateComponents/components/0/children/1",
        ),
        (
            NO_CHILDREN,
            [update(col("root", "a"), card("a", "root"))],
            f"{M}/0/updateComponents/components/1/child",
        ),
        # closed by a later envelope: a -> root over root -> a
        (TREE, [update(card("a", "root"))], f"{M}/0/updateComponents/components/0/child"),
        # a leaf of the tree becomes a parent that points back up
        (TREE, [update(card("t", "root"))], f"{M}/0/updateComponents/components/0/child"),
        # two components of this envelope close it together, in two messages
        (
            TREE,
            [update(col("b", "c")), DATA, update(card("c", "root"))],
            f"{M}/2/updateComponents/components/0/child",
        ),
        # the last duplicate in an envelope is the one the fold keeps
        (
            TREE,
            [update(card("a", "t"), card("a", "root"))],
            f"{M}/0/updateComponents/components/1/child",
        ),
    ],
    ids=[
        "own-child",
        "two-cycle",
        "across-envelopes",
        "leaf-turned-parent",
        "two-messages",
        "last-duplicate",
    ],
)
def test_a_cycle_is_refused_at_the_edge_this_envelope_set(
    base: Graph, messages: list[dict[str, Any]], path: str
) -> None:
    _, violation = run(base, *messages)
    assert violation is not None
    assert (violation.code, violation.rule, violation.path) == (
        "envelope_invalid",
        "children-cycle",
        path,
    )


@pytest.mark.parametrize(
    "messages",
    [
        [update(card("a", "t"))],  # the same tree again
        [update(col("root", "a", "b", "a"))],  # a shared child (a DAG) is not a cycle
        [update(col("b", "t"))],  # b now shares t with a
        [update(text("a")), update(card("t", "a"))],  # a parent replaced by a leaf first
        [DELETE, CREATE, update(card("a", "root"))],  # a new surface: the old graph is gone
        [update(card("a", "missing"))],  # a dangling child ends the path
        [DATA],
    ],
    ids=["same", "dag", "shared-child", "leaf-first", "recreated", "dangling", "data-only"],
)
def test_what_is_not_a_cycle_is_admitted(messages: list[dict[str, Any]]) -> None:
    _, violation = run(TREE, *messages)
    assert violation is None


def test_delete_and_create_reset_the_graph() -> None:
    graph = built(DELETE)
    assert len(graph) == 0
    again, _ = run(TREE, DELETE, CREATE, update(card("x", "y")))
    assert dict(again.items()) == {"x": ("y",)}


# --- the law: against a whole-graph reference ----------------------------------------------------

IDS = ["root", "a", "b", "c", "d"]


def _has_cycle(edges: dict[str, tuple[str, ...]]) -> bool:
    """The reference: a cycle anywhere in the graph, by repeatedly removing sinks."""
    pending = {node: set(kids) & set(edges) for node, kids in edges.items() if kids}
    while pending:
        sinks = [n for n, kids in pending.items() if not (kids & pending.keys())]
        if not sinks:
            return True
        for n in sinks:
            del pending[n]
    return False


COMPONENT = st.sampled_from(IDS).flatmap(
    lambda cid: st.one_of(
        st.just(text(cid)),
        st.sampled_from(IDS).map(lambda child: card(cid, child)),
        st.lists(st.sampled_from(IDS), max_size=3).map(lambda kids: col(cid, *kids)),
    )
)
MESSAGE = st.one_of(
    st.lists(COMPONENT, min_size=1, max_size=4).map(lambda cs: update(*cs)),
    st.just(DATA),
    st.just(DELETE),
    st.just(CREATE),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(MESSAGE, min_size=1, max_size=4), min_size=1, max_size=8))
def test_refused_exactly_when_the_graph_after_a_stretch_has_a_cycle(
    envelopes: list[list[dict[str, Any]]],
) -> None:
    graph: Graph = NO_CHILDREN
    model: dict[str, tuple[str, ...]] = {}
    for messages in envelopes:
        trial = dict(model)
        cyclic = False
        dirty = False
        for message in messages:
            body = message.get("updateComponents")
            if body is not None:
                for component in body["components"]:
                    if "children" in component:
                        trial[component["id"]] = tuple(component["children"])
                    elif "child" in component:
                        trial[component["id"]] = (component["child"],)
                    else:
                        trial[component["id"]] = ()
                dirty = True
            elif "createSurface" in message or "deleteSurface" in message:
                cyclic = cyclic or (dirty and _has_cycle(trial))
                trial, dirty = {}, False
        cyclic = cyclic or (dirty and _has_cycle(trial))
        after, violation = run(graph, *messages)
        assert (violation is not None) == cyclic, (model, messages)
        if violation is None:
            assert {k: v for k, v in after.items() if v} == {k: v for k, v in trial.items() if v}
            graph, model = after, trial
