"""The subscriber client's pure core (app.core.projection.subscriber): the server-free legs of
openwop-a2ui.md §16c (RFC 0114), fail-closed rules, and THE property: at every step of random
surface evolutions the delta subscriber's reconstruction equals the full subscriber's surface."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from app.core.projection.frames import (
    Recipient,
    SubscriberCursor,
    answer_resync,
    plan_frames,
)
from app.core.projection.frames_wire import full_frame, surface_digest
from app.core.projection.patch_apply import apply_patch
from app.core.projection.patch_equal import json_equal
from app.core.projection.subscriber import DRIFT, receive
from app.core.projection.subscriber_checks import surface_problem, validate_surface
from app.core.projection.subscriber_resync import (
    RESYNC_BACKOFF_BASE,
    RESYNC_BACKOFF_CAP,
    backoff_delay,
    due_resyncs,
    next_resync_at,
)
from app.core.projection.subscriber_view import (
    Delivered,
    HeldInvalid,
    InvalidSurface,
    ResyncDeferred,
    ResyncNeeded,
    SubscriberView,
)
from app.core.projection.surfaces import Projection, SurfaceKey, project
from app.core.runlog.events import RecordedEvent
from tests.core.admission_support import rules
from tests.core.projection_support import (
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

UPSTREAM_FRAME = (
    Path(__file__).resolve().parents[3]
    / "shared/upstream/openwop/schemas/a2ui-surface-delta-frame.schema.json"
)
EVT_9 = "evt_9"
SUITE_FRAME: dict[str, Any] = {
    "surfaceRef": EVT_9,
    "catalogVersion": "0.9.1",
    "patch": [{"op": "replace", "path": "/surface/components/1/text", "value": "Done"}],
}
MATERIALIZED_AFTER_UPDATES: dict[str, Any] = copy.deepcopy(FULL_SURFACE_V0)
MATERIALIZED_AFTER_UPDATES["surface"]["components"][1]["text"] = "Confirmed — see you then."
MATERIALIZED_AFTER_UPDATES["surface"]["components"].append(
    {"component": "text", "text": "A calendar invite is on its way."}
)
RECONSTRUCTION = [
    [{"op": "replace", "path": "/surface/components/1/text", "value": "Confirmed — see you then."}],
    [
        {
            "op": "add",
            "path": "/surface/components/-",
            "value": {"component": "text", "text": "A calendar invite is on its way."},
        }
    ],
]


# --- §16c server-free legs: the frame schema ----------------------------------------------------


@pytest.fixture(scope="module")
def upstream() -> Draft202012Validator:
    if not UPSTREAM_FRAME.is_file():
        pytest.skip(f"upstream delta-frame schema not present at {UPSTREAM_FRAME}")
    schema = orjson.loads(UPSTREAM_FRAME.read_bytes())
    Draft202012Validator.check_schema(schema)  # leg 1: it compiles
    return Draft202012Validator(schema)


def test_subscriber_16c_frame_schema_legs(upstream: Draft202012Validator) -> None:
    assert upstream.is_valid(SUITE_FRAME)  # leg 2
    for missing in ("surfaceRef", "catalogVersion", "patch"):  # leg 3
        assert not upstream.is_valid({k: v for k, v in SUITE_FRAME.items() if k != missing})
    assert not upstream.is_valid({**SUITE_FRAME, "patch": []})  # leg 4
    test_op = [{"op": "test", "path": "/surface", "value": 1}]
    assert not upstream.is_valid({**SUITE_FRAME, "patch": test_op})  # leg 5
    extra = [{**SUITE_FRAME["patch"][0], "onApply": "x"}]
    assert not upstream.is_valid({**SUITE_FRAME, "patch": extra})  # leg 6
    # leg 10: a delta frame is not a v1 payload, the full surface is
    assert rules().check_v1(SUITE_FRAME) is not None
    assert rules().check_v1(FULL_SURFACE_V0) is None


# --- §16c leg 7: reconstruction, through our own frames ------------------------------------------


def _full(content: Any, ref: str = EVT_9, sequence: int = 0, **status: Any) -> dict[str, Any]:
    frame = {
        "kind": "full",
        "runId": RUN,
        "surfaceId": "~v1",
        "version": 1,
        "surfaceRef": ref,
        "sequence": sequence,
        "catalogVersion": "0.9.1",
        "trust": "trusted",
        "renderable": True,
        "actionsEnabled": True,
        "partial": False,
        "deleted": False,
        "surface": content,
    }
    frame.update(status)
    return frame


def _delta(patch: Any, base: tuple[str, int], ref: str, sequence: int, **extra: Any) -> dict:
    """A v1 delta frame (``base``: the held surfaceRef, for reading; the frame names its
    base by sequence). It carries no status: the subscriber keeps its base's."""
    frame = {
        "kind": "delta",
        "runId": RUN,
        "surfaceId": "~v1",
        "surfaceRef": ref,
        "catalogVersion": "0.9.1",
        "baseSequence": base[1],
        "sequence": sequence,
        "patch": patch,
    }
    frame.update(extra)
    return frame


def test_subscriber_16c_reconstruction(upstream: Draft202012Validator) -> None:
    view, outcome = receive(SubscriberView(), orjson.dumps(_full(FULL_SURFACE_V0)), rules())
    assert isinstance(outcome, Delivered)
    base = (EVT_9, 0)
    for n, patch in enumerate(RECONSTRUCTION, start=1):
        frame = _delta(patch, base, f"evt_{9 + n}", n)
        rfc = {k: frame[k] for k in ("surfaceRef", "catalogVersion", "patch")}
        assert upstream.is_valid(rfc) and rfc["catalogVersion"] == FULL_SURFACE_V0["catalogVersion"]
        view, outcome = receive(view, orjson.dumps(frame), rules())
        assert isinstance(outcome, Delivered), outcome
        base = (frame["surfaceRef"], n)
    assert outcome.surface.content == MATERIALIZED_AFTER_UPDATES
    assert rules().check_v1(outcome.surface.content) is None
    assert apply_patch(apply_patch(FULL_SURFACE_V0, RECONSTRUCTION[0]), RECONSTRUCTION[1]) == (
        MATERIALIZED_AFTER_UPDATES
    )


def test_subscriber_projector_reproduces_the_suite_materialization() -> None:
    """The same two updates through the projector: the delta subscriber ends where the full
    subscriber does, which is the suite's ``fullSurfaceMaterializedAfterUpdates``."""
    bodies = [FULL_SURFACE_V0, copy.deepcopy(FULL_SURFACE_V0), MATERIALIZED_AFTER_UPDATES]
    bodies[1]["surface"]["components"][1]["text"] = "Confirmed — see you then."
    for full_every in (1000, 1):  # with a digest check on every delta too
        pair = run_pair([event(i, b) for i, b in enumerate(bodies)], full_every)
        end = pair.delta_view.get(RUN, "~v1")
        assert end is not None and end.content == MATERIALIZED_AFTER_UPDATES
        assert pair.digests == (2 if full_every == 1 else 0)


# --- §16c legs 8 and 9 (RFC 0114's negative example): fail closed --------------------------------

NEGATIVES = [
    (
        "iframe add",
        [
            {
                "op": "add",
                "path": "/surface/components/-",
                "value": {"component": "iframe", "src": "https://evil.example/"},
            }
        ],
    ),
    (
        "onClick replace",
        [
            {
                "op": "replace",
                "path": "/surface/components/0",
                "value": {"component": "heading", "text": "Hi", "onClick": "steal()"},
            }
        ],
    ),
    ("bad path", [{"op": "replace", "path": "/surface/components/9/text", "value": "x"}]),
    ("missing node", [{"op": "remove", "path": "/surface/title/x"}]),
    ("test op", [{"op": "test", "path": "/surface/title", "value": "x"}]),
    ("extra member", [{"op": "remove", "path": "/surface/title", "onApply": "x"}]),
    ("button to a url", [{"op": "add", "path": "/surface/components/3/action/url", "value": "u"}]),
]


@pytest.mark.parametrize(("name", "patch"), NEGATIVES, ids=[n for n, _ in NEGATIVES])
def test_subscriber_bad_delta_fails_closed(name: str, patch: list[dict[str, Any]]) -> None:
    view, _ = receive(SubscriberView(), _full(FULL_SURFACE_V0), rules())
    # legs 8 and 9: the frame itself is valid, only the post-patch surface is not
    if name in ("iframe add", "onClick replace") and UPSTREAM_FRAME.is_file():
        upstream = Draft202012Validator(orjson.loads(UPSTREAM_FRAME.read_bytes()))
        rfc = {"surfaceRef": "evt_10", "catalogVersion": "0.9.1", "patch": patch}
        assert upstream.is_valid(rfc)
    view, outcome = receive(view, _delta(patch, (EVT_9, 0), "evt_10", 1), rules())
    assert isinstance(outcome, ResyncNeeded), outcome
    assert outcome.run_id == RUN and outcome.surface_id == "~v1" and outcome.reason
    held = view.get(RUN, "~v1")
    assert held is not None and held.stale and not held.renderable
    assert held.content == FULL_SURFACE_V0  # the last good surface, for store-without-render
    request = outcome.request("sub-1")
    assert request is not None and request["surfaceId"] == "~v1"
    # later deltas are refused until a full frame arrives; the full frame heals it
    good = [{"op": "replace", "path": "/surface/title", "value": "ok"}]
    view, outcome = receive(view, _delta(good, (EVT_9, 0), "evt_11", 2), rules())
    assert isinstance(outcome, ResyncNeeded) and "stale" in outcome.reason
    view, outcome = receive(view, _full(FULL_SURFACE_V0, "evt_12", 3), rules())
    assert isinstance(outcome, Delivered) and outcome.surface.renderable


def test_subscriber_full_frame_out_of_catalog_is_refused() -> None:
    bad = copy.deepcopy(FULL_SURFACE_V0)
    bad["surface"]["components"].append({"component": "iframe", "src": "x"})
    view, outcome = receive(SubscriberView(), _full(bad), rules())
    assert isinstance(outcome, ResyncNeeded) and view.get(RUN, "~v1") is None


def test_subscriber_sequence_gap_needs_resync() -> None:
    view, _ = receive(SubscriberView(), _full(FULL_SURFACE_V0), rules())
    patch = [{"op": "replace", "path": "/surface/title", "value": "x"}]
    _, outcome = receive(view, _delta(patch, ("evt_8", 7), "evt_10", 8), rules())
    assert isinstance(outcome, ResyncNeeded) and "gap" in outcome.reason
    _, outcome = receive(SubscriberView(), _delta(patch, (EVT_9, 0), "evt_10", 1), rules())
    assert isinstance(outcome, ResyncNeeded) and "base" in outcome.reason


@pytest.mark.parametrize(
    "frame",
    [
        b"not json",
        b"[1]",
        {"kind": "what"},
        {**_full(FULL_SURFACE_V0), "trust": "maybe"},
        {**_full(FULL_SURFACE_V0), "sequence": True},
        {**_delta([], (EVT_9, 0), "e", 1)},
    ],
)
def test_subscriber_never_raises_on_garbage(frame: Any) -> None:
    view, outcome = receive(SubscriberView(), frame, rules())
    assert isinstance(outcome, ResyncNeeded)


def test_subscriber_trust_is_monotone() -> None:
    view, _ = receive(SubscriberView(), _full(FULL_SURFACE_V0, trust="untrusted"), rules())
    patch = [{"op": "replace", "path": "/surface/title", "value": "x"}]
    view, outcome = receive(view, _delta(patch, (EVT_9, 0), "evt_10", 1), rules())
    assert isinstance(outcome, Delivered)
    assert outcome.surface.trust == "untrusted" and not outcome.surface.actions_enabled
    # a later full frame saying trusted does not launder it either
    view, outcome = receive(view, _full(FULL_SURFACE_V0, "evt_11", 2), rules())
    assert isinstance(outcome, Delivered) and outcome.surface.trust == "untrusted"
    assert not outcome.surface.actions_enabled


def test_subscriber_an_untrusted_surface_stays_untrusted_through_deltas() -> None:
    """Through the projector: taint arrives in a full frame, then trusted updates are deltas
    that carry no trust, and the delta subscriber holds ``untrusted`` throughout."""
    pair = Pair()
    bodies = [copy.deepcopy(FULL_SURFACE_V0) for _ in range(6)]
    for n, body in enumerate(bodies):
        body["surface"]["components"][1]["text"] = f"v{n}"
    pair.step(event(0, bodies[0]))
    pair.step(event(1, bodies[1]))
    pair.step(event(2, bodies[2], trust="untrusted"))
    for n in range(3, 6):
        pair.step(event(n, bodies[n]))
        held = pair.delta_view.get(RUN, "~v1")
        assert held is not None and held.trust == "untrusted" and not held.actions_enabled
    assert pair.kinds[::2] == ["full", "full", "full", "full", "full", "full"]  # full sub
    assert pair.kinds[1::2] == ["full", "delta", "full", "delta", "delta", "delta"]


STATUS = [
    ("trust", "trusted"),
    ("trust", "untrusted"),
    ("partial", False),
    ("actionsEnabled", True),
    ("deleted", False),
    ("renderable", True),
    ("version", 1),
    ("catalogId", "x"),
]


@pytest.mark.parametrize(("member", "value"), STATUS, ids=[f"{m}={v}" for m, v in STATUS])
def test_subscriber_refuses_a_delta_naming_a_status_member(member: str, value: Any) -> None:
    """A delta never carries status (a change is a full frame): one that does is refused, so
    neither ``untrusted`` nor ``trusted`` can ride a delta, and the held surface goes stale."""
    view, _ = receive(SubscriberView(), _full(FULL_SURFACE_V0, trust="untrusted"), rules())
    patch = [{"op": "replace", "path": "/surface/title", "value": "x"}]
    view, outcome = receive(
        view, _delta(patch, (EVT_9, 0), "evt_10", 1, **{member: value}), rules()
    )
    assert isinstance(outcome, ResyncNeeded) and member in outcome.reason
    held = view.get(RUN, "~v1")
    assert held is not None and held.stale and held.trust == "untrusted"


_ADD_ROOT = {
    "op": "add",
    "path": "/components/root",
    "value": {"id": "root", "component": "Divider"},
}


def test_subscriber_refuses_a_delta_on_a_deleted_surface_or_changing_the_catalog() -> None:
    pair = Pair()
    pair.step(event(0, v2("s", create("s"), components("s", column("root")))))
    pair.step(event(1, v2("s", delete("s"))))
    held = pair.delta_view.get(RUN, "s")
    assert held is not None and held.deleted
    _, outcome = receive(pair.delta_view, _v2_delta([_ADD_ROOT], held), rules())
    assert isinstance(outcome, ResyncNeeded) and "deleted" in outcome.reason
    view, _ = receive(SubscriberView(), _full(FULL_SURFACE_V0), rules())
    patch = [{"op": "replace", "path": "/surface/title", "value": "x"}]
    for catalog in ("0.9.0", None):
        frame = _delta(patch, (EVT_9, 0), "evt_10", 1, catalogVersion=catalog)
        if catalog is None:
            del frame["catalogVersion"]
        _, outcome = receive(view, frame, rules())
        assert isinstance(outcome, ResyncNeeded) and "catalog" in outcome.reason
    pair.step(event(2, v2("s", create("s"), components("s", column("root")))))
    held = pair.delta_view.get(RUN, "s")
    assert held is not None and not held.deleted
    frame = {**_v2_delta([_ADD_ROOT], held), "catalogVersion": "0.9.1"}
    _, outcome = receive(pair.delta_view, frame, rules())
    assert isinstance(outcome, ResyncNeeded) and "catalog" in outcome.reason


def test_subscriber_refuses_a_full_frame_whose_version_is_not_its_surface() -> None:
    _, outcome = receive(SubscriberView(), _full(FULL_SURFACE_V0, surfaceId="s"), rules())
    assert isinstance(outcome, ResyncNeeded) and "~v1" in outcome.reason


def test_subscriber_v2_profile_is_enforced() -> None:
    d = Pair()
    d.step(event(0, v2("s", create("s"), components("s", column("root", "t"), text("t")))))
    held = d.full_view.get(RUN, "s")
    assert held is not None and held.renderable
    bad = {"id": "i", "component": "Image", "url": "https://evil.example/x.png"}
    frame = _v2_delta([{"op": "add", "path": "/components/i", "value": bad}], held)
    view, outcome = receive(d.delta_view, frame, rules())
    assert isinstance(outcome, ResyncNeeded) and "Image" in outcome.reason
    mismatched = _v2_delta([{"op": "add", "path": "/components/x", "value": text("y")}], held)
    _, outcome = receive(d.delta_view, mismatched, rules())
    assert isinstance(outcome, ResyncNeeded)


# --- the periodic digest check (docs/projection.md "fullEvery") ----------------------------------

_AFTER_TITLE = copy.deepcopy(FULL_SURFACE_V0)
_AFTER_TITLE["surface"]["title"] = "x"
_REORDERED = dict(reversed(list(_AFTER_TITLE.items())))  # the same JSON value
DIGEST_CASES = [
    ("matches the result", surface_digest(_AFTER_TITLE), None),
    ("matches, keys in another order", surface_digest(_REORDERED), None),
    ("is the base's (the result differs)", surface_digest(FULL_SURFACE_V0), DRIFT),
    ("is another surface's", "sha256:" + "0" * 64, DRIFT),
    ("is upper-case hex", "sha256:" + surface_digest(_AFTER_TITLE)[7:].upper(), "digest"),
    ("ends with a newline", surface_digest(_AFTER_TITLE) + "\n", "digest"),
    ("is not a string", 7, "digest"),
    ("is null", None, "digest"),
]


@pytest.mark.parametrize(
    ("digest", "refused"), [c[1:] for c in DIGEST_CASES], ids=[c[0] for c in DIGEST_CASES]
)
def test_subscriber_checks_a_delta_digest(digest: Any, refused: str | None) -> None:
    view, _ = receive(SubscriberView(), _full(FULL_SURFACE_V0), rules())
    patch = [{"op": "replace", "path": "/surface/title", "value": "x"}]
    frame = _delta(patch, (EVT_9, 0), "evt_10", 1, digest=digest)
    after, outcome = receive(view, orjson.dumps(frame), rules())
    held = after.get(RUN, "~v1")
    assert held is not None
    if refused is None:
        assert isinstance(outcome, Delivered) and outcome.kind == "delta"
        assert outcome.surface.content == _AFTER_TITLE and not held.stale
        return
    assert isinstance(outcome, ResyncNeeded) and refused in outcome.reason
    # not delivered: the last good surface is kept, stale, until a full frame arrives
    assert held.stale and not held.renderable and held.content == FULL_SURFACE_V0
    assert outcome.request("ui-7") is not None


def _mutate_in_place(held: Any) -> Any:
    held.content["surface"]["title"] = "mutated by the application"  # Python cannot freeze it
    return held


def _applied_differently(held: Any) -> Any:
    surface = {**held.content["surface"], "title": "an applier that differs"}
    return held._replace(content={**held.content, "surface": surface})


DRIFTS: dict[str, Callable[[Any], Any]] = {
    "the application mutated the surface it was handed": _mutate_in_place,
    "a client applier that differs from RFC 6902": _applied_differently,
}


@pytest.mark.parametrize("drift", DRIFTS.values(), ids=list(DRIFTS))
def test_subscriber_drift_is_caught_by_the_next_digest_and_one_full_frame_fixes_it(
    drift: Callable[[Any], Any],
) -> None:
    """Drift the sequence chain cannot see: the held surface changes under the subscriber.
    The next delta still applies (the drift is invisible until the check); the digest frame is
    refused (not delivered, stale, resync); the projector's one full frame fixes it; the next
    check passes."""
    sub = Recipient("checked", delta=True, full_every=3)
    state, cursor, view = Projection(), None, SubscriberView()
    seen = []
    for n in range(8):
        body = copy.deepcopy(FULL_SURFACE_V0)
        body["surface"]["components"][1]["text"] = f"v{n}"
        state, (change,) = project(state, event(n, body))
        result = plan_frames(change, [(sub, cursor)])
        cursor = result.cursors[sub.subscriber_id]
        (send,) = result.sends
        view, outcome = receive(view, send.frame, rules())
        seen.append((send.reason, type(outcome).__name__))
        held = view.get(RUN, "~v1")
        assert held is not None
        if n == 1:
            view = SubscriberView(view.surfaces.set((RUN, "~v1"), drift(held)))
        elif n == 2:  # between checks the drift is not seen: this is what fullEvery bounds
            assert isinstance(outcome, Delivered)
            assert not json_equal(outcome.surface.content, change.new.content)
        elif isinstance(outcome, ResyncNeeded):
            assert (outcome.reason, outcome.sequence) == (DRIFT, n)
            assert held.stale and not held.renderable and held.sequence == n - 1
            # the shell publishes outcome.request(...); the projector answers one full frame
            send, cursor = answer_resync(change.new, sub, cursor)
            view, fixed = receive(view, send.frame, rules())
            assert isinstance(fixed, Delivered) and fixed.kind == "full"
            seen.append((send.reason, type(fixed).__name__))
        else:
            assert isinstance(outcome, Delivered)
            assert json_equal(outcome.surface.content, change.new.content)
    assert seen == [
        ("first", "Delivered"),
        ("delta", "Delivered"),
        ("delta", "Delivered"),
        ("digest", "ResyncNeeded"),
        ("resync", "Delivered"),
        ("delta", "Delivered"),
        ("delta", "Delivered"),
        ("digest", "Delivered"),
        ("delta", "Delivered"),
    ]


def test_subscriber_digest_agrees_on_a_zero_whose_sign_the_delta_did_not_send() -> None:
    """``-0.0`` equals ``0.0`` (json_equal): the diff sends no sign change, so the subscriber
    keeps ``0.0`` where the projector now has ``-0.0``, and the digest must still match."""
    pair = Pair(full_every=1)
    pair.step(event(0, v2("s", create("s"), components("s", column("root")))))
    pair.step(event(1, v2("s", data("s", path="/z", value=0.0))))
    pair.step(event(2, v2("s", components("s", text("t")), data("s", path="/z", value=-0.0))))
    held = pair.delta_view.get(RUN, "s")
    projected = pair.state.surfaces_of(RUN)[0].content["dataModel"]["z"]
    assert held is not None and math.copysign(1, held.content["dataModel"]["z"]) == 1
    assert math.copysign(1, projected) == -1
    assert pair.digests == 2 and pair.kinds[-2:] == ["full", "delta"]


def _v2_delta(patch: Any, held: Any) -> dict[str, Any]:
    return {
        "kind": "delta",
        "runId": RUN,
        "surfaceId": "s",
        "surfaceRef": "evt-next-0000001",
        "baseSequence": held.sequence,
        "sequence": held.sequence + 1,
        "patch": patch,
    }


# --- loop-proof resyncs (issue 14 item 2; docs/projection.md "When a surface stays invalid") ------

# What SR-1 made of a registered secret used as a component id (the hostile review's case): the
# profile's id pattern refuses it, so a log holding it has a surface no subscriber may render.
REDACTED = "[REDACTED:glob]"
_BAD_ID = v2("bad", create("bad"), components("bad", column("root", REDACTED), text(REDACTED)))
_GOOD = v2("good", create("good"), components("good", column("root", "t"), text("t")))
T0 = 1000.0  # the caller's clock (any monotonic seconds)


def _invalid_change(sequence: int = 0) -> Any:
    """The projector's surface for a recorded event that never passed the validator."""
    _, (change,) = project(Projection(), event(sequence, _BAD_ID))
    return change


def _requests(outcomes: list[Any]) -> list[ResyncNeeded]:
    return [o for o in outcomes if isinstance(o, ResyncNeeded)]


def _reports(outcomes: list[Any]) -> list[InvalidSurface]:
    return [o.report for o in outcomes if not isinstance(o, Delivered) and o.report is not None]


@pytest.mark.parametrize("delta", [False, True], ids=["full subscriber", "delta subscriber"])
def test_subscriber_an_invalid_full_frame_is_reported_once_and_asked_for_once(delta: bool) -> None:
    """The loop the hostile review found: the first full frame fails, the subscriber asks, the
    projector answers with the same surface, which fails again... Now: one report, one request,
    and every later answer (however many the projector sends) is held, not asked for again."""
    change = _invalid_change()
    sub = Recipient("ui-7", delta=delta)
    result = plan_frames(change, [(sub, None)])
    cursor = result.cursors["ui-7"]
    view, outcome = receive(SubscriberView(), result.sends[0].frame, rules(), T0)
    outcomes = [outcome]
    for n in range(20):  # the projector answers every request it gets (and then some)
        send, cursor = answer_resync(change.new, sub, cursor)
        assert orjson.loads(send.frame)["resync"] is True
        view, outcome = receive(view, send.frame, rules(), T0 + n)
        outcomes.append(outcome)
        view, due = due_resyncs(view, T0 + n + 1000)
        outcomes.extend(due)
    assert len(_requests(outcomes)) == 1  # the first failing frame asks once, and only it
    [report] = _reports(outcomes)
    assert (report.run_id, report.surface_id, report.sequence) == (RUN, "bad", 0)
    assert report.pointer == "/components/root/children/0" and report.rule == "branch"
    assert REDACTED in report.message and report.frame == "full"
    assert report.describe() == (
        f"surface {RUN}/bad is invalid at sequence 0 (full frame): rule branch at "
        f"/components/root/children/0: {report.message}"
    )
    assert all(isinstance(o, HeldInvalid) and o.sequence == 0 for o in outcomes[1:])
    assert view.get(RUN, "bad") is None  # never handed out, nothing renderable held
    trouble = view.trouble(RUN, "bad")
    assert trouble is not None and trouble.invalid_at == 0 and trouble.pending is None
    assert next_resync_at(view) is None


# (first frame, its answer): an unmarked answer is recognised as one because the subscriber
# asked; a marked frame is held at once (the projector says it answers someone's request).
HOLD_CASES = [
    ("marked answer", [False, True], [ResyncNeeded, HeldInvalid]),
    ("unmarked answer from a host that does not mark", [False, False], [ResyncNeeded, HeldInvalid]),
    ("a marked frame first (another request's answer)", [True, True], [HeldInvalid, HeldInvalid]),
    ("re-delivered first frames", [False, False, False, False], [ResyncNeeded] + [HeldInvalid] * 3),
]


@pytest.mark.parametrize(
    ("marks", "kinds"), [c[1:] for c in HOLD_CASES], ids=[c[0] for c in HOLD_CASES]
)
def test_subscriber_holds_a_surface_whose_own_full_frame_fails(
    marks: list[bool], kinds: list[type]
) -> None:
    frame = full_frame(_invalid_change().new)
    view, outcomes = SubscriberView(), []
    for n, marked in enumerate(marks):
        sent = {**frame, "resync": True} if marked else frame
        view, outcome = receive(view, sent, rules(), T0 + n)
        outcomes.append(outcome)
    assert [type(o) for o in outcomes] == kinds
    first = outcomes[0]
    assert not isinstance(first, Delivered), first
    assert len(_reports(outcomes)) == 1 and _reports(outcomes)[0] == first.report


def test_subscriber_keeps_delivering_the_runs_other_surfaces() -> None:
    """One invalid surface does not stop the run: its other surfaces are delivered, before,
    between and after the invalid one's frames, and the invalid one is never handed out."""
    state, cursors = Projection(), dict[SurfaceKey, SubscriberCursor]()
    sub = Recipient("ui-7", delta=True)
    view, outcomes = SubscriberView(), []
    bodies = [_GOOD, _BAD_ID] + [
        v2("good", components("good", text("t", f"v{n}"))) for n in range(2, 8)
    ]
    for seq, body in enumerate(bodies):
        state, (change,) = project(state, event(seq, body))
        result = plan_frames(change, [(sub, cursors.get(change.key))])
        cursors[change.key] = result.cursors["ui-7"]
        view, outcome = receive(view, result.sends[0].frame, rules(), T0 + seq)
        outcomes.append(outcome)
        if isinstance(outcome, ResyncNeeded):  # answered, as the projector does
            bad = state.surfaces.get(change.key)
            send, cursors[change.key] = answer_resync(bad, sub, cursors[change.key])
            view, outcome = receive(view, send.frame, rules(), T0 + seq)
            outcomes.append(outcome)
    delivered = [o.surface for o in outcomes if isinstance(o, Delivered)]
    assert [s.surface_id for s in delivered] == ["good"] * 7
    assert [o.kind for o in outcomes if isinstance(o, Delivered)] == ["full"] + ["delta"] * 6
    held = view.get(RUN, "good")
    assert held is not None and held.renderable and held.content["components"]["t"]["text"] == "v7"
    assert view.get(RUN, "bad") is None and len(_requests(outcomes)) == 1
    assert len(_reports(outcomes)) == 1


def test_subscriber_a_later_change_resumes_normal_handling() -> None:
    """Held invalid at sequence 0; a frame of a later sequence is a new state: a valid one is
    delivered at once (and ends the hold), an invalid one is reported again, once."""
    frame = full_frame(_invalid_change().new)
    view, first = receive(SubscriberView(), frame, rules(), T0)
    view, held = receive(view, {**frame, "resync": True}, rules(), T0 + 1)
    assert isinstance(first, ResyncNeeded) and isinstance(held, HeldInvalid)
    # sequence 1: still invalid (a change that kept the bad id): one new report, and its own
    # full frame fails, asked already since the last delivery, so it is held without a request
    later = {**frame, "sequence": 1, "surfaceRef": "evt-1"}
    view, outcome = receive(view, later, rules(), T0 + 2)
    assert isinstance(outcome, HeldInvalid) and outcome.sequence == 1
    assert outcome.report is not None and outcome.report.sequence == 1
    # a delta to the state held invalid (or an older one) says nothing and asks nothing
    old_delta = _v2_delta([_ADD_ROOT], _Seq(0))
    view, outcome = receive(view, {**old_delta, "surfaceId": "bad"}, rules(), T0 + 3)
    assert isinstance(outcome, HeldInvalid) and outcome.report is None
    # a delta to a later state cannot apply (nothing valid is held): normal handling, it asks
    new_delta = {**_v2_delta([_ADD_ROOT], _Seq(1)), "surfaceId": "bad"}
    view, outcome = receive(view, new_delta, rules(), T0 + 1000)
    assert isinstance(outcome, ResyncNeeded) and outcome.sequence == 2
    # sequence 2's full frame is valid: delivered, and the trouble is gone
    content = {**frame["surface"], "components": {"root": {"id": "root", "component": "Divider"}}}
    fixed = {**frame, "sequence": 2, "surfaceRef": "evt-2", "surface": content, "resync": True}
    view, outcome = receive(view, fixed, rules(), T0 + 1001)
    assert isinstance(outcome, Delivered) and outcome.surface.sequence == 2
    assert view.trouble(RUN, "bad") is None and view.troubles == SubscriberView().troubles


class _Seq:
    def __init__(self, sequence: int) -> None:
        self.sequence = sequence


@pytest.mark.parametrize(
    ("requests", "delay"),
    [
        (0, 0.0),
        (1, 1.0),
        (2, 2.0),
        (3, 4.0),
        (4, 8.0),
        (6, 32.0),
        (7, 60.0),
        (8, 60.0),
        (10**6, 60.0),
    ],
)
def test_subscriber_backoff_grows_and_is_capped(requests: int, delay: float) -> None:
    assert backoff_delay(requests) == delay
    assert (RESYNC_BACKOFF_BASE, RESYNC_BACKOFF_CAP) == (1.0, 60.0)


def test_subscriber_repeated_resyncs_for_a_surface_back_off() -> None:
    """A surface that keeps failing (here: deltas that never apply, the answers lost) asks at
    once the first time, then no sooner than 1, 2, 4, ... seconds after its last request, up to
    60 s apart; the failures in between are deferred, not sent, and the latest one is what
    ``due_resyncs`` hands out when it is due."""
    view, _ = receive(SubscriberView(), _full(FULL_SURFACE_V0), rules(), T0)
    patch = [{"op": "replace", "path": "/surface/title", "value": "x"}]
    now, sent_at = T0, []
    for n in range(1, 400):  # a failing frame every half second for 200 s
        now = T0 + n * 0.5
        frame = _delta(patch, ("evt_x", 100 + n), f"evt_{n}", 101 + n)  # always a gap
        view, outcome = receive(view, frame, rules(), now)
        if isinstance(outcome, ResyncNeeded):
            sent_at.append(now)
        else:
            assert isinstance(outcome, ResyncDeferred) and outcome.retry_at > now
            assert next_resync_at(view) == outcome.retry_at
        view, due = due_resyncs(view, now)
        for need in due:
            assert need.sequence == 101 + n and "gap" in need.reason  # the latest failure's
            sent_at.append(now)
    gaps = [b - a for a, b in zip(sent_at, sent_at[1:], strict=False)]
    assert gaps[:6] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
    assert all(gap == 60.0 for gap in gaps[6:]) and len(gaps) > 6
    # a delivery ends it: the next failure asks at once again
    view, outcome = receive(view, _full(FULL_SURFACE_V0, "evt_z", 999), rules(), now)
    assert isinstance(outcome, Delivered) and view.trouble(RUN, "~v1") is None
    frame = _delta(patch, ("evt_x", 5), "evt_y", 1000)
    _, outcome = receive(view, frame, rules(), now)
    assert isinstance(outcome, ResyncNeeded)


def test_subscriber_without_a_clock_asks_every_time_but_still_holds_an_invalid_change() -> None:
    """``now`` omitted (the fault suite's fleet): no backoff, each failure asks at once as it
    always did; the invalid hold does not need a clock and still stops the loop."""
    view, _ = receive(SubscriberView(), _full(FULL_SURFACE_V0), rules())
    patch = [{"op": "replace", "path": "/surface/title", "value": "x"}]
    for n in range(5):
        view, outcome = receive(view, _delta(patch, ("evt_x", 50 + n), "e", 60 + n), rules())
        assert isinstance(outcome, ResyncNeeded)
    frame = full_frame(_invalid_change().new)
    outcomes = []
    for _ in range(5):
        view, outcome = receive(view, frame, rules())
        outcomes.append(outcome)
    assert [type(o) for o in outcomes] == [ResyncNeeded] + [HeldInvalid] * 4


def test_subscriber_a_delta_that_makes_the_surface_invalid_is_reported_once_per_state() -> None:
    """An invalid post-patch surface is reported with its pointer and asks once; the answer
    (the projector's valid surface) ends it. The same delta re-delivered later is a new trouble
    for that state only if it was never reported: here it was, so no second report."""
    d = Pair()
    d.step(event(0, v2("s", create("s"), components("s", column("root", "t"), text("t")))))
    held = d.delta_view.get(RUN, "s")
    assert held is not None
    bad = {"id": "i", "component": "Image", "url": "https://evil.example/x.png"}
    frame = _v2_delta([{"op": "add", "path": "/components/i", "value": bad}], held)
    view, outcome = receive(d.delta_view, frame, rules(), T0)
    assert isinstance(outcome, ResyncNeeded) and outcome.report is not None
    report = outcome.report
    assert (report.sequence, report.frame, report.pointer) == (1, "delta", "/components/i")
    assert report.rule == "a2ui-surface-no-network-egress" and "Image" in report.message
    again, outcome = receive(view, frame, rules(), T0 + 0.1)  # the same state again
    assert isinstance(outcome, ResyncDeferred) and outcome.report is None
    surface = d.state.surfaces_of(RUN)[0]
    send, _ = answer_resync(surface, d.delta, d.cursors[(d.delta.subscriber_id, surface.key)])
    healed, outcome = receive(again, send.frame, rules(), T0 + 0.2)
    assert isinstance(outcome, Delivered) and healed.trouble(RUN, "s") is None
    _, due = due_resyncs(healed, T0 + 1000)
    assert due == ()  # the deferred request died with the delivery


POINTER_CASES = [
    (
        "v1 out-of-catalog component",
        1,
        {**FULL_SURFACE_V0, "surface": {"components": [{"component": "iframe", "src": "x"}]}},
        ("a2ui-surface-no-code-exec", "/surface/components/0"),
    ),
    (
        "v2 child id broken by redaction",
        2,
        _invalid_change().new.content,
        ("branch", "/components/root/children/0"),
    ),
    (
        "v2 component id broken by redaction",
        2,
        {**_invalid_change().new.content, "components": {REDACTED: text(REDACTED)}},
        ("branch", f"/components/{REDACTED}/id"),
    ),
    (
        "v2 theme",
        2,
        {**_invalid_change().new.content, "components": {}, "theme": {"primaryColor": 7}},
        ("branch", "/theme/primaryColor"),
    ),
    (
        "v2 component under another id",
        2,
        {**_invalid_change().new.content, "components": {"a": text("b")}},
        ("materialized-surface", "/components/a"),
    ),
    (
        "v2 surface of another id",
        2,
        {**_invalid_change().new.content, "surfaceId": "other", "components": {}},
        ("frame-identity", "/surfaceId"),
    ),
]


@pytest.mark.parametrize(
    ("version", "content", "expected"),
    [c[1:] for c in POINTER_CASES],
    ids=[c[0] for c in POINTER_CASES],
)
def test_subscriber_a_problem_names_its_rule_and_a_pointer_into_the_surface(
    version: int, content: Any, expected: tuple[str, str]
) -> None:
    catalog = "0.9.1" if version == 1 else content["catalogId"]
    problem = surface_problem(version, content, catalog, "bad", rules())
    assert problem is not None and (problem.rule, problem.pointer) == expected, problem
    assert validate_surface(version, content, catalog, "bad", rules()) == problem.reason


def test_subscriber_a_problem_in_a_big_surface_points_at_the_right_component() -> None:
    """Past 512 components (one updateComponents) and 64 messages (one payload), the pointer
    is still the offending component's own."""
    many = {f"c{n}": text(f"c{n}") for n in range(40_000)}
    many["c39999"] = {"id": "c39999", "component": "Image", "url": "https://x.example/"}
    content = {**_invalid_change().new.content, "components": {"root": column("root"), **many}}
    problem = surface_problem(2, content, content["catalogId"], "bad", rules())
    assert problem is not None and problem.pointer == "/components/c39999"


FRAMES_OF_ONE_STATE = st.lists(
    st.tuples(st.booleans(), st.sampled_from(["full", "old delta", "garbage"]), st.floats(0, 500)),
    min_size=1,
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(FRAMES_OF_ONE_STATE)
def test_subscriber_law_no_request_answer_pair_repeats_without_a_state_change(
    frames: list[tuple[bool, str, float]],
) -> None:
    """Law: whatever mix of answers (marked or not), re-deliveries and old frames of ONE
    invalid state arrives, at whatever times, the subscriber reports it once and sends at most
    one request (from ``receive`` or ``due_resyncs``) plus, for frames it cannot even read,
    requests no closer together than the backoff."""
    frame = full_frame(_invalid_change(5).new)
    view, outcomes, now = SubscriberView(), [], T0
    full_requests = 0
    sent_at: list[float] = []
    for marked, what, wait in frames:
        now += wait
        if what == "full":
            sent: Any = {**frame, "resync": True} if marked else frame
        elif what == "old delta":
            sent = {**_v2_delta([_ADD_ROOT], _Seq(3)), "surfaceId": "bad"}
        else:
            sent = {"kind": "full", "runId": RUN, "surfaceId": "bad"}  # unreadable
        view, outcome = receive(view, sent, rules(), now)
        view, due = due_resyncs(view, now)
        for out in [outcome, *due]:
            outcomes.append(out)
            if isinstance(out, ResyncNeeded):
                sent_at.append(now)
                full_requests += out.sequence == 5
    assert full_requests <= 1
    assert len([r for r in _reports(outcomes) if r.sequence == 5]) <= 1
    gaps = [b - a for a, b in zip(sent_at, sent_at[1:], strict=False)]
    assert all(gap >= backoff_delay(n + 1) for n, gap in enumerate(gaps))
    if any(what == "full" for _, what, _ in frames):
        assert len(_reports(outcomes)) == 1


# --- THE property ---------------------------------------------------------------------------------


class Pair:
    """A projector and two subscribers (full, delta) connected without a broker."""

    def __init__(self, full_every: int = 1000) -> None:
        self.state = Projection()
        self.full = Recipient("full")
        self.delta = Recipient("delta", delta=True, full_every=full_every)
        self.subs = (self.full, self.delta)
        self.cursors: dict[tuple[str, Any], SubscriberCursor] = {}
        self.full_view = SubscriberView()
        self.delta_view = SubscriberView()
        self.kinds: list[str] = []
        self.digests = 0  # digest checks the delta subscriber passed

    def step(self, ev: RecordedEvent) -> Any:
        self.state, changes = project(self.state, ev)
        for change in changes:
            # a cursor is per (subscriber, surface)
            subs = [(s, self.cursors.get((s.subscriber_id, change.key))) for s in self.subs]
            result = plan_frames(change, subs)
            self.cursors.update({(sid, change.key): c for sid, c in result.cursors.items()})
            for send in result.sends:
                self.kinds.append(send.kind)
                if send.subscriber_id == "full":
                    self.full_view, got = receive(self.full_view, send.frame, rules())
                else:
                    self.delta_view, got = receive(self.delta_view, send.frame, rules())
                assert isinstance(got, Delivered), (send, got)
                if send.reason == "digest":  # a check passed: what it holds is the projector's
                    self.digests += 1
                    digest = orjson.loads(send.frame)["digest"]
                    assert digest == surface_digest(got.surface.content)
                    full_held = self.full_view.get(*change.key)  # the full subscriber's
                    assert full_held is not None and digest == surface_digest(full_held.content)
            key = change.key
            full = self.full_view.get(*key)
            delta = self.delta_view.get(*key)
            assert full is not None and delta is not None
            assert json_equal(delta.content, full.content)
            assert json_equal(full.content, change.new.content)
            assert (delta.trust, delta.deleted, delta.renderable, delta.actions_enabled) == (
                full.trust,
                full.deleted,
                full.renderable,
                full.actions_enabled,
            )
            assert full.trust == change.new.trust
            return full.content
        return None


def run_pair(events: list[RecordedEvent], full_every: int = 1000) -> Pair:
    pair = Pair(full_every)
    for ev in events:
        pair.step(ev)
    return pair


TEXTS = st.text(alphabet="ab/~ 0é", max_size=6)
KEYS = st.sampled_from(["a", "b", "a/b", "~", "~0", "~1", "/", "", "0", "1", "x y"])
FLOATS = st.sampled_from([0.0, -0.0, 1.0, -1.5, 0.1, 1e16])  # -0.0 is 0.0; 1.0 is not 1
VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), FLOATS, TEXTS),
    lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(KEYS, c, max_size=3)),
    max_leaves=8,
)
IDS = st.sampled_from(["root", "a", "b", "c.d", "e_f", "g-h"])


@st.composite
def v2_component(draw: st.DrawFn) -> dict[str, Any]:
    cid = draw(IDS)
    kind = draw(st.sampled_from(["Text", "Column", "Row", "Divider", "CheckBox", "TextField"]))
    if kind == "Text":
        return {"id": cid, "component": "Text", "text": draw(TEXTS)}
    if kind in ("Column", "Row"):
        return {"id": cid, "component": kind, "children": draw(st.lists(IDS, max_size=4))}
    if kind == "Divider":
        return {"id": cid, "component": "Divider"}
    if kind == "CheckBox":
        return {
            "id": cid,
            "component": "CheckBox",
            "label": draw(TEXTS),
            "value": draw(st.booleans()),
        }
    field: dict[str, Any] = {"id": cid, "component": "TextField", "label": draw(TEXTS)}
    if draw(st.booleans()):
        field["value"] = {"path": "/" + draw(st.sampled_from(["a", "a~1b", "n/0"]))}
    return field


DATA_PATHS = st.one_of(
    st.none(),
    st.just("/"),
    st.lists(
        st.sampled_from(["a", "b", "0", "1", "a~1b", "~0", "-", "x"]), min_size=1, max_size=3
    ).map(lambda ts: "/" + "/".join(ts)),
)


@st.composite
def v2_evolution(draw: st.DrawFn) -> list[RecordedEvent]:
    sids = ["s1", "s2"]
    live = {sid: False for sid in sids}
    events = []
    for seq in range(draw(st.integers(1, 12))):
        sid = draw(st.sampled_from(sids))
        messages: list[dict[str, Any]] = []
        if not live[sid]:
            messages.append(create(sid))
            live[sid] = True
        for _ in range(draw(st.integers(0 if messages else 1, 3))):
            what = draw(st.sampled_from(["components", "components", "data", "data", "delete"]))
            if what == "components":
                messages.append(
                    components(sid, *draw(st.lists(v2_component(), min_size=1, max_size=4)))
                )
            elif what == "data":
                body: dict[str, Any] = {}
                path = draw(DATA_PATHS)
                if path is not None:
                    body["path"] = path
                if draw(st.integers(0, 3)):
                    body["value"] = draw(VALUES)
                messages.append(data(sid, **body))
            else:
                messages.append(delete(sid))
                break
        if messages[-1].get("deleteSurface") is not None:
            live[sid] = False
        trust = draw(st.sampled_from(["trusted", "trusted", "untrusted"]))
        partial = draw(st.sampled_from([None, None, {"isPartial": True, "index": 0, "total": -1}]))
        events.append(event(seq, v2(sid, *messages), trust=trust, partial=partial))
    return events


V1_COMPONENTS = st.one_of(
    st.builds(lambda t: {"component": "text", "text": t}, TEXTS),
    st.builds(
        lambda t, lv: {"component": "heading", "text": t, "level": lv}, TEXTS, st.integers(1, 6)
    ),
    st.builds(
        lambda i, lab, r: {"component": "field.text", "id": i, "label": lab, "required": r},
        st.sampled_from(["n", "a/b", "~x"]),
        TEXTS,
        st.booleans(),
    ),
    st.builds(
        lambda lab, opts: {"component": "field.select", "id": "s", "label": lab, "options": opts},
        TEXTS,
        st.lists(st.builds(lambda v: {"value": v, "label": v}, TEXTS), min_size=1, max_size=3),
    ),
    st.builds(
        lambda lab, tgt: {
            "component": "action.button",
            "id": "go",
            "label": lab,
            "action": {"target": tgt},
        },
        TEXTS,
        st.sampled_from(["resume", "exchange"]),
    ),
)


@st.composite
def v1_payload(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if draw(st.booleans()):
        body["reasoning"] = draw(TEXTS)
    body["catalogVersion"] = "0.9.1"
    surface: dict[str, Any] = {}
    if draw(st.booleans()):
        surface["title"] = draw(TEXTS)
    surface["components"] = draw(st.lists(V1_COMPONENTS, max_size=6))
    body["surface"] = surface
    return body


@st.composite
def v1_evolution(draw: st.DrawFn) -> list[RecordedEvent]:
    first = draw(v1_payload())
    events = [event(0, first)]
    current = first
    for seq in range(1, draw(st.integers(1, 10))):
        if draw(st.booleans()):  # an edit of the current surface (the common case)
            nxt = copy.deepcopy(current)
            comps = nxt["surface"]["components"]
            edit = draw(st.sampled_from(["leaf", "insert", "remove", "title"]))
            if edit == "leaf" and comps:
                comps[draw(st.integers(0, len(comps) - 1))]["text"] = draw(TEXTS)
                comps[:] = [
                    c for c in comps if c["component"] in ("text", "heading") or "text" not in c
                ]
            elif edit == "insert":
                comps.insert(draw(st.integers(0, len(comps))), draw(V1_COMPONENTS))
            elif edit == "remove" and comps:
                del comps[draw(st.integers(0, len(comps) - 1))]
            elif "title" in nxt["surface"]:
                del nxt["surface"]["title"]
            else:
                nxt["surface"]["title"] = draw(TEXTS)
        else:
            nxt = draw(v1_payload())
        trust = draw(st.sampled_from(["trusted", "trusted", "untrusted"]))
        events.append(event(seq, nxt, trust=trust))
        current = nxt
    return events


_SETTINGS = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(v2_evolution(), st.integers(1, 6))
def test_subscriber_property_v2_delta_reconstruction_equals_full(
    events: list[RecordedEvent], full_every: int
) -> None:
    run_pair(events, full_every)


@_SETTINGS
@given(v1_evolution(), st.integers(1, 6))
def test_subscriber_property_v1_delta_reconstruction_equals_full(
    events: list[RecordedEvent], full_every: int
) -> None:
    run_pair(events, full_every)


def test_subscriber_property_sends_deltas_at_all() -> None:
    """Guard against a vacuous property: an ordinary evolution really uses delta frames."""
    pair = Pair()
    pair.step(event(0, v2("s", create("s"), components("s", column("root", "t"), text("t")))))
    for i in range(1, 6):
        pair.step(
            event(i, v2("s", components("s", text("t", f"v{i}")), data("s", path="/n", value=i)))
        )
    assert pair.kinds.count("delta") == 5
    checked = Pair(full_every=2)
    checked.step(event(0, v2("s", create("s"), components("s", column("root", "t"), text("t")))))
    for i in range(1, 6):
        checked.step(event(i, v2("s", components("s", text("t", f"v{i}")))))
    assert checked.kinds.count("delta") == 5 and checked.digests == 2  # checks, no full frame
