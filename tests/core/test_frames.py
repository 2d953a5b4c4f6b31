"""Frame planning (app.core.projection.frames, frames_wire): the full/delta rules of issue 5 §3 in
order, the shared delta, RFC 0114's frame inside ours, SR-1 on patch values, taint on every frame,
resync."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from app.core.admission.redaction import prepare as prepare_secrets
from app.core.projection import frames
from app.core.projection.frames import (
    MAX_RESYNCS,
    Recipient,
    answer_resync,
    catch_up,
    on_resync,
    plan_frames,
    prepare,
)
from app.core.projection.frames_wire import (
    DIGEST_PATTERN,
    encode_frame,
    full_frame,
    rfc0114_frame,
    surface_digest,
)
from app.core.projection.patch_equal import json_equal
from app.core.projection.surfaces import Projection, SurfaceChange, project
from app.shell.schema_files import load_schema_documents
from tests.core.projection_support import (
    FULL_SURFACE_V0,
    column,
    components,
    create,
    data,
    delete,
    event,
    text,
    v2,
)

UPSTREAM_FRAME = (
    Path(__file__).resolve().parents[3]
    / "shared/upstream/openwop/schemas/a2ui-surface-delta-frame.schema.json"
)
FRAME_SCHEMA = Draft202012Validator(load_schema_documents()["projection-frame"])
MATERIALIZED_SCHEMA = Draft202012Validator(load_schema_documents()["materialized-surface"])
FULL = Recipient("full-sub", delta=False)
DELTA = Recipient("delta-sub", delta=True, full_every=3)


def v1_with(text_1: str, **extra: Any) -> dict[str, Any]:
    body = copy.deepcopy(FULL_SURFACE_V0)
    body["surface"]["components"][1]["text"] = text_1
    body.update(extra)
    return body


class Driver:
    """Projects events and plans frames for subscribers, keeping their cursors."""

    def __init__(self, *subs: Recipient, secrets: Any = ()) -> None:
        self.state = Projection()
        self.subs = subs
        self.cursors: dict[str, Any] = {}
        self.secrets = secrets
        self.seq = 0

    def emit(self, body: Any, **kwargs: Any) -> frames.Plan:
        self.state, (change,) = project(self.state, event(self.seq, body, **kwargs))
        self.seq += 1
        return self.plan_frames(change)

    def plan_frames(self, change: SurfaceChange) -> frames.Plan:
        result = plan_frames(
            change,
            [(s, self.cursors.get(s.subscriber_id)) for s in self.subs],
            secrets=self.secrets,
        )
        self.cursors.update(result.cursors)
        for send in result.sends:
            frame = orjson.loads(send.frame)
            assert FRAME_SCHEMA.is_valid(frame), send
            if frame["kind"] == "full" and frame["version"] == 2:
                assert MATERIALIZED_SCHEMA.is_valid(frame["surface"]), frame
        return result

    @staticmethod
    def frame(result: frames.Plan, sub: Recipient) -> tuple[str, str, dict[str, Any]]:
        (send,) = [s for s in result.sends if s.subscriber_id == sub.subscriber_id]
        return send.kind, send.reason, orjson.loads(send.frame)


def test_frames_first_frame_is_full_for_everyone() -> None:
    d = Driver(FULL, DELTA)
    result = d.emit(FULL_SURFACE_V0)
    kind, reason, frame = d.frame(result, FULL)
    assert (kind, reason) == ("full", "subscription")
    assert d.frame(result, DELTA)[:2] == ("full", "first")
    assert result.fallbacks == {"first": 1}
    assert frame["surface"] == FULL_SURFACE_V0 and frame["catalogVersion"] == "0.9.1"
    assert frame["surfaceId"] == "~v1" and frame["version"] == 1 and frame["sequence"] == 0
    assert frame["trust"] == "trusted" and frame["renderable"] and frame["actionsEnabled"]


def test_frames_v1_leaf_update_is_the_suite_delta() -> None:
    d = Driver(FULL, DELTA)
    first = d.emit(FULL_SURFACE_V0)
    result = d.emit(v1_with("Confirmed — see you then."))
    kind, reason, frame = d.frame(result, DELTA)
    assert (kind, reason) == ("delta", "delta")
    assert frame["patch"] == [
        {
            "op": "replace",
            "path": "/surface/components/1/text",
            "value": "Confirmed — see you then.",
        }
    ]
    assert frame["baseSequence"] == d.frame(first, FULL)[2]["sequence"] == 0
    assert frame["surfaceRef"] != d.frame(first, FULL)[2]["surfaceRef"] and frame["sequence"] == 1
    assert frame["catalogVersion"] == "0.9.1" and "renderable" not in frame
    if UPSTREAM_FRAME.is_file():
        upstream = Draft202012Validator(orjson.loads(UPSTREAM_FRAME.read_bytes()))
        assert upstream.is_valid(rfc0114_frame(frame))


def test_frames_delta_is_computed_once_and_shared() -> None:
    subs = [Recipient(f"d{i}", delta=True) for i in range(50)] + [
        Recipient(f"f{i}") for i in range(50)
    ]
    d = Driver(*subs)
    d.emit(FULL_SURFACE_V0)
    result = d.emit(v1_with("x"))
    deltas = {id(s.frame) for s in result.sends if s.kind == "delta"}
    fulls = {id(s.frame) for s in result.sends if s.kind == "full"}
    assert len(deltas) == 1 and len(fulls) == 1
    assert sum(s.kind == "delta" for s in result.sends) == 50


D, G = "delta", "digest"


@pytest.mark.parametrize(
    ("full_every", "reasons"),
    [
        (1, [G, G, G, G, G, G, G]),
        (3, [D, D, G, D, D, G, D]),
        (4, [D, D, D, G, D, D, D]),
        (100, [D, D, D, D, D, D, D]),
    ],
)
def test_frames_every_full_every_th_delta_carries_a_digest_not_a_full(
    full_every: int, reasons: list[str]
) -> None:
    """The periodic check: the ``full_every``-th delta in a row (the counter restarts after a
    check as after a full frame) is the same delta plus the digest of the surface after it;
    a subscriber in sync gets no full frame at all."""
    sub = Recipient("checked", delta=True, full_every=full_every)
    d = Driver(sub)
    d.emit(FULL_SURFACE_V0)
    got = []
    for i in range(7):
        result = d.emit(v1_with(f"t{i}"))
        kind, reason, frame = d.frame(result, sub)
        assert kind == "delta" and result.fallbacks == {}
        got.append(reason)
        surface = d.state.surfaces_of(frame["runId"])[0]
        if reason == G:
            assert frame["digest"] == surface_digest(surface.content)
            assert re.fullmatch(DIGEST_PATTERN, frame["digest"])
        else:
            assert "digest" not in frame
    assert got == reasons


def test_frames_digest_delta_is_computed_once_and_is_the_delta_plus_digest() -> None:
    checked = [Recipient(f"c{i}", delta=True, full_every=1) for i in range(20)]
    plain = [Recipient(f"p{i}", delta=True) for i in range(20)]
    d = Driver(*checked, *plain)
    d.emit(FULL_SURFACE_V0)
    result = d.emit(v1_with("x"))
    by_reason: dict[str, set[int]] = {}
    for send in result.sends:
        by_reason.setdefault(send.reason, set()).add(id(send.frame))
    assert {r: len(ids) for r, ids in by_reason.items()} == {"digest": 1, "delta": 1}
    _, _, with_digest = d.frame(result, checked[0])
    _, _, without = d.frame(result, plain[0])
    assert {k: v for k, v in with_digest.items() if k != "digest"} == without


def test_frames_digest_is_of_the_redacted_surface_the_subscriber_holds() -> None:
    secret = "sk-live-0123456789"
    secrets = prepare_secrets([("vault-1", secret)])
    sub = Recipient("checked", delta=True, full_every=1)
    d = Driver(sub, secrets=secrets)
    d.emit(FULL_SURFACE_V0)
    _, reason, frame = d.frame(d.emit(v1_with(f"token {secret}")), sub)
    assert reason == "digest"
    assert frame["digest"] == surface_digest(v1_with("token [REDACTED:vault-1]"))
    assert frame["digest"] != surface_digest(v1_with(f"token {secret}"))


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}, True),  # objects are unordered
        ([-0.0], [0.0], True),  # -0.0 equals 0.0 (json_equal; the diff sends no sign change)
        ({"x": {"y": [1.5, -0.0]}}, {"x": {"y": [1.5, 0.0]}}, True),
        (1, 1.0, False),  # different JSON values (orjson writes 1 and 1.0)
        (True, 1, False),
        (False, 0, False),
        (None, {}, False),
        ([1, 2], [2, 1], False),  # arrays are ordered
        ("-0.0", "0.0", False),  # strings are never normalized
        ({"a": -0.05}, {"a": 0.05}, False),
        ({"a/b": "~"}, {"a~1b": "~"}, False),
        ("é", "e\u0301", False),  # no Unicode normalization: code points as sent
    ],
)
def test_frames_surface_digest_is_json_equality(a: Any, b: Any, same: bool) -> None:
    assert json_equal(a, b) is same
    assert (surface_digest(a) == surface_digest(b)) is same
    for value in (a, b):  # deterministic through a frame's bytes (orjson round trip)
        assert surface_digest(orjson.loads(orjson.dumps(value))) == surface_digest(value)
        assert re.fullmatch(DIGEST_PATTERN, surface_digest(value))


def test_frames_surface_digest_does_not_touch_its_input() -> None:
    value = {"z": [-0.0, {"k": -0.0}], "a": 0.1}
    before = orjson.dumps(value)
    assert surface_digest(value) == surface_digest({"a": 0.1, "z": [0.0, {"k": 0.0}]})
    assert orjson.dumps(value) == before
    with pytest.raises(TypeError):
        surface_digest({"a": object()})


def test_frames_catalog_change_and_out_of_sync_send_full() -> None:
    d = Driver(DELTA)
    d.emit(FULL_SURFACE_V0)
    cursor = d.cursors[DELTA.subscriber_id]
    d.cursors[DELTA.subscriber_id] = cursor._replace(catalog="0.9.0")
    assert d.frame(d.emit(v1_with("a")), DELTA)[1] == "catalog"
    d.cursors[DELTA.subscriber_id] = d.cursors[DELTA.subscriber_id]._replace(sequence=99)
    assert d.frame(d.emit(v1_with("b")), DELTA)[1] == "not-in-sync"
    assert d.frame(d.emit(v1_with("c")), DELTA)[1] == "delta"


def test_frames_empty_change_sends_full() -> None:
    d = Driver(DELTA)
    d.emit(FULL_SURFACE_V0)
    assert d.frame(d.emit(copy.deepcopy(FULL_SURFACE_V0)), DELTA)[:2] == ("full", "empty")


def test_frames_unverified_delta_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    d = Driver(DELTA)
    d.emit(FULL_SURFACE_V0)
    monkeypatch.setattr(frames, "verified_diff", lambda old, new: None)
    result = d.emit(v1_with("x"))
    assert d.frame(result, DELTA)[:2] == ("full", "unverified")
    assert result.fallbacks == {"unverified": 1}


STATUS_MEMBERS = ("version", "trust", "partial", "actionsEnabled", "deleted", "renderable")


def test_frames_a_trust_change_is_a_full_frame_and_a_delta_never_carries_trust() -> None:
    d = Driver(FULL, DELTA)
    d.emit(FULL_SURFACE_V0)
    _, _, frame = d.frame(d.emit(v1_with("a")), DELTA)
    assert frame["kind"] == "delta" and not set(STATUS_MEMBERS) & set(frame)
    result = d.emit(v1_with("x"), trust="untrusted")
    for sub in (FULL, DELTA):
        kind, _, frame = d.frame(result, sub)
        assert kind == "full" and frame["trust"] == "untrusted" and not frame["actionsEnabled"]
    assert d.frame(result, DELTA)[1] == "trust" and result.fallbacks == {"trust": 1}
    assert d.cursors[DELTA.subscriber_id].trust == "untrusted"
    # taint is sticky: a trusted update is untrusted too, so it is a delta again, and the
    # delta says nothing about trust (the subscriber keeps its base's untrusted)
    kind, reason, frame = d.frame(d.emit(v1_with("y")), DELTA)
    assert (kind, reason) == ("delta", "delta") and not set(STATUS_MEMBERS) & set(frame)
    assert d.frame(d.emit(v1_with("z")), FULL)[2]["trust"] == "untrusted"


def test_frames_a_subscriber_cursor_with_other_status_gets_a_full_frame() -> None:
    d = Driver(DELTA)
    d.emit(FULL_SURFACE_V0)
    cursor = d.cursors[DELTA.subscriber_id]
    # whatever the subscriber holds, a status that differs from the new surface's is a full
    d.cursors[DELTA.subscriber_id] = cursor._replace(trust="untrusted")
    assert d.frame(d.emit(v1_with("a")), DELTA)[:2] == ("full", "trust")
    d.cursors[DELTA.subscriber_id] = d.cursors[DELTA.subscriber_id]._replace(partial=True)
    assert d.frame(d.emit(v1_with("b")), DELTA)[:2] == ("full", "partial")
    assert d.frame(d.emit(v1_with("c")), DELTA)[:2] == ("delta", "delta")


def test_frames_partial_changes_are_full_frames() -> None:
    d = Driver(FULL, DELTA)
    d.emit(FULL_SURFACE_V0)
    chunk = {"isPartial": True, "index": 0, "total": -1}
    kind, reason, frame = d.frame(d.emit(v1_with("a"), partial=chunk), DELTA)
    assert (kind, reason) == ("full", "partial") and frame["partial"]
    assert not frame["actionsEnabled"]
    # further chunks are deltas (still partial: the subscriber keeps its base's flag) ...
    assert d.frame(d.emit(v1_with("b"), partial=chunk), DELTA)[:2] == ("delta", "delta")
    # ... and the frame that finalizes the surface, enabling its actions, is a full frame
    kind, reason, frame = d.frame(d.emit(v1_with("c")), DELTA)
    assert (kind, reason) == ("full", "partial")
    assert not frame["partial"] and frame["actionsEnabled"]


def test_frames_deleted_surface_says_so() -> None:
    d = Driver(FULL, DELTA)
    d.emit(v2("s", create("s"), components("s", column("root", "t"), text("t"))))
    d.emit(v2("s", components("s", text("t", "two"))))
    result = d.emit(v2("s", delete("s")))
    for sub in (FULL, DELTA):
        kind, _, frame = d.frame(result, sub)
        assert kind == "full" and frame["deleted"] and not frame["renderable"]
        assert not frame["actionsEnabled"]
    assert d.frame(result, DELTA)[1] == "deleted"
    # a re-create after the deletion the subscriber holds is a full frame too (no delta can
    # undelete, nor enable actions)
    kind, reason, frame = d.frame(
        d.emit(v2("s", create("s"), components("s", column("root")))), DELTA
    )
    assert (kind, reason) == ("full", "deleted")
    assert not frame["deleted"] and frame["actionsEnabled"] and frame["renderable"]
    assert d.frame(d.emit(v2("s", components("s", text("t")))), DELTA)[0] == "delta"


def test_frames_v2_delta_paths_are_stable_under_upserts() -> None:
    d = Driver(DELTA)
    d.emit(v2("s", create("s"), components("s", column("root", "name"), text("name", "a"))))
    _, _, frame = d.frame(d.emit(v2("s", components("s", text("name", "b")))), DELTA)
    assert frame["patch"] == [{"op": "replace", "path": "/components/name/text", "value": "b"}]
    assert "catalogId" not in frame and "catalogVersion" not in frame
    _, _, frame = d.frame(d.emit(v2("s", data("s", path="/a~1b", value=None))), DELTA)
    assert frame["patch"] == [{"op": "add", "path": "/dataModel/a~1b", "value": None}]


def test_frames_sr1_walks_patch_values_and_full_content() -> None:
    secret = "sk-live-0123456789"
    secrets = prepare_secrets([("vault-1", secret)])
    d = Driver(FULL, DELTA, secrets=secrets)
    d.emit(FULL_SURFACE_V0)
    result = d.emit(v1_with(f"token {secret}"))
    for send in result.sends:
        assert secret.encode() not in send.frame
        assert b"[REDACTED:vault-1]" in send.frame
    assert d.frame(result, DELTA)[0] == "delta"
    d.secrets = prepare_secrets([("vault-1", secret), ("vault-2", "another-secret-1")])
    assert d.frame(d.emit(v1_with("z")), DELTA)[1] == "secrets"


def test_frames_resync_answers_one_full_then_full_only() -> None:
    d = Driver(DELTA)
    d.emit(FULL_SURFACE_V0)
    d.cursors[DELTA.subscriber_id] = on_resync(d.cursors[DELTA.subscriber_id])
    assert d.frame(d.emit(v1_with("a")), DELTA)[1] == "resync"
    assert d.frame(d.emit(v1_with("b")), DELTA)[1] == "delta"
    surface = d.state.surfaces_of(event(0, {})["runId"])[0]
    for _ in range(MAX_RESYNCS - 1):
        send, cursor = answer_resync(surface, DELTA, d.cursors[DELTA.subscriber_id])
        assert (send.kind, send.reason) == ("full", "resync")
        assert orjson.loads(send.frame)["surfaceRef"] == surface.surface_ref
        d.cursors[DELTA.subscriber_id] = cursor
    assert d.frame(d.emit(v1_with("c")), DELTA)[1] == "full-only"
    assert on_resync(None) is None


def test_frames_encode_and_prepare_are_lazy() -> None:
    state, (change,) = project(Projection(), event(0, FULL_SURFACE_V0))
    prepared = prepare(change)
    assert prepared.delta == "first"
    assert encode_frame({"a": 1}) == b'{"a":1}'
    with pytest.raises(ValueError):
        prepared.delta_bytes()


def test_frames_catch_up_sends_every_live_surface_in_full() -> None:
    d = Driver(DELTA)
    d.emit(FULL_SURFACE_V0)
    d.emit(v2("a", create("a"), components("a", column("root"))))
    d.emit(v2("b", create("b")))
    d.emit(v2("b", delete("b")))
    late = Recipient("late", delta=True)
    run_id = event(0, {})["runId"]
    sent = catch_up(d.state.surfaces_of(run_id), late)
    frames_ = sorted((orjson.loads(send.frame) for send, _ in sent), key=lambda f: f["surfaceId"])
    assert [f["surfaceId"] for f in frames_] == ["a", "~v1"]
    assert all(send.kind == "full" and send.reason == "first" for send, _ in sent)
    # the next change is a delta for the late subscriber too
    (a_cursor,) = [c for s, c in sent if orjson.loads(s.frame)["surfaceId"] == "a"]
    state, (change,) = project(d.state, event(d.seq, v2("a", components("a", text("t")))))
    result = plan_frames(change, [(late, a_cursor)])
    assert result.sends[0].kind == "delta"


def test_frames_schema_keeps_status_out_of_deltas() -> None:
    d = Driver(DELTA)
    d.emit(FULL_SURFACE_V0)
    _, _, delta = d.frame(d.emit(v1_with("a")), DELTA)
    assert FRAME_SCHEMA.is_valid(delta)
    for member, value in [("trust", "untrusted"), ("trust", "trusted"), ("partial", False)]:
        assert not FRAME_SCHEMA.is_valid({**delta, member: value})
    for member in ("actionsEnabled", "deleted", "renderable"):
        assert not FRAME_SCHEMA.is_valid({**delta, member: True})
    assert not FRAME_SCHEMA.is_valid({**delta, "version": 1})
    # v1 is the surface "~v1": its deltas carry RFC 0114's catalogVersion, v2 deltas none
    assert not FRAME_SCHEMA.is_valid({k: v for k, v in delta.items() if k != "catalogVersion"})
    assert not FRAME_SCHEMA.is_valid({**delta, "surfaceId": "s"})
    _, _, full = d.frame(d.emit(v1_with("b"), trust="untrusted"), DELTA)
    assert full["kind"] == "full" and FRAME_SCHEMA.is_valid(full)
    assert not FRAME_SCHEMA.is_valid({**full, "version": 2})
    assert not FRAME_SCHEMA.is_valid({k: v for k, v in full.items() if k != "trust"})


GOOD_DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("kind", "digest", "valid"),
    [
        ("delta", GOOD_DIGEST, True),
        ("delta", surface_digest(FULL_SURFACE_V0), True),
        ("full", GOOD_DIGEST, False),  # a full frame is the surface itself: no check
        ("delta", "sha256:" + "0123456789ABCDEF" * 4, False),  # lowercase hex only
        ("delta", GOOD_DIGEST[:-1], False),
        ("delta", GOOD_DIGEST + "0", False),
        ("delta", "sha1:" + "0" * 40, False),
        ("delta", GOOD_DIGEST.removeprefix("sha256:"), False),
        ("delta", 12, False),
        ("delta", None, False),
    ],
)
def test_frames_schema_allows_a_digest_on_deltas_only(kind: str, digest: Any, valid: bool) -> None:
    d = Driver(DELTA)
    full = d.frame(d.emit(FULL_SURFACE_V0), DELTA)[2]
    delta = d.frame(d.emit(v1_with("a")), DELTA)[2]
    assert delta["kind"] == "delta" and FRAME_SCHEMA.is_valid(delta)
    frame = {**(delta if kind == "delta" else full), "digest": digest}
    assert FRAME_SCHEMA.is_valid(frame) is valid


def test_frames_a_resync_answer_is_marked_and_nothing_else_is() -> None:
    """Issue 14 item 2: the answer to a resync request says so (``resync: true``), so a
    subscriber that still cannot use it holds the surface instead of asking again; first,
    catch-up and change frames carry no mark, and a delta may not carry one."""
    d = Driver(FULL, DELTA)
    first = d.emit(FULL_SURFACE_V0)
    delta = d.frame(d.emit(v1_with("a")), DELTA)[2]
    surface = d.state.surfaces_of(event(0, {})["runId"])[0]
    send, _ = answer_resync(surface, DELTA, d.cursors[DELTA.subscriber_id])
    answer = orjson.loads(send.frame)
    assert answer["resync"] is True and FRAME_SCHEMA.is_valid(answer)
    assert {k: v for k, v in answer.items() if k != "resync"} == full_frame(surface)
    ((caught_up, _),) = catch_up([surface], FULL)
    for unmarked in [*(s.frame for s in first.sends), caught_up.frame]:
        assert "resync" not in orjson.loads(unmarked)
    assert delta["kind"] == "delta" and not FRAME_SCHEMA.is_valid({**delta, "resync": True})
    assert not FRAME_SCHEMA.is_valid({**answer, "resync": False})  # present only as true
