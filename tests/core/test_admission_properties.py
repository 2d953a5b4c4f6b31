"""Laws of ``decide`` (STYLE rule 9), checked with hypothesis:

- any JSON value as a record gives Admitted, Deduplicated, or Refused with a registered code,
  never an exception;
- a refusal (and a deduplicated re-emission) records nothing: deciding a run's inputs with the
  refused ones removed gives exactly the same log;
- replay: folding the admitted log from scratch equals the live state.
"""

from __future__ import annotations

import copy
from functools import reduce
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.admission.decision import Admitted, Deduplicated, Refused, decide
from app.core.admission.fold import apply
from app.core.admission.policy import HostPolicy
from app.core.admission.refusal import CODES
from app.core.runlog.run_state import RunState, dump, load
from tests.core.admission_support import (
    NOW,
    POSITIVE,
    RUN,
    V1_SURFACE,
    components_msg,
    create_msg,
    data_msg,
    delete_msg,
    rules,
    v2,
)

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=30,
)

SURFACES = ("s1", "s2")
MESSAGES = {
    "create": create_msg,
    "components": components_msg,
    "data": data_msg,
    "delete": delete_msg,
}


@st.composite
def envelopes(draw: st.DrawFn) -> dict[str, Any]:
    """Envelopes close enough to valid that every rule gets exercised."""
    kind = draw(st.sampled_from(["ui.a2ui-surface"] * 6 + ["clarification.request", "vendor.x.y"]))
    sid = draw(st.sampled_from(SURFACES))
    body: Any
    shape = draw(st.sampled_from(["v2"] * 6 + ["v1", "positive", "json"]))
    if shape == "v2":
        names = draw(st.lists(st.sampled_from(sorted(MESSAGES)), min_size=1, max_size=4))
        targets = [draw(st.sampled_from([sid] * 5 + ["other"])) for _ in names]
        body = v2(sid, *(MESSAGES[n](t) for n, t in zip(names, targets, strict=True)))
    elif shape == "v1":
        body = copy.deepcopy(V1_SURFACE)
    elif shape == "positive":
        body = copy.deepcopy(POSITIVE)
    else:
        body = draw(JSON)
    env: dict[str, Any] = {"type": kind}
    version = draw(st.sampled_from([2, 2, 2, 1, 0, 3, None]))
    if version is not None:
        env["schemaVersion"] = version
    env["envelopeId"] = "env-p"
    env["correlationId"] = draw(st.sampled_from([f"c{i}" for i in range(8)]))
    node = draw(st.sampled_from([None, "gate", "n2"]))
    if node is not None:
        env["nodeId"] = node
    env["payload"] = body
    meta: dict[str, Any] = {"source": "ai-generation", "ts": "2026-01-01T00:00:00Z"}
    trust = draw(st.sampled_from([None, "trusted", "untrusted"]))
    if trust is not None:
        meta["contentTrust"] = trust
    env["meta"] = meta
    if draw(st.integers(0, 5)) == 0:
        total = draw(st.integers(1, 3))
        index = draw(st.integers(0, total - 1))
        env["partial"] = {"isPartial": index < total - 1, "index": index, "total": total}
    return env


def _run(envs: list[dict[str, Any]], policy: HostPolicy) -> tuple[list[Any], RunState | None]:
    state: RunState | None = None
    outcomes = []
    for env in envs:
        outcome = decide({"runId": RUN, "envelope": env}, state, policy, rules(), now=NOW)
        outcomes.append(outcome)
        if isinstance(outcome, Admitted):
            state = outcome.state
    return outcomes, state


def _check(outcome: object) -> None:
    assert isinstance(outcome, Admitted | Deduplicated | Refused), outcome
    if isinstance(outcome, Refused):
        assert outcome.violation.code in CODES


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(JSON)
def test_admission_any_json_record_is_an_outcome(value: Any) -> None:
    _check(decide(value, None, HostPolicy(), rules(), now=NOW))
    _check(decide({"runId": RUN, "envelope": value}, None, HostPolicy(), rules(), now=NOW))
    _check(
        decide(
            {"runId": value, "envelope": value},
            RunState.initial(RUN),
            HostPolicy(),
            rules(),
            now=NOW,
        )
    )


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    envelopes(), st.sampled_from(["payload", "meta", "partial", "schemaVersion", "nodeId"]), JSON
)
def test_admission_mutated_envelope_is_an_outcome(
    env: dict[str, Any], key: str, value: Any
) -> None:
    env[key] = value
    _check(decide({"runId": RUN, "envelope": env}, None, HostPolicy(), rules(), now=NOW))


POLICIES = st.sampled_from(
    [
        HostPolicy(),
        HostPolicy(strictness="strict"),
        HostPolicy(schema_versions={"ui.a2ui-surface": 1}),
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(envelopes(), max_size=12), POLICIES)
def test_admission_refusals_and_duplicates_record_nothing(
    envs: list[dict[str, Any]], policy: HostPolicy
) -> None:
    outcomes, _ = _run(envs, policy)
    for o in outcomes:
        _check(o)
    kept = [e for e, o in zip(envs, outcomes, strict=True) if isinstance(o, Admitted)]
    replayed, _ = _run(kept, policy)
    assert all(isinstance(o, Admitted) for o in replayed)
    assert [o.event for o in replayed] == [o.event for o in outcomes if isinstance(o, Admitted)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(envelopes(), max_size=12), POLICIES)
def test_admission_replay_of_the_log_equals_the_live_state(
    envs: list[dict[str, Any]], policy: HostPolicy
) -> None:
    outcomes, live = _run(envs, policy)
    log = [o.event for o in outcomes if isinstance(o, Admitted)]
    replayed = reduce(apply, log, RunState.initial(RUN))
    assert replayed == (live or RunState.initial(RUN))
    assert replayed.next_sequence == len(log)
    assert [e["sequence"] for e in log] == list(range(len(log)))
    # the table form round-trips through JSON to an equal state
    assert load(orjson.loads(orjson.dumps(dump(replayed)))) == replayed


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(envelopes(), max_size=10))
def test_admission_refusal_leaves_the_given_state_untouched(envs: list[dict[str, Any]]) -> None:
    state: RunState | None = None
    for env in envs:
        before = None if state is None else copy.copy(state)
        outcome = decide({"runId": RUN, "envelope": env}, state, HostPolicy(), rules(), now=NOW)
        if isinstance(outcome, Admitted):
            assert outcome.state != state
            state = outcome.state
        else:
            assert state == before
