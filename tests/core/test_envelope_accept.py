"""The v1 envelope accept seam's decisions (app.core.http.envelope_accept), from the suite's v1
A2UI scenarios (a2ui-surface-degrades, a2ui-untrusted-blocks-approval, -version-refusal,
-replay)."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.http.discovery import DiscoveryConfig, serves_envelope_accept, v1_document
from app.core.http.envelope_accept import Admit, decide_accept, outcome_of
from app.core.http.errors import HttpError

SURFACE: dict[str, Any] = {
    "type": "ui.a2ui-surface",
    "schemaVersion": 1,
    "envelopeId": "env-1",
    "correlationId": "c-1",
    "payload": {"catalogVersion": "0.9.1", "surface": {"components": []}},
    "meta": {"source": "ai-generation", "ts": "2026-06-15T10:00:00Z"},
}
UNTRUSTED = {**SURFACE, "meta": {**SURFACE["meta"], "contentTrust": "untrusted"}}


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"envelope": SURFACE, "hostSupportedEnvelopes": ["clarification.request"]}, "gated"),
        ({"envelope": UNTRUSTED, "boundInterruptKind": "approval"}, "blocked"),
    ],
)
def test_decided_without_admission(body: dict[str, Any], status: str) -> None:
    outcome = decide_accept(body)
    assert isinstance(outcome, dict) and outcome["status"] == status
    assert outcome["envelopeId"] == "env-1"


@pytest.mark.parametrize(
    "body",
    [
        {"envelope": SURFACE, "hostSupportedEnvelopes": ["ui.a2ui-surface"]},
        {"envelope": SURFACE},  # no consumer list: the host's own kinds decide, at admission
        {"envelope": UNTRUSTED, "hostSupportedEnvelopes": ["ui.a2ui-surface"]},  # recorded
        {"envelope": {**SURFACE, "type": "error"}, "hostSupportedEnvelopes": []},  # universal
    ],
)
def test_everything_else_is_admitted(body: dict[str, Any]) -> None:
    assert decide_accept(body) == Admit(body["envelope"])


@pytest.mark.parametrize(
    "body", [[], {"envelope": 1}, {"envelope": SURFACE, "hostSupportedEnvelopes": "x"}]
)
def test_a_malformed_request_is_400(body: Any) -> None:
    refused = decide_accept(body)
    assert isinstance(refused, HttpError) and refused.status == 400


def test_the_admission_answer_becomes_the_outcome_with_the_code_first() -> None:
    accepted = outcome_of(201, {"sequence": 3, "eventId": "e"}, SURFACE)
    assert accepted == {
        "status": "accepted",
        "reason": "accepted",
        "envelopeId": "env-1",
        "details": {"sequence": 3, "eventId": "e"},
    }
    conflict = {
        "error": "envelope_correlation_conflict",
        "message": "c-1 was ui.a2ui-surface",
        "details": {"refusal": "envelope_correlation_conflict"},
    }
    refused = outcome_of(409, conflict, SURFACE)
    assert refused["status"] == "refused"
    assert refused["reason"].startswith("envelope_correlation_conflict: ")
    invalid = {"error": "envelope_invalid", "message": "m", "details": {"refusal": "x_rule"}}
    assert outcome_of(422, {**invalid, "details": {}}, SURFACE)["status"] == "invalid"


@pytest.mark.parametrize(("floor", "served"), [(1, True), (2, False)])
def test_served_and_advertised_with_the_seams_below_floor_2(floor: int, served: bool) -> None:
    config = DiscoveryConfig(floor=floor, strictness="warn", seams=True, delta_transport=False,
                             version="0")  # fmt: skip
    assert serves_envelope_accept(config) is served
    seams = v1_document(config)["seams"]
    assert ("/v1/host/sample/envelope/accept" in seams) is served
    off = DiscoveryConfig(floor=1, strictness="warn", seams=False, delta_transport=False,
                          version="0")  # fmt: skip
    assert not serves_envelope_accept(off) and "seams" not in v1_document(off)
