"""Materialization (app.core.projection.surfaces): the v2 fold (a2ui-v09.md §5/§8, web_core parity),
the data-model table, v1 identity, taint, partial, delete and re-create, idempotent replay, and the
fold run on events the admission decision really produced."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.admission.policy import SURFACE_KIND, HostPolicy
from app.core.projection.surfaces import (
    V1_SURFACE_ID,
    Projection,
    SurfaceKey,
    parse_data_path,
    project,
    replay,
)
from app.core.runlog.events import RecordedEvent
from tests.core import admission_support as adm
from tests.core.projection_support import (
    BASIC,
    FULL_SURFACE_V0,
    RUN,
    column,
    components,
    create,
    data,
    delete,
    event,
    text,
    v2,
)

KEY = SurfaceKey(RUN, "s")


def fold(*bodies: Any, **kwargs: Any) -> Projection:
    return replay(event(i, b, **kwargs) for i, b in enumerate(bodies))


def test_surfaces_create_starts_empty() -> None:
    state = fold(v2("s", create("s", theme={"primaryColor": "#000000"})))
    surface = state.surfaces[KEY]
    assert surface.content == {
        "surfaceId": "s",
        "catalogId": BASIC,
        "theme": {"primaryColor": "#000000"},
        "components": {},
        "dataModel": {},
    }
    assert surface.version == 2 and surface.catalog == BASIC
    assert not surface.renderable and surface.actions_enabled and not surface.deleted
    assert (
        surface.sequence == 0 and surface.surface_ref == f"evt-{RUN.replace('/', '-')}-000000000000"
    )


def test_surfaces_update_components_upserts_wholesale() -> None:
    state = fold(
        v2("s", create("s"), components("s", column("root", "h"), {**text("h"), "variant": "h2"})),
        v2("s", components("s", text("h", "new"), text("h2"))),
    )
    comps = state.surfaces[KEY].content["components"]
    assert comps["h"] == {"id": "h", "component": "Text", "text": "new"}  # variant is gone
    assert list(comps) == ["root", "h", "h2"]
    assert state.surfaces[KEY].renderable


def test_surfaces_last_duplicate_in_a_message_wins() -> None:
    state = fold(v2("s", create("s"), components("s", text("a", "1"), text("a", "2"))))
    assert state.surfaces[KEY].content["components"] == {"a": text("a", "2")}


# a2ui-v09.md §5 updateDataModel table (web_core parity) and our decisions where web_core throws.
DATA_MODEL: list[tuple[str, Any, dict[str, Any], Any, bool]] = [
    # (case, model before, updateDataModel body, model after, projection_warning?)
    ("root absent path, value object", {"x": 1}, {"value": {"name": ""}}, {"name": ""}, False),
    ("root '/' path, string value", {"x": 1}, {"path": "/", "value": "s"}, "s", False),
    ("root '' path, array value", {}, {"path": "", "value": [1]}, [1], False),
    ("root absent, value absent resets to {}", {"x": 1}, {}, {}, False),
    ("nested set creates {}", {}, {"path": "/a/b", "value": 1}, {"a": {"b": 1}}, False),
    ("digits create []", {}, {"path": "/a/0", "value": "x"}, {"a": ["x"]}, False),
    (
        "null intermediate replaced",
        {"a": None},
        {"path": "/a/b", "value": 1},
        {"a": {"b": 1}},
        False,
    ),
    ("value null is stored", {"a": 1}, {"path": "/a", "value": None}, {"a": None}, False),
    ("set replaces", {"a": {"b": 1}}, {"path": "/a", "value": 2}, {"a": 2}, False),
    ("remove an object key", {"a": 1, "b": 2}, {"path": "/a"}, {"b": 2}, False),
    (
        "remove an array element keeps length",
        {"a": [1, 2]},
        {"path": "/a/0"},
        {"a": [None, 2]},
        False,
    ),
    ("remove a missing path is a no-op", {"a": 1}, {"path": "/x/y"}, {"a": 1}, False),
    ("remove past the end is a no-op", {"a": [1]}, {"path": "/a/5"}, {"a": [1]}, False),
    ("set array index", {"a": [1, 2]}, {"path": "/a/1", "value": 9}, {"a": [1, 9]}, False),
    ("append at length", {"a": [1]}, {"path": "/a/1", "value": 2}, {"a": [1, 2]}, False),
    (
        "past the end pads with null",
        {"a": [1]},
        {"path": "/a/3", "value": 4},
        {"a": [1, None, None, 4]},
        False,
    ),
    ("RFC 6901 ~1 is a slash", {}, {"path": "/a~1b", "value": 1}, {"a/b": 1}, False),
    ("RFC 6901 ~0 is a tilde", {}, {"path": "/m~0n/~01", "value": 1}, {"m~n": {"~1": 1}}, False),
    ("primitive in the way", {"a": "s"}, {"path": "/a/b", "value": 1}, {"a": "s"}, True),
    ("primitive in the way (remove)", {"a": 3}, {"path": "/a/b"}, {"a": 3}, True),
    ("non-numeric segment on an array", {"a": [1]}, {"path": "/a/x", "value": 1}, {"a": [1]}, True),
    ("'-' on an array", {"a": [1]}, {"path": "/a/-", "value": 1}, {"a": [1]}, True),
    ("index far past the end", {"a": []}, {"path": "/a/99999999", "value": 1}, {"a": []}, True),
    ("set under a root string", "s", {"path": "/a", "value": 1}, "s", True),
]


@pytest.mark.parametrize(
    ("case", "before", "body", "after", "warned"), DATA_MODEL, ids=[c[0] for c in DATA_MODEL]
)
def test_surfaces_data_model_table(
    case: str, before: Any, body: dict[str, Any], after: Any, warned: bool
) -> None:
    state = fold(v2("s", create("s"), data("s", value=before)))
    old_model = state.surfaces[KEY].content["dataModel"]
    state, changes = project(state, event(1, v2("s", data("s", **body))))
    (change,) = changes
    assert change.new.content["dataModel"] == after
    assert bool(change.warnings) == warned
    if warned:
        assert "unchanged" in change.warnings[0]
    assert old_model == before  # the previous state is never mutated


def test_surfaces_data_model_updates_share_untouched_subtrees() -> None:
    big = {"keep": {"deep": [1, 2, 3]}, "edit": {"x": 1}}
    state = fold(v2("s", create("s"), data("s", value=big)))
    _, (change,) = project(state, event(1, v2("s", data("s", path="/edit/x", value=2))))
    assert change.new is not None and change.old is not None
    assert change.new.content["dataModel"]["keep"] is change.old.content["dataModel"]["keep"]
    assert change.old.content["dataModel"]["edit"] == {"x": 1}


def test_surfaces_parse_data_path() -> None:
    assert parse_data_path(None) == parse_data_path("/") == parse_data_path("") == []
    assert parse_data_path("/a//b") == ["a", "", "b"]
    assert parse_data_path("/a~1b/c~0") == ["a/b", "c~"]


def test_surfaces_delete_and_recreate() -> None:
    state = fold(
        v2("s", create("s"), components("s", column("root")), data("s", value={"a": 1})),
        v2("s", delete("s")),
    )
    gone = state.surfaces[KEY]
    assert gone.deleted and not gone.renderable and not gone.actions_enabled
    assert gone.content["components"] == {} and gone.content["dataModel"] == {}
    state, (change,) = project(state, event(2, v2("s", create("s"), components("s", text("t")))))
    assert not change.new.deleted
    assert change.new.content["components"] == {"t": text("t")}
    assert change.new.content["dataModel"] == {}


def test_surfaces_taint_is_sticky_across_updates_and_recreate() -> None:
    state = fold(v2("s", create("s"), components("s", column("root"))))
    state, (c1,) = project(state, event(1, v2("s", components("s", text("a"))), trust="untrusted"))
    state, (c2,) = project(state, event(2, v2("s", components("s", text("b")))))
    state, _ = project(state, event(3, v2("s", delete("s"))))
    state, (c4,) = project(state, event(4, v2("s", create("s"))))
    assert c1.new.trust == c2.new.trust == c4.new.trust == "untrusted"
    assert not c2.new.actions_enabled


def test_surfaces_partial_disables_actions_until_final() -> None:
    state = fold(v2("s", create("s"), components("s", column("root"))))
    chunk = {"isPartial": True, "index": 0, "total": 2}
    state, (c1,) = project(state, event(1, v2("s", components("s", text("a"))), partial=chunk))
    assert c1.new.partial and not c1.new.actions_enabled
    final = {"isPartial": False, "index": 1, "total": 2}
    state, (c2,) = project(state, event(2, v2("s", components("s", text("b"))), partial=final))
    assert not c2.new.partial and c2.new.actions_enabled


def test_surfaces_messages_on_a_surface_that_is_not_live_warn_and_never_raise() -> None:
    state, (change,) = project(Projection(), event(0, v2("s", components("s", text("a")))))
    assert change.warnings and change.new.content["components"] == {}
    state, (change,) = project(state, event(1, v2("s", create("s"), create("s"), {"x": 1})))
    assert len(change.warnings) == 2


def test_surfaces_v1_is_the_last_full_payload() -> None:
    later = {
        "catalogVersion": "0.9.1",
        "surface": {"components": [{"component": "text", "text": "x"}]},
    }
    state, (c0,) = project(Projection(), event(0, FULL_SURFACE_V0, trust="untrusted"))
    assert c0.key == SurfaceKey(RUN, V1_SURFACE_ID) and c0.old is None
    assert c0.new.content is FULL_SURFACE_V0 and c0.new.catalog == "0.9.1"
    assert c0.new.renderable and c0.new.version == 1
    state, (c1,) = project(state, event(1, later))
    assert c1.old == c0.new and c1.new.content is later
    assert c1.new.surface_ref == event(1, later)["eventId"]
    assert c1.new.trust == "untrusted"  # sticky for the run's v1 surface too


def test_surfaces_universal_kinds_and_redelivered_events_change_nothing() -> None:
    state = fold(v2("s", create("s")))
    same, changes = project(state, event(1, {"question": "?"}, kind="clarification.request"))
    assert changes == () and same.surfaces == state.surfaces and same.heads[RUN] == 2
    again, changes = project(same, event(0, v2("s", create("s"))))
    assert changes == () and again == same


def test_surfaces_replay_equals_live_on_admitted_events() -> None:
    host = adm.Host()
    sid = "approve-brief"
    for env in (
        adm.envelope(adm.POSITIVE),
        adm.envelope(adm.v2(sid, adm.data_msg(sid, path="/name", value="Ada")), trust="untrusted"),
        adm.envelope(adm.v2(sid, adm.delete_msg(sid))),
        adm.envelope(adm.v2(sid, adm.create_msg(sid), adm.components_msg(sid))),
    ):
        assert type(host.emit(env)).__name__ != "Refused"
    v1_host = adm.Host(HostPolicy(schema_versions={SURFACE_KIND: 1}))
    assert type(v1_host.emit(adm.envelope(adm.V1_SURFACE, schema_version=1))).__name__ == "Admitted"
    log: list[RecordedEvent] = host.logs[adm.RUN] + [
        {**ev, "sequence": ev["sequence"] + 5} for ev in v1_host.logs[adm.RUN]
    ]
    live = Projection()
    for ev in log:
        live, _ = project(live, ev)
    assert replay(log) == live
    surface = live.surfaces[SurfaceKey(adm.RUN, sid)]
    assert surface.trust == "untrusted" and surface.renderable and not surface.actions_enabled
    assert surface.content["dataModel"] == {}
    assert len(live.surfaces_of(adm.RUN)) == 2


def test_surfaces_data_model_never_nests_deeper_than_a_frame_can_encode() -> None:
    deep: Any = 1
    for _ in range(200):
        deep = {"d": deep}
    path = "/" + "/".join(["p"] * 100)
    state = fold(v2("s", create("s")))
    _, (change,) = project(state, event(1, v2("s", data("s", path=path, value=deep))))
    assert change.warnings and change.new.content["dataModel"] == {}
    shallow = {"d": 1}
    _, (change,) = project(state, event(1, v2("s", data("s", path=path, value=shallow))))
    assert not change.warnings
