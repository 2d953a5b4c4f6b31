"""The run event stream (app.core.projection.sse_frames): SSE encoding round-tripped through a tiny
WHATWG parser; RFC 0114 v1 delta transport, with the conformance suite's reconstruction leg (§16c)
server-free, every full-frame reason, and the law ``reconstruct(full, deltas) == last payload``;
sticky taint on every event shown (``present``), agreeing with the projection's trust.
"""

from __future__ import annotations

import copy
import re
from functools import cache
from pathlib import Path
from typing import Any, cast

import jsonpatch
import orjson
import pytest
from jsonschema import Draft202012Validator

from app.core.admission.decision import event_id_for
from app.core.admission.payload_rules import PayloadRules
from app.core.projection import sse_frames
from app.core.projection.patch_apply import apply_patch
from app.core.projection.patch_equal import json_equal
from app.core.projection.sse_frames import (
    DELTA_EVENT,
    FULL_REASONS,
    NO_TAINT,
    DeltaCursor,
    delta_event_doc,
    keep_alive,
    next_output,
    present,
    retry_hint,
    sse_frame,
    step,
    surface_of,
)
from app.core.projection.surfaces import V1_SURFACE_ID, Projection, project
from app.core.runlog.events import RecordedEvent
from app.shell.schema_files import load_schema_documents
from tests.core import projection_support as ps
from tests.core.projection_support import FULL_SURFACE_V0

UPSTREAM = Path(__file__).resolve().parents[2].parent / "shared" / "upstream" / "openwop"
RUN = "tenant-a/run-0000000000000042"
RULES = PayloadRules.from_documents(load_schema_documents())
RECORDED = Draft202012Validator(load_schema_documents()["recorded-event"])
# Our own RFC 0114 patch rules: the projection frame's `patch` (closed add/remove/replace ops,
# minItems 1). There is no standalone RFC 0114 frame schema in schemas/.
OUR_PATCH = Draft202012Validator(load_schema_documents()["projection-frame"]["properties"]["patch"])

CONFIRMED = "Confirmed — see you then."
INVITE = {"component": "text", "text": "A calendar invite is on its way."}


@cache
def upstream(name: str) -> Draft202012Validator:
    path = UPSTREAM / "schemas" / name
    if not path.is_file():
        pytest.skip(f"upstream reference file not found at {path}")
    return Draft202012Validator(orjson.loads(path.read_bytes()))


def recorded(
    sequence: int,
    body: Any,
    *,
    trust: str = "trusted",
    version: int = 1,
    node_id: str | None = "gate",
    partial: bool | None = None,
) -> RecordedEvent:
    """A recorded v1 surface event (schemas/recorded-event), as admission writes it."""
    envelope: dict[str, Any] = {
        "type": "ui.a2ui-surface",
        "schemaVersion": version,
        "envelopeId": f"env-{sequence}",
        "correlationId": f"corr-{sequence}",
        "payload": body,
        "meta": {"source": "ai-generation", "ts": "2026-01-01T00:00:00Z"},
    }
    if trust == "untrusted":
        envelope["meta"]["contentTrust"] = "untrusted"
    if partial is not None:
        envelope["partial"] = {"isPartial": partial, "index": 0, "total": -1}
    if node_id is not None:
        envelope["nodeId"] = node_id
    event: dict[str, Any] = {
        "eventId": event_id_for(RUN, sequence),
        "runId": RUN,
        "sequence": sequence,
        "type": "ui.a2ui-surface",
        "schemaVersion": 1,
        "timestamp": "2026-01-01T00:00:00Z",
    }
    if node_id is not None:
        event["nodeId"] = node_id
    event["causationId"] = envelope["correlationId"]
    event["contentTrust"] = trust
    event["payload"] = {"envelope": envelope, "version": version, "trust": trust}
    return cast(RecordedEvent, event)  # built key by key, in the order admission writes them


def lifecycle(sequence: int, kind: str = "run.started") -> RecordedEvent:
    return {
        "eventId": event_id_for(RUN, sequence),
        "runId": RUN,
        "sequence": sequence,
        "type": kind,
        "schemaVersion": 1,
        "timestamp": "2026-01-01T00:00:00Z",
        "payload": {"status": "running"},
    }


def with_components(*edits: tuple[int, Any], append: Any = None) -> dict[str, Any]:
    """FULL_SURFACE_V0 with ``components[i]`` replaced (``value`` a dict) or its text set."""
    body = copy.deepcopy(FULL_SURFACE_V0)
    items = body["surface"]["components"]
    for index, value in edits:
        if isinstance(value, dict):
            items[index] = value
        else:
            items[index]["text"] = value
    if append is not None:
        items.append(append)
    return body


def held_payload(event: RecordedEvent) -> Any:
    return event["payload"]["envelope"]["payload"]


# --- SSE encoding ---------------------------------------------------------------------------


def parse_sse(stream: bytes) -> list[dict[str, Any]]:
    """A tiny WHATWG "interpret an event stream" parser: CRLF/CR/LF lines, ``:`` comments,
    one leading space stripped, data lines joined with LF, a blank line dispatches (an empty
    data buffer dispatches nothing). Returns dispatched events and ``retry`` settings."""
    out: list[dict[str, Any]] = []
    data: list[str] = []
    name, last_id = "", None
    for line in re.split(r"\r\n|\r|\n", stream.decode("utf-8")):
        if line == "":
            if data:
                out.append({"id": last_id, "event": name or "message", "data": "\n".join(data)})
            data, name = [], ""
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
        elif field == "id":
            last_id = value
        elif field == "retry" and value.isdigit():
            out.append({"retry": int(value)})
    return out


@pytest.mark.parametrize(
    ("event", "data", "id_", "expected"),
    [
        (
            "ui.a2ui-surface",
            b'{"a":1}',
            7,
            {"id": "7", "event": "ui.a2ui-surface", "data": '{"a":1}'},
        ),
        ("run.started", b'{"a":1}', None, {"id": None, "event": "run.started", "data": '{"a":1}'}),
        ("x", b"a\nb\r\nc\rd", 0, {"id": "0", "event": "x", "data": "a\nb\nc\nd"}),
        ("x", b"line\n", 1, {"id": "1", "event": "x", "data": "line\n"}),
        ("x", b"", 2, {"id": "2", "event": "x", "data": ""}),
        ("x", b" lead", 3, {"id": "3", "event": "x", "data": " lead"}),
        ("x", b"a:b: c", 4, {"id": "4", "event": "x", "data": "a:b: c"}),
    ],
)
def test_sse_frame_round_trips(event: str, data: bytes, id_: int | None, expected: Any) -> None:
    frame = sse_frame(event, data, id_)
    assert parse_sse(frame) == [expected]
    assert frame.endswith(b"\n\n")


def test_sse_frame_wire_layout() -> None:
    assert sse_frame("t", b'{"a":1}', 3) == b'id: 3\nevent: t\ndata: {"a":1}\n\n'
    assert sse_frame("t", b"a\nb") == b"event: t\ndata: a\ndata: b\n\n"


@pytest.mark.parametrize("name", ["evil\nid: 999", "evil\r\ndata: x", "evil\rretry: 1"])
def test_sse_frame_event_name_cannot_inject_a_field(name: str) -> None:
    frame = sse_frame(name, b"{}", 5)
    assert frame.count(b"\n") == 4 and b"\r" not in frame
    (parsed,) = parse_sse(frame)
    assert parsed["id"] == "5" and parsed["data"] == "{}"
    assert parsed["event"] == name.replace("\r", "\ufffd").replace("\n", "\ufffd")


def test_keep_alive_and_retry_hint() -> None:
    assert keep_alive() == b": keep-alive\n\n"
    assert parse_sse(keep_alive()) == []
    assert retry_hint(1500) == b"retry: 1500\n\n"
    assert parse_sse(retry_hint(1500) + sse_frame("t", b"1", 0)) == [
        {"retry": 1500},
        {"id": "0", "event": "t", "data": "1"},
    ]
    with pytest.raises(ValueError):
        retry_hint(-1)


# --- §16c reconstruction leg, server-free ---------------------------------------------------

SUITE_STREAM = [
    recorded(0, FULL_SURFACE_V0),
    recorded(1, with_components((1, CONFIRMED))),
    recorded(2, with_components((1, CONFIRMED), append=INVITE)),
]


def run_stream(events: list[RecordedEvent]) -> list[sse_frames.StreamOutput]:
    cursor, outputs = DeltaCursor(), []
    for event in events:
        cursor, output = next_output(cursor, event, orjson.dumps(event), RULES)
        outputs.append(output)
    return outputs


def test_suite_stream_is_one_full_then_the_suites_two_deltas() -> None:
    for event in SUITE_STREAM:
        assert RECORDED.is_valid(event) and RULES.check_v1(held_payload(event)) is None
    first, second, third = run_stream(SUITE_STREAM)
    assert (first.kind, first.event_name, first.sequence) == ("full", "ui.a2ui-surface", 0)
    assert first.data == orjson.dumps(SUITE_STREAM[0])
    assert [o.kind for o in (second, third)] == ["delta", "delta"]
    assert {o.event_name for o in (second, third)} == {DELTA_EVENT}
    assert [second.sequence, third.sequence] == [1, 2]
    frames = [orjson.loads(o.data) for o in (second, third)]
    assert frames == [
        {
            "surfaceRef": SUITE_STREAM[1]["eventId"],
            "catalogVersion": "0.9.1",
            "patch": [{"op": "replace", "path": "/surface/components/1/text", "value": CONFIRMED}],
        },
        {
            "surfaceRef": SUITE_STREAM[2]["eventId"],
            "catalogVersion": "0.9.1",
            "patch": [{"op": "add", "path": "/surface/components/4", "value": INVITE}],
        },
    ]
    assert list(frames[0]) == ["surfaceRef", "catalogVersion", "patch"]


def test_suite_frames_reconstruct_with_both_appliers() -> None:
    outputs = run_stream(SUITE_STREAM)
    for before, after, output in zip(SUITE_STREAM, SUITE_STREAM[1:], outputs[1:], strict=False):
        frame = orjson.loads(output.data)
        assert frame["catalogVersion"] == held_payload(before)["catalogVersion"]
        assert OUR_PATCH.is_valid(frame["patch"])
        ours = apply_patch(held_payload(before), frame["patch"])
        theirs = jsonpatch.apply_patch(held_payload(before), frame["patch"])
        assert ours == theirs == held_payload(after)
        assert RULES.check_v1(ours) is None


def test_suite_frames_validate_upstream() -> None:
    frame_schema = upstream("a2ui-surface-delta-frame.schema.json")
    payload_schema = upstream("envelopes/ui.a2ui-surface.schema.json")
    run_event = upstream("run-event.schema.json")
    for event, output in zip(SUITE_STREAM[1:], run_stream(SUITE_STREAM)[1:], strict=True):
        frame = orjson.loads(output.data)
        assert frame_schema.is_valid(frame)
        assert not payload_schema.is_valid(frame)  # §16c leg 10: a frame is not a payload
        doc = delta_event_doc(event, frame)
        assert run_event.is_valid(doc) and frame_schema.is_valid(doc["payload"])
    assert payload_schema.is_valid(FULL_SURFACE_V0)


def test_delta_event_doc_is_the_recorded_event_with_the_frame_as_payload() -> None:
    base = recorded(0, FULL_SURFACE_V0, trust="untrusted")
    event = recorded(1, with_components((1, CONFIRMED)), trust="untrusted")
    result = step(step(DeltaCursor(), base, RULES).cursor, event, RULES)
    assert result.reason == "delta" and result.frame is not None
    doc = delta_event_doc(event, result.frame)
    assert doc == {
        "eventId": event["eventId"],
        "runId": RUN,
        "sequence": 1,
        "type": DELTA_EVENT,
        "schemaVersion": 1,
        "timestamp": "2026-01-01T00:00:00Z",
        "nodeId": "gate",
        "causationId": "corr-1",
        "contentTrust": "untrusted",
        "payload": result.frame,
    }
    bare = cast(
        RecordedEvent, {k: v for k, v in event.items() if k not in ("nodeId", "causationId")}
    )
    assert set(doc) - set(delta_event_doc(bare, result.frame)) == {"nodeId", "causationId"}
    # trust is the meet of what the event states: a root that says trusted does not win
    assert (
        delta_event_doc({**event, "contentTrust": "trusted"}, result.frame)["contentTrust"]
        == "untrusted"
    )


# --- full or delta: every reason --------------------------------------------------------------

CHANGED = with_components((1, CONFIRMED))
IFRAME = {"component": "iframe", "src": "https://evil.example/"}
ON_CLICK = {"component": "heading", "text": "Hi", "onClick": "alert(1)"}
REORDERED = {"surface": FULL_SURFACE_V0["surface"], "catalogVersion": "0.9.1"}
META_ONLY_UNTRUSTED = recorded(1, CHANGED)
META_ONLY_UNTRUSTED["payload"]["envelope"]["meta"]["contentTrust"] = "untrusted"
NO_EVENT_ID = cast(  # malformed: no eventId
    RecordedEvent, {k: v for k, v in recorded(1, CHANGED).items() if k != "eventId"}
)
V2_BODY = {"version": "v0.9", "catalogId": "c", "surfaceId": "s", "messages": []}
BOOL_VERSION = recorded(1, CHANGED)
BOOL_VERSION["payload"]["version"] = True

REASON_CASES: list[tuple[str, RecordedEvent | None, RecordedEvent, str]] = [
    ("nothing delivered yet", None, recorded(0, FULL_SURFACE_V0), "first"),
    ("a leaf changed", recorded(0, FULL_SURFACE_V0), recorded(1, CHANGED), "delta"),
    ("version 0 is the v1 branch", recorded(0, FULL_SURFACE_V0, version=0),
     recorded(1, CHANGED, version=0), "delta"),
    ("catalog changed", recorded(0, {**FULL_SURFACE_V0, "catalogVersion": "0.9.0"}),
     recorded(1, CHANGED), "catalog"),
    ("identical payload", recorded(0, FULL_SURFACE_V0),
     recorded(1, copy.deepcopy(FULL_SURFACE_V0)), "empty"),
    ("only key order differs", recorded(0, FULL_SURFACE_V0), recorded(1, REORDERED), "empty"),
    ("trusted then untrusted", recorded(0, FULL_SURFACE_V0),
     recorded(1, CHANGED, trust="untrusted"), "trust"),
    ("untrusted then trusted", recorded(0, FULL_SURFACE_V0, trust="untrusted"),
     recorded(1, CHANGED), "trust"),
    ("untrusted in meta only", recorded(0, FULL_SURFACE_V0), META_ONLY_UNTRUSTED, "trust"),
    ("untrusted both times", recorded(0, FULL_SURFACE_V0, trust="untrusted"),
     recorded(1, CHANGED, trust="untrusted"), "delta"),
    ("another gate", recorded(0, FULL_SURFACE_V0), recorded(1, CHANGED, node_id="other"),
     "binding"),
    ("no gate any more", recorded(0, FULL_SURFACE_V0), recorded(1, CHANGED, node_id=None),
     "binding"),
    ("final then partial", recorded(0, FULL_SURFACE_V0, partial=False),
     recorded(1, CHANGED, partial=True), "binding"),
    ("partial then final", recorded(0, FULL_SURFACE_V0, partial=True),
     recorded(1, CHANGED), "binding"),
    ("partial both times", recorded(0, FULL_SURFACE_V0, partial=True),
     recorded(1, CHANGED, partial=True), "delta"),
    ("out-of-catalog component", recorded(0, FULL_SURFACE_V0),
     recorded(1, with_components(append=IFRAME)), "invalid"),
    ("heading with onClick", recorded(0, FULL_SURFACE_V0),
     recorded(1, with_components((0, ON_CLICK))), "invalid"),
    ("no eventId for surfaceRef", recorded(0, FULL_SURFACE_V0), NO_EVENT_ID, "invalid"),
    ("a v2 surface", recorded(0, FULL_SURFACE_V0), recorded(1, V2_BODY, version=2), "other"),
    ("a boolean version", recorded(0, FULL_SURFACE_V0), BOOL_VERSION, "other"),
    ("run lifecycle", recorded(0, FULL_SURFACE_V0), lifecycle(1), "other"),
]  # fmt: skip


def test_reason_table_covers_every_payload_independent_reason() -> None:
    covered = {reason for *_, reason in REASON_CASES}
    assert covered >= set(FULL_REASONS) - {"unverified"}  # unverified: its own test below


@pytest.mark.parametrize(
    ("before", "event", "reason"),
    [case[1:] for case in REASON_CASES],
    ids=[case[0] for case in REASON_CASES],
)
def test_step_reason_and_output(
    before: RecordedEvent | None, event: RecordedEvent, reason: str
) -> None:
    cursor = DeltaCursor() if before is None else step(DeltaCursor(), before, RULES).cursor
    result = step(cursor, event, RULES)
    assert result.reason == reason
    assert (result.frame is not None) == (reason == "delta")
    data = orjson.dumps(event, option=orjson.OPT_INDENT_2)  # not what we would write
    after, output = next_output(cursor, event, data, RULES)
    assert after == result.cursor and output.sequence == event["sequence"]
    if reason == "delta":
        assert (output.kind, output.event_name) == ("delta", DELTA_EVENT)
        assert orjson.loads(output.data) == result.frame
    else:
        expected = "other" if reason == "other" else "full"
        assert (output.kind, output.event_name) == (expected, event["type"])
        assert output.data is data  # byte-identical: the recorded event, untouched
    if reason == "other":  # the cursor ignores everything but v1 surfaces
        assert after is cursor
    else:  # the cursor always advances to the new payload
        assert after.event_id == event.get("eventId")
        assert after.payload is held_payload(event)


def fake_diff(monkeypatch: pytest.MonkeyPatch, patch: Any) -> None:
    monkeypatch.setattr(sse_frames, "verified_diff", lambda old, new: patch)


def move_first_two(body: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(body)
    items = out["surface"]["components"]
    items[0], items[1] = items[1], items[0]
    return out


@pytest.mark.parametrize(
    ("new", "patch", "reason"),
    [
        (CHANGED, None, "unverified"),
        (CHANGED, [], "empty"),
        # SECURITY: a patch that applies but does not give exactly the new payload
        (CHANGED, [{"op": "replace", "path": "/surface/components/1/text", "value": "X"}],
         "unverified"),
        (CHANGED, [{"op": "remove", "path": "/surface/components/9"}], "unverified"),
        # reproduces the new payload, but move is outside the ops we send
        (move_first_two(FULL_SURFACE_V0),
         [{"op": "move", "from": "/surface/components/0", "path": "/surface/components/1"}],
         "unverified"),
        (CHANGED, [{"op": "replace", "path": "/surface/components/1/text", "value": CONFIRMED}],
         "delta"),
    ],
)  # fmt: skip
def test_every_delta_is_reverified(
    monkeypatch: pytest.MonkeyPatch, new: dict[str, Any], patch: Any, reason: str
) -> None:
    if patch and patch[0]["op"] == "move":  # the move really does reproduce it
        assert jsonpatch.apply_patch(FULL_SURFACE_V0, patch) == new
    cursor = step(DeltaCursor(), recorded(0, FULL_SURFACE_V0), RULES).cursor
    fake_diff(monkeypatch, patch)
    assert step(cursor, recorded(1, new), RULES).reason == reason


def test_out_of_catalog_base_then_valid_update_is_a_delta_to_what_the_consumer_holds() -> None:
    outputs = run_stream(
        [
            recorded(0, FULL_SURFACE_V0),
            recorded(1, with_components(append=IFRAME)),
            recorded(2, with_components(append=INVITE)),
        ]
    )
    assert [o.kind for o in outputs] == ["full", "full", "delta"]
    frame = orjson.loads(outputs[2].data)
    assert apply_patch(with_components(append=IFRAME), frame["patch"]) == with_components(
        append=INVITE
    )


def test_other_events_pass_through_and_the_chain_continues_across_them() -> None:
    v2_event = recorded(2, V2_BODY, version=2)
    events = [recorded(0, FULL_SURFACE_V0), lifecycle(1), v2_event, recorded(3, CHANGED)]
    cursor = DeltaCursor()
    kinds = []
    for event in events:
        data = b"  " + orjson.dumps(event) + b"\n"
        before = cursor
        cursor, output = next_output(cursor, event, data, RULES)
        kinds.append(output.kind)
        if output.kind == "other":
            assert output.data is data and output.event_name == event["type"]
            assert cursor is before
    assert kinds == ["full", "other", "other", "delta"]


def test_outputs_depend_only_on_the_last_v1_event_and_the_event() -> None:
    """The shell's memo key (previous v1 eventId, eventId) is complete."""
    e1, e2 = recorded(1, CHANGED), recorded(2, with_components((1, CONFIRMED), append=INVITE))
    histories = [
        [recorded(0, FULL_SURFACE_V0), e1, lifecycle(5)],
        [e1],
        [recorded(0, with_components(append=IFRAME), trust="untrusted"), e1],
    ]
    results = []
    for history in histories:
        cursor = DeltaCursor()
        for event in history:
            cursor = step(cursor, event, RULES).cursor
        assert cursor.event_id == e1["eventId"]
        after, output = next_output(cursor, e2, orjson.dumps(e2), RULES)
        results.append((output, after))
    assert all(result == results[0] for result in results)
    assert results[0][0].kind == "delta"


# --- law: reconstruct(full, deltas) == every payload, under random component edits -------------

try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - hypothesis is a dev dependency
    st = None  # type: ignore[assignment]

if st is not None:
    _text = st.text(max_size=8)
    _id = st.sampled_from(["a", "b", "name", "go"])
    COMPONENT = st.one_of(
        st.builds(lambda t, n: {"component": "heading", "text": t, "level": n},
                  _text, st.integers(1, 6)),
        st.builds(lambda t: {"component": "text", "text": t}, _text),
        st.builds(lambda i, t, r: {"component": "field.text", "id": i, "label": t, "required": r},
                  _id, _text, st.booleans()),
        st.builds(lambda i, t: {"component": "field.date", "id": i, "label": t}, _id, _text),
        st.builds(lambda i, t, o: {"component": "field.select", "id": i, "label": t,
                                   "options": [{"value": v, "label": v} for v in o]},
                  _id, _text, st.lists(_text, min_size=1, max_size=3)),
        st.builds(lambda i, t, d: {"component": "field.checkbox", "id": i, "label": t,
                                   "default": d}, _id, _text, st.booleans()),
        st.builds(lambda i, t, g: {"component": "action.button", "id": i, "label": t,
                                   "action": {"target": g}},
                  _id, _text, st.sampled_from(["resume", "exchange"])),
    )  # fmt: skip
    EDIT = st.one_of(
        st.tuples(st.just("text"), st.integers(0, 20), _text),
        st.tuples(st.just("insert"), st.integers(0, 20), COMPONENT),
        st.tuples(st.just("delete"), st.integers(0, 20)),
        st.tuples(st.just("replace"), st.integers(0, 20), COMPONENT),
        st.tuples(st.just("title"), st.none() | _text),
        st.tuples(st.just("reasoning"), st.none() | _text),
        st.tuples(st.just("trust"), st.sampled_from(["trusted", "untrusted"])),
        st.tuples(st.just("same")),
    )

    def edited(body: dict[str, Any], edit: tuple[Any, ...]) -> dict[str, Any]:
        out = copy.deepcopy(body)
        items = out["surface"]["components"]
        kind, *args = edit
        if kind == "insert":
            items.insert(args[0] % (len(items) + 1), args[1])
        elif kind in ("text", "delete", "replace") and items:
            index = args[0] % len(items)
            if kind == "delete":
                del items[index]
            elif kind == "replace":
                items[index] = args[1]
            elif "text" in items[index]:
                items[index]["text"] = args[1]
            else:
                items[index]["label"] = args[1]
        elif kind in ("title", "reasoning"):
            target = out["surface"] if kind == "title" else out
            target.pop(kind, None)
            if args[0] is not None:
                target[kind] = args[0]
        return out

    @settings(max_examples=150, deadline=None)
    @given(st.lists(COMPONENT, max_size=5), st.lists(EDIT, min_size=1, max_size=12))
    def test_reconstruction_law(base: list[dict[str, Any]], edits: list[Any]) -> None:
        body: dict[str, Any] = {"catalogVersion": "0.9.1", "surface": {"components": base}}
        trust = "trusted"
        events = [recorded(0, body)]
        for sequence, edit in enumerate(edits, start=1):
            body = edited(body, edit)
            trust = edit[1] if edit[0] == "trust" else trust
            events.append(recorded(sequence, body, trust=trust))
        frame_schema = upstream_frame_or_none()
        cursor, held, held_trust, taint, sticky = DeltaCursor(), None, None, NO_TAINT, "trusted"
        for event in events:
            assert RULES.check_v1(held_payload(event)) is None  # the generator stays in catalog
            sticky = "untrusted" if event["contentTrust"] == "untrusted" else sticky
            taint, shown, data, _trust = present(taint, event, orjson.dumps(event))
            cursor, output = next_output(cursor, shown, data, RULES)
            if output.kind == "full":
                full = orjson.loads(output.data)
                held, held_trust = held_payload(full), full["contentTrust"]
            else:
                frame = orjson.loads(output.data)
                assert OUR_PATCH.is_valid(frame["patch"])
                assert frame_schema is None or frame_schema.is_valid(frame)
                assert frame["surfaceRef"] == event["eventId"]
                ours = apply_patch(held, frame["patch"])
                assert jsonpatch.apply_patch(held, frame["patch"]) == ours
                held = ours
            assert json_equal(held, held_payload(event))
            assert held_trust == sticky  # a delta never drops untrusted, nothing launders it

else:  # pragma: no cover

    def test_reconstruction_law() -> None:
        pytest.skip("hypothesis is not installed")


# --- sticky taint: every event shown after a taint says untrusted (issue 14 item 7) ------------


def v2_event(sequence: int, sid: str, *messages: Any, trust: str = "trusted") -> RecordedEvent:
    event = ps.event(sequence, ps.v2(sid, *messages), run_id=RUN, trust=trust)
    event["eventId"] = event_id_for(RUN, sequence)
    return event


def v1_at(sequence: int, trust: str = "trusted", text: str | None = None) -> RecordedEvent:
    body = with_components((1, text or f"text {sequence}"))
    return recorded(sequence, body, trust=trust)


def meta_only(sequence: int) -> RecordedEvent:
    """Root and payload say trusted, the envelope's meta says untrusted (never recorded by our
    admission, but a reader must take the meet, §7)."""
    event = v1_at(sequence)
    event["payload"]["envelope"]["meta"]["contentTrust"] = "untrusted"
    return event


def no_root_trust(event: RecordedEvent) -> RecordedEvent:
    return cast(RecordedEvent, {k: v for k, v in event.items() if k != "contentTrust"})


U, T = "untrusted", "trusted"
CREATE_A = (ps.create("a"), ps.components("a", ps.text("root")))
CREATE_B = (ps.create("b"), ps.components("b", ps.text("root")))
UPDATE = ps.components("a", ps.text("root", "later"))
UPDATE_B = ps.components("b", ps.text("root", "later"))

TAINT_CASES: list[tuple[str, list[RecordedEvent], list[str | None]]] = [
    ("v1: untrusted, then trusted updates", [v1_at(0), v1_at(1, U), v1_at(2), v1_at(3)],
     [T, U, U, U]),
    ("v1: the first envelope untrusted", [v1_at(0, U), v1_at(1)], [U, U]),
    ("v1: untrusted in meta only taints", [v1_at(0), meta_only(1), v1_at(2)], [T, U, U]),
    ("v1: across run lifecycle events", [lifecycle(0), v1_at(1, U), lifecycle(2, "node.started"),
     v1_at(3)], [None, U, None, U]),
    ("v2: per surface", [v2_event(0, "a", *CREATE_A), v2_event(1, "b", *CREATE_B),
     v2_event(2, "a", UPDATE, trust=U), v2_event(3, "a", UPDATE), v2_event(4, "b", UPDATE_B)],
     [T, T, U, U, T]),
    ("v2: a delete and a re-create keep it", [v2_event(0, "a", *CREATE_A, trust=U),
     v2_event(1, "a", ps.delete("a")), v2_event(2, "a", *CREATE_A)], [U, U, U]),
    ("v2: without a root contentTrust", [no_root_trust(v2_event(0, "a", *CREATE_A, trust=U)),
     no_root_trust(v2_event(1, "a", UPDATE))], [U, U]),
    ("v1 and v2 taint apart", [v1_at(0, U), v2_event(1, "a", *CREATE_A), v1_at(2),
     v2_event(3, "a", UPDATE, trust=U), v2_event(4, "a", UPDATE)], [U, T, U, U, U]),
    ("trusted all along", [v1_at(0), v2_event(1, "a", *CREATE_A), v1_at(2)], [T, T, T]),
]  # fmt: skip


def shown_stream(events: list[RecordedEvent]) -> list[Any]:
    taint, out = NO_TAINT, []
    for event in events:
        shown = present(taint, event, orjson.dumps(event))
        taint = shown.taint
        out.append(shown)
    return out


@pytest.mark.parametrize(
    ("events", "expected"),
    [case[1:] for case in TAINT_CASES],
    ids=[case[0] for case in TAINT_CASES],
)
def test_every_event_of_a_tainted_surface_is_shown_untrusted(
    events: list[RecordedEvent], expected: list[str | None]
) -> None:
    recorded_bytes = [orjson.dumps(e) for e in events]
    snapshot = copy.deepcopy(events)
    for event, data, shown, trust in zip(
        events, recorded_bytes, shown_stream(events), expected, strict=True
    ):
        assert shown.trust == trust
        assert orjson.loads(shown.data) == shown.event  # the bytes are the event shown
        says_so = trust == U and event.get("contentTrust", U) == event["payload"]["trust"] == U
        if trust in (None, T) or says_so:
            assert shown.event is event and shown.data == data  # untouched, byte for byte
            continue
        # untrusted: both trust fields say so; nothing else changed, envelope as recorded
        assert shown.event["payload"]["trust"] == U
        assert shown.event.get("contentTrust", U) == U
        assert ("contentTrust" in shown.event) == (
            "contentTrust" in event or surface_of(event) == V1_SURFACE_ID
        )
        assert shown.event["payload"]["envelope"] is event["payload"]["envelope"]
        rest = {k: v for k, v in shown.event.items() if k not in ("contentTrust", "payload")}
        assert rest == {k: v for k, v in event.items() if k not in ("contentTrust", "payload")}
        assert list(shown.event)[: len(event)] == list(event)  # the recorded key order
        assert orjson.dumps(event["payload"]["envelope"]) in shown.data  # §8 byte equality
    assert events == snapshot  # present never writes into the recorded event


PROJECTION_CASES = [case for case in TAINT_CASES if "meta only" not in case[0]]


@pytest.mark.parametrize("events", [case[1] for case in PROJECTION_CASES],
                         ids=[case[0] for case in PROJECTION_CASES])  # fmt: skip
def test_shown_trust_is_the_projections_sticky_trust(events: list[RecordedEvent]) -> None:
    """One rule, two homes: what a reader is shown equals the materialized surface's trust
    (app.core.projection.surfaces, which the values mode and every subscriber frame use). The
    projection reads the root and ``payload.trust``, not the envelope's meta, so the meta-only case
    (which admission never records: it writes the normalized trust in both) is left out."""
    projection = Projection()
    for event, shown in zip(events, shown_stream(events), strict=True):
        projection, changes = project(projection, event)
        assert [c.new.trust for c in changes] == ([] if shown.trust is None else [shown.trust])


def test_a_resumed_reader_gets_the_taint_of_the_whole_prefix() -> None:
    """Last-Event-ID / afterSequence: the prefix the connection skipped still taints."""
    events = [v1_at(0), v1_at(1, U), v1_at(2), v2_event(3, "a", *CREATE_A, trust=U), v1_at(4)]
    whole = shown_stream(events)
    for cut in range(len(events)):
        taint = shown_stream(events[:cut])[-1].taint if cut else NO_TAINT
        resumed = []
        for event in events[cut:]:
            shown = present(taint, event, orjson.dumps(event))
            taint = shown.taint
            resumed.append(shown.data)
        assert resumed == [s.data for s in whole[cut:]]


def test_after_a_taint_the_delta_chain_never_sends_a_trusted_full() -> None:
    """The RFC 0114 stream, composed as the shell does (present, then next_output): the frame
    after an untrusted event is a delta (no trust change) or an untrusted full, and its JSON
    document says untrusted."""
    events = [v1_at(0), v1_at(1, U), v1_at(2), v1_at(3, text="other"), v1_at(4)]
    cursor, taint, kinds = DeltaCursor(), NO_TAINT, []
    for event in events:
        taint, shown, data, _trust = present(taint, event, orjson.dumps(event))
        before = cursor
        cursor, output = next_output(cursor, shown, data, RULES)
        kinds.append(output.kind)
        assert cursor.trust == (T if event["sequence"] == 0 else U)
        if output.kind == "full":
            assert orjson.loads(output.data)["contentTrust"] == cursor.trust
        else:
            frame = step(before, shown, RULES).frame
            assert frame is not None and delta_event_doc(shown, frame)["contentTrust"] == U
    assert kinds == ["full", "full", "delta", "delta", "delta"]


def upstream_frame_or_none() -> Draft202012Validator | None:
    path = UPSTREAM / "schemas" / "a2ui-surface-delta-frame.schema.json"
    return upstream("a2ui-surface-delta-frame.schema.json") if path.is_file() else None
