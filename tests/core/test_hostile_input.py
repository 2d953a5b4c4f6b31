"""Hostile and broken input (issue 8 §2): every one is a dead letter with a stable code, rule and
JSON Pointer, ``validate`` never raises, and the next good record of the run is still admitted.

The limits are app.core.admission.limits (configurable, ``HostPolicy.limits``) and
app.core.admission.intake (fixed: size before parsing, duplicate member names, the integer range,
the nesting ceiling).
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import jsonschema_rs
import orjson
import pytest

from app.core.admission import limits_envelope
from app.core.admission.decision import Admitted, decide
from app.core.admission.fold import apply
from app.core.admission.limits import DEPTH_CEILING, Limits, first_deeper
from app.core.admission.policy import SURFACE_KIND, HostPolicy
from app.core.admission.refusal import CODES
from app.core.admission.validator import Append, Reject, SourceRecord, validate
from app.core.common.pointer import syntax_error
from app.core.projection.patch import diff
from app.core.projection.patch_apply import apply_patch
from app.core.projection.surfaces import Projection, parse_data_path, project, replay
from app.core.runlog.keys import partition_for_run
from app.core.runlog.run_state import RunState
from app.shell.errors import OperatorError
from app.shell.schema_files import load_schema_documents
from app.shell.settings import load_settings
from tests.core.admission_support import (
    NOW,
    POSITIVE,
    RUN,
    V1_SURFACE,
    create_msg,
    data_msg,
    delete_msg,
    envelope,
    record,
    rules,
    v2,
)

PARTITIONS = 6
MESSAGES = "/envelope/payload/messages"
DEAD_LETTER = jsonschema_rs.Draft202012Validator(load_schema_documents()["dead-letter"])
MEG = 10**6


def _source(value: bytes | None, offset: int = 0) -> SourceRecord:
    return SourceRecord(
        "a2ui.admission", partition_for_run(RUN, PARTITIONS), offset, RUN.encode(), value
    )


def _validate(
    value: bytes | None,
    policy: HostPolicy | None = None,
    state: RunState | None = None,
    max_bytes: int = 4 * 1024 * 1024,
) -> Append | Reject:
    out = validate(
        _source(value),
        lambda run_id: state,
        policy or HostPolicy(),
        rules(),
        now=NOW,
        partitions=PARTITIONS,
        max_bytes=max_bytes,
    )
    assert isinstance(out, Append | Reject)
    return out


def _letter(out: Append | Reject) -> dict[str, Any]:
    """The dead letter of a Reject, checked against schemas/dead-letter."""
    assert isinstance(out, Reject), f"admitted: {out}"
    letter: dict[str, Any] = orjson.loads(out.value)
    assert DEAD_LETTER.is_valid(letter), letter
    assert letter["code"] == out.code and letter["code"] in CODES
    assert letter["message"]
    return letter


def _refused(
    value: bytes, code: str, rule: str, path: str, policy: HostPolicy | None = None
) -> dict[str, Any]:
    """``value`` is dead-lettered with (code, rule, path), and the agent is alive afterwards:
    the next good record of the same run is admitted."""
    letter = _letter(_validate(value, policy))
    assert (letter["code"], letter["rule"], letter["path"]) == (code, rule, path), letter
    assert isinstance(_validate(_good(), policy), Append)
    return letter


def _good() -> bytes:
    return orjson.dumps(record(envelope(copy.deepcopy(POSITIVE))))


def _bytes(env: dict[str, Any]) -> bytes:
    return orjson.dumps(record(env))


def _positive_with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """The RFC 0209 positive payload with ``value`` set at ``path`` (keys/indexes)."""
    payload = copy.deepcopy(POSITIVE)
    node: Any = payload
    for token in path[:-1]:
        node = node[token]
    node[path[-1]] = value
    return payload


# --- bytes that never become a record ----------------------------------------------------------


def test_non_utf8_bytes() -> None:
    raw = _good().replace(b'"Launch brief"', b'"Launch \xff\xfe brief"')
    letter = _refused(raw, "record_not_utf8", "record-utf8", "")
    assert letter["details"]["offset"] == raw.index(b"\xff")


@pytest.mark.parametrize("cut", [1, 10, 100, -1])
def test_truncated_json(cut: int) -> None:
    _refused(_good()[:cut], "record_not_json", "record-json", "")


def test_json_nested_10000_deep_is_refused_by_the_parser_ceiling() -> None:
    raw = b'{"runId": "' + RUN.encode() + b'", "envelope": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"
    letter = _refused(raw, "record_limit_exceeded", "depth", "")
    assert letter["details"]["limit"] == DEPTH_CEILING


def test_json_nested_past_what_can_be_recorded_is_refused_at_intake_with_a_pointer() -> None:
    # 300 levels: orjson parses it (1024) but could never encode it (254), and jsonschema_rs
    # would fail to diagnose it (about 255): intake refuses it first and says where.
    inner = b'{"a":' * 300 + b"1" + b"}" * 300
    raw = b'{"runId": "' + RUN.encode() + b'", "envelope": ' + inner + b"}"
    path = "/envelope" + "/a" * (DEPTH_CEILING - 1)
    _refused(raw, "record_limit_exceeded", "depth", path)


def test_a_50_mb_record_is_refused_by_size_before_parsing() -> None:
    # Not JSON either: the size refusal wins, so the parser never ran.
    raw = b"{" * (50 * 1024 * 1024)
    letter = _refused(raw, "record_too_large", "record-size", "")
    assert letter["details"] == {"size": len(raw), "limit": 4 * 1024 * 1024}
    assert letter["original"]["size"] == len(raw)


# --- strings of 10^6 characters ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "path", "rule_code"),
    [
        # open in the schema: the limits step
        (
            ("messages", 2, "updateDataModel", "value", "name"),
            f"{MESSAGES}/2/updateDataModel/value/name",
            ("record_limit_exceeded", "string-chars"),
        ),
        (
            ("messages", 2, "updateDataModel", "value"),
            f"{MESSAGES}/2/updateDataModel/value",
            ("record_limit_exceeded", "string-chars"),
        ),
        (("reasoning",), "/envelope/payload/reasoning", ("record_limit_exceeded", "string-chars")),
        # bounded by the schema (maxLength 4096): the branch refuses it first
        (
            ("messages", 1, "updateComponents", "components", 1, "text"),
            f"{MESSAGES}/1/updateComponents/components/1/text",
            ("envelope_invalid", "branch"),
        ),
    ],
)
def test_a_string_of_a_million_characters(
    where: tuple[Any, ...], path: str, rule_code: tuple[str, str]
) -> None:
    letter = _refused(_bytes(envelope(_positive_with(where, "x" * MEG))), *rule_code, path)
    if rule_code[0] == "record_limit_exceeded":
        assert letter["details"] == {"rule": "string-chars", "limit": 65_536, "size": MEG}
        assert "A2UI_STREAM_MAX_STRING_CHARS" in letter["message"]


def test_an_object_key_of_a_million_characters() -> None:
    payload = _positive_with(("messages", 2, "updateDataModel", "value"), {"k" * MEG: 1})
    _refused(
        _bytes(envelope(payload)),
        "record_limit_exceeded",
        "string-chars",
        f"{MESSAGES}/2/updateDataModel/value",
    )


def test_a_long_string_in_meta_in_a_v1_payload_and_in_a_universal_kind() -> None:
    env = envelope(copy.deepcopy(POSITIVE))
    env["meta"]["traceparent"] = "t" * MEG
    _refused(_bytes(env), "record_limit_exceeded", "string-chars", "/envelope/meta/traceparent")
    v1_host = HostPolicy(schema_versions={SURFACE_KIND: 1})
    v1 = copy.deepcopy(V1_SURFACE)
    v1["surface"]["components"][0]["text"] = "h" * MEG
    letter = _letter(_validate(_bytes(envelope(v1, schema_version=1)), v1_host))
    assert (letter["rule"], letter["path"]) == (
        "string-chars",
        "/envelope/payload/surface/components/0/text",
    )
    error = envelope({"code": "boom", "detail": ["d" * MEG]}, kind="error", schema_version=None)
    _refused(_bytes(error), "record_limit_exceeded", "string-chars", "/envelope/payload/detail/0")


# --- 10,000 components ---------------------------------------------------------------------------


def _texts(count: int, prefix: str = "t") -> list[dict[str, Any]]:
    return [{"id": f"{prefix}{i}", "component": "Text", "text": "x"} for i in range(count)]


def _components(sid: str, components: list[dict[str, Any]]) -> dict[str, Any]:
    return {"version": "v0.9", "updateComponents": {"surfaceId": sid, "components": components}}


def test_ten_thousand_components_in_one_message_are_refused_by_the_schema() -> None:
    payload = v2("s", create_msg("s"), _components("s", _texts(10_000)))
    letter = _refused(
        _bytes(envelope(payload)),
        "envelope_invalid",
        "branch",
        f"{MESSAGES}/1/updateComponents/components",
    )
    assert letter["details"]["branch"] == "payloadV2"  # the schema's maxItems: 512


def test_ten_thousand_components_over_many_messages_are_refused_by_the_limit() -> None:
    messages = [_components("s", _texts(500, f"m{m}-")) for m in range(20)]
    letter = _refused(
        _bytes(envelope(v2("s", create_msg("s"), *messages))),
        "record_limit_exceeded",
        "components",
        f"{MESSAGES}/5/updateComponents/components",  # 2,500 > 2,048 after the fifth
    )
    assert letter["details"] == {"rule": "components", "limit": 2048}


def test_ten_thousand_v1_components_are_refused_by_the_limit() -> None:
    v1 = {
        "catalogVersion": "0.9.1",
        "surface": {"components": [{"component": "text", "text": "x"}] * 10_000},
    }
    host = HostPolicy(schema_versions={SURFACE_KIND: 1})
    letter = _letter(_validate(_bytes(envelope(v1, schema_version=1)), host))
    assert (letter["code"], letter["rule"], letter["path"]) == (
        "record_limit_exceeded",
        "components",
        "/envelope/payload/surface/components",
    )


def test_the_component_limit_is_configurable() -> None:
    payload = v2("s", create_msg("s"), _components("s", _texts(300)))
    assert isinstance(_validate(_bytes(envelope(payload))), Append)
    small = HostPolicy(limits=Limits(max_components=100))
    _refused(
        _bytes(envelope(payload)),
        "record_limit_exceeded",
        "components",
        f"{MESSAGES}/1/updateComponents/components",
        small,
    )


# --- duplicate member names ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("original", "duplicated", "path"),
    [
        (b'{"runId":', b'{"runId":"evil","runId":', "/runId"),
        (b'"schemaVersion":2', b'"schemaVersion":1,"schemaVersion":2', "/envelope/schemaVersion"),
        (
            b'"value":{"name":""}',
            b'"value":{"name":"a","name":""}',
            f"{MESSAGES}/2/updateDataModel/value/name",
        ),
        (
            b'"variant":"h2"',
            b'"variant":"h2","variant":"h2"',
            f"{MESSAGES}/1/updateComponents/components/1/variant",
        ),
    ],
)
def test_duplicate_member_names_are_refused(original: bytes, duplicated: bytes, path: str) -> None:
    raw = _good()
    assert raw.count(original) == 1
    letter = _refused(
        raw.replace(original, duplicated), "record_not_json", "record-duplicate-key", path
    )
    assert letter["details"]["key"] == path.rsplit("/", 1)[-1]


def test_duplicate_member_names_are_found_in_any_spelling() -> None:
    rec = record(envelope(copy.deepcopy(POSITIVE)))
    pretty = json.dumps(rec, indent=2).encode()  # whitespace, ensure_ascii: the exact check
    assert isinstance(_validate(pretty), Append)
    spaced = pretty.replace(b'"runId": ', b'"runId": "evil",\n  "runId": ', 1)
    _refused(spaced, "record_not_json", "record-duplicate-key", "/runId")
    escaped = pretty.replace(b'"runId": ', b'"\\u0072unId": "evil", "runId": ', 1)
    _refused(escaped, "record_not_json", "record-duplicate-key", "/runId")


def test_spellings_orjson_would_write_differently_are_not_false_positives() -> None:
    rec = record(envelope(_positive_with(("messages", 2, "updateDataModel", "value"), {})))
    raw = orjson.dumps(rec).replace(b'"value":{}', b'"value":{"n":1E2,"u":"\\u00e9\\/"}')
    out = _validate(raw)
    assert isinstance(out, Append)
    event = orjson.loads(out.value)
    value = event["payload"]["envelope"]["payload"]["messages"][2]["updateDataModel"]["value"]
    assert value == {"n": 100.0, "u": "é/"}


# --- numbers -------------------------------------------------------------------------------------


def _number_in_data_model(literal: bytes) -> bytes:
    rec = record(envelope(_positive_with(("messages", 2, "updateDataModel", "value"), {"n": 0})))
    raw = orjson.dumps(rec)
    assert raw.count(b'"n":0') == 1
    return raw.replace(b'"n":0', b'"n":' + literal)


@pytest.mark.parametrize(
    ("literal", "path"),
    [
        (b"1e400", ""),  # beyond the double range: the parser refuses it, at a byte offset
        (b"-1E999", ""),
        (b"18446744073709551616", f"{MESSAGES}/2/updateDataModel/value/n"),  # 2^64
        (b"-9223372036854775809", f"{MESSAGES}/2/updateDataModel/value/n"),  # -2^63 - 1
        (b"1" * 30, f"{MESSAGES}/2/updateDataModel/value/n"),  # orjson: a lossy double
        (b"1" * 400, ""),  # orjson: infinity
    ],
)
def test_numbers_beyond_range_are_refused(literal: bytes, path: str) -> None:
    _refused(_number_in_data_model(literal), "record_limit_exceeded", "number-range", path)


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        (b"18446744073709551615", 2**64 - 1),
        (b"-9223372036854775808", -(2**63)),
        (b"1e308", 1e308),
        (b"-0", 0),
    ],
)
def test_numbers_at_the_edge_of_the_range_are_admitted_exactly(literal: bytes, value: Any) -> None:
    out = _validate(_number_in_data_model(literal))
    assert isinstance(out, Append)
    event = orjson.loads(out.value)
    assert event["payload"]["envelope"]["payload"]["messages"][2]["updateDataModel"]["value"] == {
        "n": value
    }


def test_a_huge_schema_version_is_refused_without_crashing_the_dead_letter() -> None:
    # 1e29 is a JSON Schema "integer" (integral), so the floor rule sees it; the dead letter
    # must still encode (it once carried a 97-bit int that orjson cannot write).
    raw = _good().replace(b'"schemaVersion":2', b'"schemaVersion":1e29')
    letter = _refused(raw, "unknown_schema_version", "floor", "/envelope/schemaVersion")
    assert letter["details"]["schemaVersion"] == 1e29


# --- "/" and "~" in data-model paths and keys (RFC 6901) -------------------------------------


@pytest.mark.parametrize(
    ("path", "tokens"),
    [
        ("/a~1b/c~0d", ["a/b", "c~d"]),
        ("/~01", ["~1"]),  # ~0 first would make it "/": RFC 6901 §4 decodes ~1 then ~0
        ("/~10", ["/0"]),
        ("/a//b", ["a", "", "b"]),
        ("/", []),
    ],
)
def test_data_model_paths_decode_per_rfc6901(path: str, tokens: list[str]) -> None:
    assert parse_data_path(path) == tokens
    assert syntax_error(path) is None


def test_escaped_paths_and_keys_reach_the_materialized_surface_unharmed() -> None:
    payload = v2(
        "s",
        create_msg("s"),
        data_msg("s", path="/a~1b/c~0d", value={"x/y": 1, "p~q": [2]}),
        data_msg("s", path="/~01", value="tilde-one"),
    )
    out = _validate(_bytes(envelope(payload)))
    assert isinstance(out, Append)
    state, changes = project(Projection(), orjson.loads(out.value))
    (change,) = changes
    assert change.warnings == ()
    model = change.new.content["dataModel"]
    assert model == {"a/b": {"c~d": {"x/y": 1, "p~q": [2]}}, "~1": "tilde-one"}
    # A delta to these keys escapes them, and applies back (RFC 6902 over RFC 6901 paths).
    newer = {**model, "a/b": {"c~d": {"x/y": 2, "p~q": [2]}}}
    patch = diff(model, newer)
    assert patch == [{"op": "replace", "path": "/a~1b/c~0d/x~1y", "value": 2}]
    assert apply_patch(model, patch) == newer


@pytest.mark.parametrize("path", ["/a~2b", "/a~", "/~x/y", "~"])
def test_a_malformed_escape_in_a_data_model_path_is_refused(path: str) -> None:
    payload = v2("s", create_msg("s"), data_msg("s", path="/" + path.lstrip("/"), value=1))
    letter = _refused(
        _bytes(envelope(payload)),
        "envelope_invalid",
        "data-path",
        f"{MESSAGES}/1/updateDataModel/path",
    )
    assert "RFC 6901" in letter["message"]


# --- the children graph --------------------------------------------------------------------------


def _tree(*components: dict[str, Any]) -> bytes:
    """One envelope creating surface ``s`` with ``components``, 500 per message (the schema's
    maxItems is 512)."""
    chunks = [list(components[i : i + 500]) for i in range(0, len(components), 500)]
    messages = [_components("s", chunk) for chunk in chunks]
    return _bytes(envelope(v2("s", create_msg("s"), *messages)))


# The component walk (chain depth) is off by default (docs/admission.md "Limits"); cycles are
# refused whatever it says, across envelopes too (app.core.admission.children).
WALK = HostPolicy(limits=Limits(max_children_depth=64))


def test_a_component_that_is_its_own_child() -> None:
    letter = _refused(
        _tree({"id": "root", "component": "Column", "children": ["x", "root"]}),
        "envelope_invalid",
        "children-cycle",
        f"{MESSAGES}/1/updateComponents/components/0/children/1",
        WALK,
    )
    assert letter["details"] == {
        "rule": "children-cycle",
        "componentId": "root",
        "childId": "root",
        "cycle": ["root"],
    }
    _refused(
        _tree(
            {"id": "root", "component": "Column", "children": ["b"]},
            {
                "id": "b",
                "component": "Button",
                "child": "b",
                "action": {"event": {"name": "resume"}},
            },
        ),
        "envelope_invalid",
        "children-cycle",
        f"{MESSAGES}/1/updateComponents/components/1/child",
        WALK,
    )


def test_a_cycle_through_several_components() -> None:
    letter = _letter(
        _validate(
            _tree(
                {"id": "root", "component": "Column", "children": ["a"]},
                {"id": "a", "component": "Row", "children": ["b", "t"]},
                {"id": "b", "component": "Card", "child": "c"},
                {"id": "c", "component": "Column", "children": ["a"]},
                {"id": "t", "component": "Text", "text": "leaf"},
            ),
            WALK,
        )
    )
    assert (letter["code"], letter["rule"]) == ("envelope_invalid", "children-cycle")
    assert letter["details"]["componentId"] in {"a", "b", "c"}
    assert letter["path"].startswith(f"{MESSAGES}/1/updateComponents/components/")


def _chain(length: int) -> list[dict[str, Any]]:
    """``length`` components, each the only child of the one before: c0 -> c1 -> ... (Cards)."""
    chain = [{"id": f"c{i}", "component": "Card", "child": f"c{i + 1}"} for i in range(length - 1)]
    return [*chain, {"id": f"c{length - 1}", "component": "Text", "text": "bottom"}]


def test_a_deeply_recursive_children_graph() -> None:
    letter = _refused(
        _tree(*_chain(2000)),
        "record_limit_exceeded",
        "children-depth",
        f"{MESSAGES}/4/updateComponents/components/436",  # c1935 -> c1936 -> ... c1999: 65
        WALK,
    )
    assert letter["details"] == {"rule": "children-depth", "limit": 64, "componentId": "c1936"}


@pytest.mark.parametrize("length", [3, 4, 20, 64])
def test_a_chain_at_the_limit_is_admitted_and_one_more_is_not(length: int) -> None:
    limits = Limits(max_children_depth=length)
    assert isinstance(_validate(_tree(*_chain(length)), HostPolicy(limits=limits)), Append)
    letter = _letter(_validate(_tree(*_chain(length + 1)), HostPolicy(limits=limits)))
    assert (letter["rule"], letter["details"]["limit"]) == ("children-depth", length)


@pytest.mark.parametrize("policy", [HostPolicy(), WALK], ids=["default", "walk"])
def test_a_cycle_closed_by_a_later_envelope_is_refused(policy: HostPolicy) -> None:
    """Issue 14 item 3: root -> a now, a -> root later. The run state holds each surface's
    children graph, so the closing envelope is refused, walk or no walk."""
    first = _validate(
        _tree(
            {"id": "root", "component": "Column", "children": ["a"]},
            {"id": "a", "component": "Text", "text": "fine"},
        ),
        policy,
    )
    assert isinstance(first, Append)
    closing = envelope(
        v2("s", _components("s", [{"id": "a", "component": "Card", "child": "root"}]))
    )
    letter = _letter(_validate(_bytes(closing), policy, state=first.state))
    assert (letter["code"], letter["rule"], letter["path"]) == (
        "envelope_invalid",
        "children-cycle",
        f"{MESSAGES}/0/updateComponents/components/0/child",
    )
    assert letter["details"]["cycle"] == ["root", "a"] or letter["details"]["cycle"] == [
        "a",
        "root",
    ]
    assert "earlier envelopes" in letter["message"]
    # a later envelope that breaks the path is fine, and so is a deleted and re-created surface
    fine = envelope(v2("s", _components("s", [{"id": "a", "component": "Card", "child": "t"}])))
    assert isinstance(_validate(_bytes(fine), policy, state=first.state), Append)
    again = envelope(
        v2(
            "s",
            delete_msg("s"),
            create_msg("s"),
            _components("s", [{"id": "a", "component": "Card", "child": "root"}]),
        )
    )
    assert isinstance(_validate(_bytes(again), policy, state=first.state), Append)


def test_a_cyclic_log_cannot_crash_the_fold_or_the_projection() -> None:
    """A log an older host recorded may hold a cycle: the fold and the projection keep
    components as a map by id and never walk the graph."""
    first = _validate(
        _tree(
            {"id": "root", "component": "Column", "children": ["a"]},
            {"id": "a", "component": "Text", "text": "fine"},
        ),
    )
    assert isinstance(first, Append)
    event = orjson.loads(first.value)
    closing = copy.deepcopy(event)
    closing["sequence"] = 1
    closing["eventId"] = event["eventId"][:-1] + "1"
    closing["payload"]["envelope"]["payload"]["messages"] = [
        _components("s", [{"id": "a", "component": "Card", "child": "root"}])
    ]
    state = apply(apply(RunState.initial(event["runId"]), event), closing)
    assert state.surfaces["s"].children["a"] == ("root",)
    surfaces = replay([event, closing])
    (surface,) = surfaces.surfaces.values()
    assert surface.content["components"]["a"]["child"] == "root" and surface.renderable
    assert orjson.loads(orjson.dumps(surface.content)) == surface.content  # what a frame carries


@pytest.mark.parametrize(
    "components",
    [
        [{"id": "root", "component": "Column", "children": ["root"]}],
        [
            {"id": "root", "component": "Column", "children": ["a"]},
            {"id": "a", "component": "Card", "child": "root"},
        ],
    ],
    ids=["own-child", "two-cycle"],
)
def test_by_default_a_cycle_within_one_envelope_is_refused(
    components: list[dict[str, Any]],
) -> None:
    letter = _letter(_validate(_tree(*components)))
    assert (letter["code"], letter["rule"]) == ("envelope_invalid", "children-cycle")


def test_by_default_deep_chains_are_admitted_and_harmless() -> None:
    out = _validate(_tree(*_chain(2000)))
    assert isinstance(out, Append)
    _, changes = project(Projection(), orjson.loads(out.value))
    (change,) = changes
    assert change.warnings == ()
    assert orjson.loads(orjson.dumps(change.new.content)) == change.new.content


# --- depth of open values, configuration -------------------------------------------------------


def _nested(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"n": value}
    return value


def test_depth_of_a_data_model_value() -> None:
    # The value sits at level 7 of the record: 57 more levels are admitted by default, 58 not.
    ok = _positive_with(("messages", 2, "updateDataModel", "value"), _nested(58))
    assert isinstance(_validate(_bytes(envelope(ok))), Append)
    deep = _positive_with(("messages", 2, "updateDataModel", "value"), _nested(59))
    letter = _refused(
        _bytes(envelope(deep)),
        "record_limit_exceeded",
        "depth",
        f"{MESSAGES}/2/updateDataModel/value" + "/n" * 58,
    )
    assert "A2UI_STREAM_MAX_DEPTH" in letter["message"]


def test_depth_of_a_button_context_array() -> None:
    deep: Any = "x"
    for _ in range(80):
        deep = [deep]
    payload = _positive_with(
        ("messages", 1, "updateComponents", "components", 4, "action", "event", "context", "v"),
        deep,
    )
    letter = _refused(
        _bytes(envelope(payload)),
        "record_limit_exceeded",
        "depth",
        f"{MESSAGES}/1/updateComponents/components/4/action/event/context/v" + "/0" * 53,
        WALK,
    )
    assert letter["details"]["limit"] == 64
    # without the component walk, only the ceiling bounds it: 80 levels are recorded
    assert isinstance(_validate(_bytes(envelope(payload))), Append)


def test_the_rfc0209_example_passes_the_tightest_limits() -> None:
    tight = Limits(max_depth=16, max_string_chars=1024, max_components=16, max_children_depth=3)
    outcome = decide(
        record(envelope(copy.deepcopy(POSITIVE))), None, HostPolicy(limits=tight), rules(), now=NOW
    )
    assert isinstance(outcome, Admitted)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_depth": 15},
        {"max_depth": DEPTH_CEILING + 1},
        {"max_string_chars": 0},
        {"max_components": 0},
        {"max_children_depth": 2},
        {"max_children_depth": 1},
        {"max_children_depth": -1},
    ],
)
def test_limits_out_of_range_are_operator_errors(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        Limits(**kwargs)


def test_limits_come_from_the_environment() -> None:
    assert load_settings({}).limits == Limits()
    env = {
        "A2UI_STREAM_MAX_DEPTH": "32",
        "A2UI_STREAM_MAX_STRING_CHARS": "2048",
        "A2UI_STREAM_MAX_COMPONENTS": "100",
        "A2UI_STREAM_MAX_CHILDREN_DEPTH": "8",
    }
    assert load_settings(env).limits == Limits(32, 2048, 100, 8)
    with pytest.raises(OperatorError, match="A2UI_STREAM_MAX_DEPTH=251 is out of range"):
        load_settings({"A2UI_STREAM_MAX_DEPTH": "251"})
    short = HostPolicy(limits=load_settings(env).limits)
    payload = _positive_with(("messages", 2, "updateDataModel", "value", "name"), "y" * 2049)
    _refused(
        _bytes(envelope(payload)),
        "record_limit_exceeded",
        "string-chars",
        f"{MESSAGES}/2/updateDataModel/value/name",
        short,
    )


def test_the_component_walk_is_off_by_default_and_configurable() -> None:
    assert Limits().max_children_depth == 0 and load_settings({}).limits.max_children_depth == 0
    chain = _tree(*_chain(65))
    assert isinstance(_validate(chain), Append)
    assert _letter(_validate(chain, WALK))["rule"] == "children-depth"
    self_child = _tree({"id": "root", "component": "Column", "children": ["root"]})
    for policy in (HostPolicy(), WALK):  # cycles are refused either way
        assert _letter(_validate(self_child, policy))["rule"] == "children-cycle"
    # the other limits hold either way
    deep = _positive_with(("messages", 2, "updateDataModel", "value"), _nested(59))
    assert _letter(_validate(_bytes(envelope(deep))))["rule"] == "depth"
    assert load_settings({"A2UI_STREAM_MAX_CHILDREN_DEPTH": "64"}).limits == WALK.limits
    with pytest.raises(OperatorError, match="A2UI_STREAM_MAX_CHILDREN_DEPTH=2 must be 0"):
        load_settings({"A2UI_STREAM_MAX_CHILDREN_DEPTH": "2"})


def test_the_screen_knows_the_schemas_component_bound() -> None:
    # plainly_within skips counting when the messages cannot hold more than max_components
    schema = load_schema_documents()["a2ui-surface-v2-profile"]
    body = schema["$defs"]["updateComponents"]["properties"]["updateComponents"]
    assert body["properties"]["components"]["maxItems"] == limits_envelope._SCHEMA_MAX_COMPONENTS


def test_first_deeper_names_the_first_container_past_the_level() -> None:
    assert first_deeper({"a": [{"b": {}}]}, 3) == "/a/0/b"
    assert first_deeper({"a": [{"b": {}}]}, 4) is None
    assert first_deeper("scalar", 1) is None


def test_policies_with_other_limits_compare_and_replace() -> None:
    policy = replace(HostPolicy(), limits=Limits(max_depth=20))
    assert policy.limits.max_depth == 20 and HostPolicy().limits == Limits()
