"""Fuzzing near the profile boundary (issue 8 §3), with hypothesis.

Valid admission records (the RFC 0209 positive example, a v1 surface, a universal kind) are
mutated the way a careless or hostile producer would: an excluded component swapped in, a
property added or removed, a type changed, messages reordered or repeated, an obscured
TextField, a functionCall action, a foreign catalogId, a cycle, long strings, deep values, broken
bytes. Every one goes through ``app.core.admission.validator.validate`` and:

- nothing raises;
- the outcome is an Append or a Reject whose dead letter has a registered code and matches
  schemas/dead-letter;
- whatever is admitted is inside the profile: the recorded payload passes its branch again
  (``check_v2``/``check_v1``), and no excluded component, functionCall, obscured TextField or
  foreign catalog is in it.

CI runs ``max_examples`` 300 per test; ``A2UI_STREAM_FUZZ_EXAMPLES`` raises it (the soak mode
uses 100,000).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import jsonschema_rs
import orjson
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from app.core.admission.decision import Admitted, decide
from app.core.admission.limits import Limits
from app.core.admission.policy import SURFACE_KIND, HostPolicy
from app.core.admission.refusal import CODES
from app.core.admission.validator import Append, Duplicate, Reject, SourceRecord, validate
from app.core.common.examples import BASIC_CATALOG
from app.core.runlog.keys import partition_for_run
from app.core.runlog.run_state import RunState
from app.shell.schema_files import load_schema_documents
from tests.core.admission_support import NOW, POSITIVE, RUN, V1_SURFACE, envelope, record, rules

EXAMPLES = int(os.environ.get("A2UI_STREAM_FUZZ_EXAMPLES", "300"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PARTITIONS = 6
DEAD_LETTER = jsonschema_rs.Draft202012Validator(load_schema_documents()["dead-letter"])
EXCLUDED = ("Image", "Video", "AudioPlayer", "Icon", "List", "Tabs", "Modal", "Slider")
PROFILE = (
    "Text",
    "TextField",
    "Button",
    "Row",
    "Column",
    "Card",
    "CheckBox",
    "ChoicePicker",
    "DateTimeInput",
    "Divider",
)
SID = POSITIVE["surfaceId"]

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["", "root", "resume", "exchange", "/name", "~", "a/b", *EXCLUDED])
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(max_size=8) | st.sampled_from(["call", "path", "component", "id", "children"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


# --- walking a JSON value ------------------------------------------------------------------------


def _slots(node: Any) -> Iterator[tuple[Any, Any]]:
    """Every (container, key or index) below ``node``: a place a mutation can write."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            for key, value in current.items():
                yield current, key
                stack.append(value)
        elif isinstance(current, list):
            for index, value in enumerate(current):
                yield current, index
                stack.append(value)


def _containers(node: Any, kind: type) -> list[Any]:
    found = [node] if isinstance(node, kind) else []
    found += [c[k] for c, k in _slots(node) if isinstance(c[k], kind)]
    return found


def _components(payload: Any) -> list[dict[str, Any]]:
    """The v2 components of ``payload`` (any updateComponents message that has a list)."""
    out: list[dict[str, Any]] = []
    messages = payload.get("messages") if isinstance(payload, dict) else None
    for message in messages if isinstance(messages, list) else ():
        body = message.get("updateComponents") if isinstance(message, dict) else None
        components = body.get("components") if isinstance(body, dict) else None
        if isinstance(components, list):
            out += [c for c in components if isinstance(c, dict)]
    return out


# --- mutations (each edits the admission record in place) ----------------------------------------

Mutation = Callable[[st.DataObject, dict[str, Any]], None]


def _messages(payload: Any) -> list[Any]:
    """The payload's messages, or [] once an earlier mutation broke them."""
    messages = payload.get("messages") if isinstance(payload, dict) else None
    return messages if isinstance(messages, list) else []


def _payload(rec: dict[str, Any]) -> Any:
    """The payload, or None once an earlier mutation broke the way to it."""
    env = rec.get("envelope")
    return env.get("payload") if isinstance(env, dict) else None


def swap_in_excluded_component(data: st.DataObject, rec: dict[str, Any]) -> None:
    components = _components(_payload(rec))
    if components:
        target = data.draw(st.sampled_from(components))
        target["component"] = data.draw(st.sampled_from(EXCLUDED))
        extra = data.draw(st.sampled_from([{}, {"url": "https://x.test/a.png"}, {"name": "home"}]))
        target.update(extra)


def rename_component(data: st.DataObject, rec: dict[str, Any]) -> None:
    components = _components(_payload(rec))
    if components:
        target = data.draw(st.sampled_from(components))
        target["component"] = data.draw(st.sampled_from(PROFILE + EXCLUDED + ("Blink", "")))


def add_property(data: st.DataObject, rec: dict[str, Any]) -> None:
    targets = _containers(rec, dict)
    target = data.draw(st.sampled_from(targets))
    key = data.draw(
        st.sampled_from(["onClick", "script", "url", "sendDataModel", "iconUrl", "x"])
        | st.text(min_size=1, max_size=6)
    )
    target[key] = data.draw(JSON)


def remove_property(data: st.DataObject, rec: dict[str, Any]) -> None:
    slots = [(c, k) for c, k in _slots(rec) if isinstance(c, dict)]
    if slots:
        container, key = data.draw(st.sampled_from(slots))
        del container[key]


def change_type(data: st.DataObject, rec: dict[str, Any]) -> None:
    slots = list(_slots(rec))
    if slots:
        container, key = data.draw(st.sampled_from(slots))
        container[key] = data.draw(JSON)


def reorder_messages(data: st.DataObject, rec: dict[str, Any]) -> None:
    payload = _payload(rec)
    messages = payload.get("messages") if isinstance(payload, dict) else None
    if isinstance(messages, list):
        messages[:] = data.draw(st.permutations(messages))


def repeat_message(data: st.DataObject, rec: dict[str, Any]) -> None:
    payload = _payload(rec)
    messages = payload.get("messages") if isinstance(payload, dict) else None
    if isinstance(messages, list) and messages:
        messages.insert(
            data.draw(st.integers(0, len(messages))),
            copy.deepcopy(data.draw(st.sampled_from(messages))),
        )


def obscure_text_field(data: st.DataObject, rec: dict[str, Any]) -> None:
    for component in _components(_payload(rec)):
        if component.get("component") == "TextField":
            component["variant"] = data.draw(st.sampled_from(["obscured", "shortText", "longText"]))


def function_call_action(data: st.DataObject, rec: dict[str, Any]) -> None:
    for component in _components(_payload(rec)):
        if component.get("component") == "Button":
            component["action"] = data.draw(
                st.sampled_from(
                    [
                        {"functionCall": {"call": "openUrl", "args": {"url": "https://x.test"}}},
                        {"functionCall": "openUrl"},
                        {"event": {"name": "navigate"}},
                        {"event": {"name": "exchange", "context": {"v": [[["deep"]]]}}},
                        {"event": {"name": "resume"}, "functionCall": {"call": "x"}},
                        # FunctionCalls inside array literals (issue 14 item 1: web_core
                        # evaluates array items holding `call`)
                        {"event": {"name": "resume", "context": {"x": [{"call": "openUrl"}]}}},
                        {
                            "event": {
                                "name": "exchange",
                                "context": {"x": [1, [{"a": {"call": "now", "args": {}}}]]},
                            }
                        },
                        {"event": {"name": "resume", "context": {"x": [{"functionCall": "f"}]}}},
                        {"event": {"name": "resume", "context": {"x": [{"to": "Mom"}]}}},
                    ]
                )
            )


def function_value(data: st.DataObject, rec: dict[str, Any]) -> None:
    components = _components(_payload(rec))
    if components:
        target = data.draw(st.sampled_from(components))
        key = data.draw(st.sampled_from(["text", "label", "value", "checks"]))
        target[key] = data.draw(
            st.sampled_from(
                [
                    {"call": "formatString", "args": {"value": "${/name}"}},
                    [{"condition": {"call": "email", "args": {}}, "message": "m"}],
                    [
                        {
                            "condition": {"call": "required", "args": {"value": {"call": "x"}}},
                            "message": "m",
                        }
                    ],
                ]
            )
        )


def foreign_catalog(data: st.DataObject, rec: dict[str, Any]) -> None:
    payload = _payload(rec)
    if isinstance(payload, dict):
        foreign = data.draw(
            st.sampled_from(["https://evil.test/catalog.json", BASIC_CATALOG + "?v=2", ""])
        )
        targets = [payload] + [
            m["createSurface"]
            for m in _messages(payload)
            if isinstance(m, dict) and isinstance(m.get("createSurface"), dict)
        ]
        data.draw(st.sampled_from(targets))["catalogId"] = foreign


def children_graph(data: st.DataObject, rec: dict[str, Any]) -> None:
    components = _components(_payload(rec))
    ids = [c["id"] for c in components if isinstance(c.get("id"), str)]
    parents = [c for c in components if "children" in c or "child" in c]
    if ids and parents:
        target = data.draw(st.sampled_from(parents))
        if "children" in target:
            target["children"] = data.draw(st.lists(st.sampled_from(ids), max_size=4))
        else:
            target["child"] = data.draw(st.sampled_from(ids))


def data_model(data: st.DataObject, rec: dict[str, Any]) -> None:
    payload = _payload(rec)
    messages = payload.get("messages") if isinstance(payload, dict) else None
    if not isinstance(messages, list):
        return
    deep: Any = data.draw(SCALARS)
    for _ in range(data.draw(st.sampled_from([0, 5, 56, 57, 58, 120]))):
        deep = {"k": deep} if data.draw(st.booleans()) else [deep]
    body: dict[str, Any] = {"surfaceId": SID}
    path = data.draw(
        st.none() | st.sampled_from(["/", "/a~1b", "/~0", "/a~2", "/x/~", "/0/1", "/name"])
    )
    if path is not None:
        body["path"] = path
    if data.draw(st.booleans()):
        body["value"] = data.draw(
            st.sampled_from([deep, "s" * 65_536, "s" * 65_537, {"k" * 65_537: 1}])
        )
    messages.insert(
        data.draw(st.integers(0, len(messages))), {"version": "v0.9", "updateDataModel": body}
    )


def other_affordances(data: st.DataObject, rec: dict[str, Any]) -> None:
    """theme.iconUrl, sendDataModel, a data-model template as children."""
    payload = _payload(rec)
    creates = [
        m["createSurface"]
        for m in _messages(payload)
        if isinstance(m, dict) and isinstance(m.get("createSurface"), dict)
    ]
    rows = [c for c in _components(payload) if "children" in c]
    choice = data.draw(st.sampled_from(["iconUrl", "sendDataModel", "template"]))
    if choice == "template" and rows:
        data.draw(st.sampled_from(rows))["children"] = {"componentId": "h", "path": "/items"}
    elif creates:
        create = data.draw(st.sampled_from(creates))
        if choice == "iconUrl":
            create["theme"] = {"primaryColor": "#112233", "iconUrl": "https://x.test/i.png"}
        else:
            create["sendDataModel"] = True


def schema_version(data: st.DataObject, rec: dict[str, Any]) -> None:
    if isinstance(rec.get("envelope"), dict):
        rec["envelope"]["schemaVersion"] = data.draw(
            st.sampled_from([0, 1, 2, 3, 2.0, -1, True, "2", 1e29])
        )


def surface_id(data: st.DataObject, rec: dict[str, Any]) -> None:
    slots = [(c, k) for c, k in _slots(_payload(rec)) if k == "surfaceId"]  # v2 only
    if slots:
        container, key = data.draw(st.sampled_from(slots))
        container[key] = data.draw(st.sampled_from(["other", "", "a b", SID, "x" * 129]))


MUTATIONS: tuple[Mutation, ...] = (
    swap_in_excluded_component,
    rename_component,
    add_property,
    remove_property,
    change_type,
    reorder_messages,
    repeat_message,
    obscure_text_field,
    function_call_action,
    function_value,
    foreign_catalog,
    children_graph,
    data_model,
    other_affordances,
    schema_version,
    surface_id,
)


# --- the checks ----------------------------------------------------------------------------------


def _fixed(env: dict[str, Any]) -> dict[str, Any]:
    # the same bytes on every run: hypothesis replays draws that depend on them
    env["envelopeId"], env["correlationId"] = "env-fuzz", "corr-fuzz"
    return record(env)


LIMITS = (
    Limits(),  # the defaults: no component walk
    Limits(max_children_depth=64),  # the component walk on
    Limits(max_depth=16, max_string_chars=1024, max_components=16, max_children_depth=3),
)


def _base(data: st.DataObject) -> tuple[dict[str, Any], HostPolicy]:
    which = data.draw(st.sampled_from(["v2", "v2", "v2", "v1", "universal"]))
    limits = data.draw(st.sampled_from(LIMITS))
    if which == "v1":
        policy = HostPolicy(schema_versions={SURFACE_KIND: 1}, limits=limits)
        return _fixed(envelope(copy.deepcopy(V1_SURFACE), schema_version=1)), policy
    if which == "universal":
        payload = {"code": "boom", "detail": {"surface": copy.deepcopy(POSITIVE)}}
        error = envelope(payload, kind="error", schema_version=None)
        return _fixed(error), HostPolicy(limits=limits)
    # SR-1 (issue 14 item 2): now and then a registered secret that is, or is inside, an
    # identifier or a text of the example, so the identifier refusal and the redacted-record
    # re-check are fuzzed too; the oracle then also looks for the secret in every output
    secret = data.draw(st.sampled_from([None, None, None, *SECRETS]))
    secrets = {RUN: (("fz", secret),)} if secret is not None else {}
    return _fixed(envelope(copy.deepcopy(POSITIVE))), HostPolicy(limits=limits, secrets=secrets)


# strings of the RFC 0209 example: its surfaceId, a component id, a label, a check message
SECRETS = ("approve-brief", "submit_label", "Product name", "Required", "-brief")


def _live_state(policy: HostPolicy) -> RunState:
    """A run that already recorded an envelope: surface ``approve-brief`` live (so updates pass
    the fold), or a v1 surface on a v1 host."""
    if policy.floor(SURFACE_KIND) == 1:
        first = envelope(copy.deepcopy(V1_SURFACE), schema_version=1)
    else:
        first = envelope(copy.deepcopy(POSITIVE))
    # (recorded before any secret was registered: the example's own ids may be the secret)
    created = decide(record(first), None, replace(policy, secrets={}), rules(), now=NOW)
    assert isinstance(created, Admitted)
    return created.state


def _validate(raw: bytes, policy: HostPolicy, state: RunState | None) -> Any:
    source = SourceRecord(
        "a2ui.admission", partition_for_run(RUN, PARTITIONS), 7, RUN.encode(), raw
    )
    return validate(source, lambda _: state, policy, rules(), now=NOW, partitions=PARTITIONS)


def _encode(rec: dict[str, Any]) -> bytes:
    """The record's bytes; integers past 64 bits (which orjson will not write) as the standard
    library writes them, so intake meets them too."""
    try:
        return orjson.dumps(rec)
    except TypeError:
        return json.dumps(rec).encode()


def _nodes(node: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every node below a component with its path, array items at any depth included: a
    renderer evaluates an array literal's items that hold ``call`` or ``path`` (@a2ui/web_core
    0.11.0 data-context.js "1b. Arrays"; docs/admission.md decision 11)."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _nodes(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _nodes(value, (*path, index))


def _is_check_condition(path: tuple[Any, ...]) -> bool:
    return len(path) == 3 and path[0] == "checks" and path[2] == "condition"


def _assert_in_profile(event: dict[str, Any]) -> None:
    """What was recorded is inside the profile (RFC 0209 §B; openwop-a2ui.md §4)."""
    recorded = event["payload"]
    payload = recorded["envelope"].get("payload")
    if event["type"] != SURFACE_KIND:
        return  # universal kinds are recorded unchecked (docs/admission.md decision 1)
    if recorded["version"] == 2:
        assert rules().check_v2(payload) is None
        assert payload["catalogId"] == BASIC_CATALOG
        for message in payload["messages"]:
            create = message.get("createSurface")
            if create is not None:
                assert create["catalogId"] == BASIC_CATALOG and "sendDataModel" not in create
                assert "iconUrl" not in create.get("theme", {})
        # Components, not data: a data-model value may hold {"component": "Image"} as plain
        # JSON (the fuzzer found that one); it is never rendered as a component.
        for component in _components(payload):
            assert component["component"] in PROFILE
            assert not (
                component["component"] == "TextField" and component.get("variant") == "obscured"
            )
            assert not isinstance(component.get("children"), dict)  # no template
            for path, node in _nodes(component):
                if not isinstance(node, dict):
                    continue
                assert "functionCall" not in node, path
                if "call" in node:  # only checks[].condition, and only `required`
                    assert _is_check_condition(path) and node["call"] == "required", path
    else:
        assert rules().check_v1(payload) is None


def _assert_outcome(out: Any, policy: HostPolicy | None = None) -> str:
    assert isinstance(out, Append | Reject | Duplicate), out
    for _sid, value in policy.secrets_for(RUN) if policy is not None else ():
        if len(value) >= 8 and isinstance(out, Append | Reject):  # §14: never in any output
            assert value.encode() not in out.value and value.encode() not in (out.key or b"")
    if isinstance(out, Reject):
        letter = orjson.loads(out.value)
        assert letter["code"] in CODES and letter["code"] == out.code
        assert DEAD_LETTER.is_valid(letter), letter
        return str(out.code)
    if isinstance(out, Append):
        _assert_in_profile(orjson.loads(out.value))
        return "admitted"
    return "deduplicated"


@FUZZ
@given(st.data())
def test_mutated_envelopes_are_admitted_in_profile_or_refused_with_a_code(
    data: st.DataObject,
) -> None:
    rec, policy = _base(data)
    for mutation in data.draw(st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=4)):
        mutation(data, rec)
    state = _live_state(policy) if data.draw(st.booleans()) else None
    event(_assert_outcome(_validate(_encode(rec), policy, state), policy))


@FUZZ
@given(st.data())
def test_mutated_bytes_are_admitted_in_profile_or_refused_with_a_code(data: st.DataObject) -> None:
    rec, policy = _base(data)
    raw = bytearray(_encode(rec))
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.integers(0, len(raw)))
        edit = data.draw(st.sampled_from(["flip", "cut", "insert", "duplicate", "number"]))
        if edit == "flip" and where < len(raw):
            raw[where] = data.draw(st.integers(0, 255))
        elif edit == "cut":
            del raw[where : where + data.draw(st.integers(1, 40))]
        elif edit == "insert":
            raw[where:where] = data.draw(
                st.sampled_from([b"[", b"{", b'"a":1,', b",", b"\\u0000", b"\xc3", b" \n"])
            )
        elif edit == "duplicate":
            text = bytes(raw)
            start = text.find(b'"', where)
            end = text.find(b",", start) if start != -1 else -1
            if start != -1 and end != -1:
                raw[end:end] = b"," + text[start:end]  # the same member again
        else:
            raw[where:where] = data.draw(
                st.sampled_from([b"1e400", b"18446744073709551616", b"-0", b"1E2", b"0.1"])
            )
    event(_assert_outcome(_validate(bytes(raw), policy, None), policy))
