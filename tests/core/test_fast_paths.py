"""STYLE rule 12: every fast path of the core sits beside the readable reference it shortcuts,
and a law ties the two. For every generated input the fast path answers what its reference
answers, or the weaker relation its docstring states:

=============================================  =================================================
fast path                                      law against its reference
=============================================  =================================================
limits_envelope.plainly_within                 True => limits_envelope.check_envelope finds none
limits.scan_open_value                         = limits.walk_open_value (on containers)
fold.walk_kinds_memoized                       = fold.walk_kinds
fold.status_after_memoized                     = fold.status_after (= walk_kinds' end, if legal)
fold.single_node_set_shared                    = fold.single_node_set
fold.kinds_of                                  = message_kind of each message ("unknown": none)
apply_with's first-emission Correlation        = fold.correlation_entry(None, kind, rec, None)
fold.apply_with (given what the state holds)   = fold.apply
patch_equal.json_equal_reference               = ``==`` of the values tagged with their JSON types
patch_equal.json_equal, json_equal_in_c,       = patch_equal.json_equal_reference
  json_equal_bytes_first
patch_equal.loosely_equal                      reference => loosely_equal => ``==``
patch_equal.equal_run                          = the run of pairs equal by ``==`` (loose) or the
                                                 reference (strict), leading or trailing
=============================================  =================================================
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from app.core.admission.cross_field import kinds_and_cross_field
from app.core.admission.decision import Admitted, decide
from app.core.admission.fold import (
    MESSAGE_KINDS,
    apply,
    apply_with,
    correlation_entry,
    kinds_of,
    message_kind,
    single_node_set,
    single_node_set_shared,
    status_after,
    status_after_memoized,
    walk_kinds,
    walk_kinds_memoized,
)
from app.core.admission.limits import Limits, scan_open_value, walk_open_value
from app.core.admission.limits_envelope import check_envelope, plainly_within
from app.core.admission.policy import HostPolicy
from app.core.projection.patch_equal import (
    equal_run,
    json_equal,
    json_equal_bytes_first,
    json_equal_in_c,
    json_equal_reference,
    loosely_equal,
)
from app.core.runlog.run_state import EMPTY, Correlation, Recorded, RunState
from tests.core.admission_support import (
    NOW,
    RUN,
    create_msg,
    data_msg,
    delete_msg,
    envelope,
    rules,
    v2,
)
from tests.core.test_admission_properties import envelopes

# --- JSON values with the traps of JSON equality -------------------------------------------------

SCALARS = (
    st.none()
    | st.booleans()
    | st.sampled_from([0, 1, -1, 0.0, -0.0, 1.0, True, False])
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
)
# strings around the lengths of the limits below (max_string_chars 24; meta.ts has 20 characters
# and more with a fraction)
SHORT = st.text(alphabet="ab~/", max_size=6) | st.sampled_from([23, 24, 25, 26, 31]).map(
    lambda n: ("a/~" * n)[:n]
)
STRING_OR_SCALAR = st.booleans().flatmap(lambda string: SHORT if string else SCALARS)
KEYS = st.sampled_from(["a", "b", "c", "", "~", "/"]) | st.text(max_size=4)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=24,
)


def _twin(value: Any) -> Any:
    """A value Python finds equal to ``value`` and JSON does not (or -0.0 for 0.0, which both
    find equal), or None."""
    if type(value) is bool:
        return int(value)
    if type(value) is int and abs(value) < 2**53:
        return float(value)
    if type(value) is float and value == 0:
        return -value
    if type(value) is float and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return None


def _tagged(value: Any) -> Any:
    """``value`` with its JSON type beside every scalar: ``==`` of tagged values is JSON
    equality (bool, int and float are different JSON numbers or literals; objects unordered)."""
    if type(value) is dict:
        return ("object", {key: _tagged(item) for key, item in value.items()})
    if type(value) is list:
        return ("array", [_tagged(item) for item in value])
    return (type(value).__name__, value)


def _places(value: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in ``value``."""
    found: list[tuple[Any, Any]] = []
    stack = [value]
    while stack:
        node = stack.pop()
        slots = (
            node.items() if type(node) is dict else enumerate(node) if type(node) is list else ()
        )
        for key, item in slots:
            found.append((node, key))
            stack.append(item)
    return found


@st.composite
def json_pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    """Two JSON values, mostly equal or nearly so: the same object, a copy, a copy sharing the
    first level, or a copy with one trap (``True`` for ``1``, ``1.0`` for ``1``, ``-0.0`` for
    ``0.0``, keys reordered, a member changed, added or removed), or two unrelated values."""
    a = draw(JSON)
    how = draw(st.sampled_from(["same", "copy", "shared", "trap", "trap", "trap", "other"]))
    if how == "same":
        return a, a
    if how == "other":
        return a, draw(JSON)
    if how == "shared":
        return a, (copy.copy(a) if type(a) in (dict, list) else a)
    b = copy.deepcopy(a)
    if how == "copy":
        return a, b
    places = _places(b)
    if not places:
        twin = _twin(b)
        return a, (twin if twin is not None else draw(JSON))
    node, key = draw(st.sampled_from(places))
    item = node[key]
    trap = draw(st.sampled_from(["twin", "reorder", "change", "grow", "shrink"]))
    if trap == "twin" and _twin(item) is not None:
        node[key] = _twin(item)
    elif trap == "reorder" and type(node) is dict:
        items = list(node.items())
        node.clear()
        node.update(reversed(items))
    elif trap == "grow" and type(node) is dict:
        node[draw(KEYS)] = draw(SCALARS)
    elif trap == "grow":
        node.append(draw(SCALARS))
    elif trap == "shrink":
        del node[key]
    else:
        node[key] = draw(JSON)
    return a, b


# --- patch.py: JSON equality ---------------------------------------------------------------------


@settings(max_examples=600)
@given(json_pairs())
def test_fast_paths_json_equal_reference_is_equality_of_the_typed_values(pair: Any) -> None:
    a, b = pair
    assert json_equal_reference(a, b) == (_tagged(a) == _tagged(b))


@settings(max_examples=600)
@given(json_pairs())
def test_fast_paths_the_json_equalities_answer_as_the_reference(pair: Any) -> None:
    a, b = pair
    expected = json_equal_reference(a, b)
    assert json_equal(a, b) == expected
    assert json_equal_in_c(a, b) == expected
    assert json_equal_bytes_first(a, b) == expected


@settings(max_examples=400)
@given(json_pairs())
def test_fast_paths_loosely_equal_lies_between_the_reference_and_python_equality(
    pair: Any,
) -> None:
    a, b = pair
    if json_equal_reference(a, b):
        assert loosely_equal(a, b)
    if loosely_equal(a, b):
        assert a == b


def _reference_run(a: list[Any], b: list[Any], limit: int, strict: bool, tail: bool) -> int:
    equal = json_equal_reference if strict else (lambda x, y: x == y)
    pairs = zip(reversed(a), reversed(b), strict=False) if tail else zip(a, b, strict=False)
    return sum(1 for _ in itertools.takewhile(lambda p: equal(*p), itertools.islice(pairs, limit)))


@settings(max_examples=400)
@given(json_pairs(), st.data())
def test_fast_paths_equal_run_counts_what_the_reference_finds_equal(
    pair: Any, data: st.DataObject
) -> None:
    a, b = pair
    a = a if type(a) is list else [a, 1, [True]]
    b = b if type(b) is list else [b, True, [1]]
    limit = data.draw(st.integers(0, min(len(a), len(b))))
    for strict, tail in itertools.product((False, True), repeat=2):
        assert equal_run(a, b, limit, strict, tail) == _reference_run(a, b, limit, strict, tail)


# --- limits.py -----------------------------------------------------------------------------------

LIMITS = st.builds(
    Limits,
    max_depth=st.sampled_from([16, 18, 64]),
    max_string_chars=st.sampled_from([24, 24, 65_536]),
    max_components=st.sampled_from([2, 600, 2_048, 2_048]),
    max_children_depth=st.sampled_from([0, 0, 0, 3, 4]),
)


def _nested(value: Any, levels: int) -> Any:
    for _ in range(levels):
        value = {"k": value}
    return value


@st.composite
def data_values(draw: st.DrawFn) -> Any:
    """Mostly what the screen passes (a flat object, a scalar), with strings around the
    limits' lengths; sometimes any JSON, nested around max_depth 16 / 18."""
    shape = draw(st.sampled_from(["flat", "flat", "flat", "scalar", "json", "deep"]))
    if shape == "flat":
        return draw(st.dictionaries(SHORT, STRING_OR_SCALAR, max_size=4))
    if shape == "scalar":
        return draw(STRING_OR_SCALAR)
    value = draw(JSON)
    return _nested(value, draw(st.integers(0, 12))) if shape == "deep" else value


@st.composite
def component_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Components with a children/child graph (chains, fans, cycles) and Buttons whose
    ``event.context`` may hold arrays."""
    ids = [f"c{i}" for i in range(draw(st.integers(1, 7)))]
    out: list[dict[str, Any]] = []
    for cid in ids:
        shape = draw(st.sampled_from(["Text", "Column", "Button"]))
        if shape == "Text":
            out.append({"id": cid, "component": "Text", "text": draw(SHORT)})
        elif shape == "Column":
            kids = draw(st.lists(st.sampled_from(ids), max_size=3, unique=True))
            out.append({"id": cid, "component": "Column", "children": kids})
        else:
            context = draw(
                st.dictionaries(
                    st.sampled_from(["name", "xs", "n"]),
                    st.text(max_size=10)
                    | st.lists(st.text(max_size=10), max_size=3)
                    | st.just({"path": "/name"}),
                    max_size=2,
                )
            )
            event: dict[str, Any] = {"name": "resume"}
            if context:
                event["context"] = context
            out.append(
                {
                    "id": cid,
                    "component": "Button",
                    "child": draw(st.sampled_from(ids)),
                    "action": {"event": event},
                }
            )
    return out


USUAL_KINDS = st.sampled_from(
    [
        ("createSurface", "updateComponents", "updateDataModel"),
        ("updateComponents",),
        ("updateDataModel",),
        ("updateComponents", "updateDataModel"),
    ]
)
ANY_KINDS = st.lists(st.sampled_from(MESSAGE_KINDS), min_size=1, max_size=5)
TINY = st.text(alphabet="ab", max_size=3)
# one place of a plain envelope that the screen must send to the reference
TRAPS = ["none", "value", "key", "scalar", "nested", "path", "reasoning", "ts", "traceparent"]


@st.composite
def v2_envelopes(draw: st.DrawFn) -> dict[str, Any]:  # noqa: C901 - one generator, its cases read in order
    """Half of them plain (every open place short and flat) but for at most one trap, with a
    long string exactly at or just over ``max_string_chars`` 24; the others anything."""
    sid = "s"
    near_plain = draw(st.booleans())
    messages: list[dict[str, Any]] = []
    data: dict[str, Any] | None = None
    for kind in draw(USUAL_KINDS if near_plain else USUAL_KINDS | ANY_KINDS):
        if kind == "createSurface":
            messages.append(create_msg(sid))
        elif kind == "deleteSurface":
            messages.append(delete_msg(sid))
        elif kind == "updateComponents":
            components = draw(component_lists())
            messages.append(
                {
                    "version": "v0.9",
                    "updateComponents": {"surfaceId": sid, "components": components},
                }
            )
        else:
            body: dict[str, Any] = {}
            if near_plain:
                flat = st.dictionaries(TINY, TINY | SCALARS, max_size=3)
                body["value"] = draw(flat if draw(st.integers(0, 3)) else SCALARS)
            else:
                if draw(st.booleans()):
                    paths = ["/name", "/a~0b", "/a~1b", "/bad~", "/~2"]
                    body["path"] = draw(st.sampled_from(paths))
                if draw(st.integers(0, 4)):
                    body["value"] = draw(data_values())
            data = data_msg(sid, **body) if body else data_msg(sid, value={})
            messages.append(data)
    payload = v2(sid, *messages)
    env = envelope(payload, trust=draw(st.sampled_from([None, "trusted", "untrusted"])))
    meta = env["meta"]
    if near_plain:
        long = ("a/~" * 20)[: draw(st.sampled_from([24, 25, 26, 40]))]
        trap = draw(st.sampled_from(TRAPS))
        body = data["updateDataModel"] if data is not None else {}
        if trap == "value" and type(body.get("value")) is dict:
            body["value"]["long"] = long
        elif trap == "key" and type(body.get("value")) is dict:
            body["value"][long] = 1
        elif trap == "scalar":
            body["value"] = long
        elif trap == "nested":
            body["value"] = {"k": draw(st.sampled_from([{"a": 1}, ["a"], [long]]))}
        elif trap == "path":
            body["path"] = draw(st.sampled_from(["/a~0b", "/bad~"]))
        elif trap == "reasoning":
            payload["reasoning"] = long
        elif trap == "ts":
            meta["ts"] = "2026-01-01T00:00:00." + "1" * draw(st.integers(1, 12)) + "Z"
        elif trap == "traceparent":
            meta["traceparent"] = draw(TINY)
        return env
    if draw(st.integers(0, 3)) == 0:
        payload["reasoning"] = draw(SHORT)
    if draw(st.integers(0, 3)) == 0:
        meta["ts"] = "2026-01-01T00:00:00." + "1" * draw(st.integers(1, 12)) + "Z"
    if draw(st.integers(0, 3)) == 0:
        meta["label"] = draw(SHORT)
    if draw(st.integers(0, 5)) == 0:
        meta["traceparent"] = draw(SHORT)
    return env


@settings(
    max_examples=500, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
@given(v2_envelopes(), LIMITS)
def test_fast_paths_plainly_within_implies_check_envelope_finds_nothing(
    env: dict[str, Any], limits: Limits
) -> None:
    # the screen's precondition, as decide meets it: the envelope and its v2 payload passed
    # their schemas and the cross-field rules
    assume(rules().check_envelope(env) is None and rules().check_v2(env["payload"]) is None)
    kinds, cross = kinds_and_cross_field(env["payload"])
    assume(cross is None)
    violation = check_envelope(env, "v2", kinds, limits)
    plain = plainly_within(env, kinds, limits)
    event(f"plain={plain}, refused={violation is not None}")
    if plain:
        assert violation is None


@pytest.mark.parametrize(
    ("value", "limits", "plain", "refused"),
    [
        ({"name": "x"}, Limits(), True, False),
        ({"name": "x" * 25}, Limits(max_string_chars=24), False, True),
        ({"name": {"first": "x"}}, Limits(), False, False),  # nested: the screen asks the reference
        (_nested("x", 12), Limits(max_depth=16), False, True),
    ],
)
def test_fast_paths_the_screen_and_the_reference_on_known_values(
    value: Any, limits: Limits, plain: bool, refused: bool
) -> None:
    """The law above holds on both sides: the strategies reach a screened-plain envelope and a
    refused one (these are examples of each)."""
    env = envelope(v2("s", create_msg("s"), data_msg("s", value=value)))
    kinds = kinds_of(env["payload"]["messages"])
    assert plainly_within(env, kinds, limits) is plain
    assert (check_envelope(env, "v2", kinds, limits) is not None) is refused


@settings(max_examples=500)
@given(JSON, st.integers(1, 20), LIMITS)
def test_fast_paths_scan_open_value_finds_what_the_walk_finds(
    value: Any, level: int, limits: Limits
) -> None:
    value = _nested(value, level % 5) if type(value) is not dict else value
    root = value if type(value) in (dict, list) else [value]
    assert scan_open_value(root, level, limits) == walk_open_value(root, level, limits)


# --- fold.py -------------------------------------------------------------------------------------

STATUSES = st.sampled_from(["absent", "live", "deleted"])
KIND_SEQUENCES = st.lists(st.sampled_from([*MESSAGE_KINDS, "unknown"]), max_size=6).map(tuple)


@given(STATUSES, KIND_SEQUENCES)
def test_fast_paths_the_memoized_walks_answer_as_the_plain_ones(status: Any, kinds: Any) -> None:
    walked = walk_kinds(status, kinds)
    assert walk_kinds_memoized(status, kinds) == walked
    assert walk_kinds_memoized(status, kinds) == walked  # the cached answer too
    assert walk_kinds(status, list(kinds)) == walked  # the guard walks a list unmemoized
    assert status_after_memoized(status, kinds) == status_after(status, kinds)
    end, index, _ = walked
    if index is None:
        assert status_after(status, kinds) == end


@given(st.text(max_size=8))
def test_fast_paths_the_shared_node_set_is_the_plain_one(node_id: str) -> None:
    assert single_node_set_shared(node_id) == single_node_set(node_id) == frozenset({node_id})
    assert type(single_node_set_shared(node_id)) is frozenset


MESSAGES = st.lists(
    JSON
    | st.dictionaries(st.sampled_from([*MESSAGE_KINDS, "version", "other"]), SCALARS, max_size=3),
    max_size=5,
)


@given(MESSAGES)
def test_fast_paths_kinds_of_is_message_kind_of_each(messages: list[Any]) -> None:
    assert kinds_of(messages) == tuple(message_kind(m) or "unknown" for m in messages)


@given(st.text(max_size=8), st.integers(0, 2**40), st.text(max_size=8))
def test_fast_paths_a_first_complete_emission_is_the_reference_entry(
    kind: str, sequence: int, event_id: str
) -> None:
    rec = Recorded(sequence, event_id)
    assert correlation_entry(None, kind, rec, None) == Correlation(kind, rec, True, EMPTY)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(envelopes(), min_size=1, max_size=8))
def test_fast_paths_apply_with_what_the_state_holds_is_apply(envs: list[dict[str, Any]]) -> None:
    state = RunState.initial(RUN)
    for env in envs:
        outcome = decide({"runId": RUN, "envelope": env}, state, HostPolicy(), rules(), now=NOW)
        if not isinstance(outcome, Admitted):
            continue
        event = outcome.event
        recorded = event["payload"]["envelope"]
        body = recorded.get("payload")
        kinds = None
        surface: Any = None
        if isinstance(body, dict) and body.get("version") == "v0.9":
            kinds = kinds_of(body["messages"])
            surface = state.surfaces.get(body["surfaceId"])
        correlation = state.correlations.get(recorded["correlationId"])
        fast = apply_with(state, event, kinds, correlation, surface)
        assert fast == apply(state, event) == outcome.state
        state = fast
