"""HTTP errors (app.core.http.errors): the code -> status table of openwop-a2ui.md §11, the
closed error envelope, and the translation of every refusal code in
app.core.admission.refusal.CODES. Cross-checked against the pinned upstream error-envelope schemas
when they are present."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from app.core.admission import refusal
from app.core.http.errors import (
    DEFAULT_STATUS,
    STATUS,
    UNREGISTERED,
    HttpError,
    error,
    from_admission_code,
)

UPSTREAM = Path(__file__).resolve().parents[2].parent / "shared" / "upstream" / "openwop"
V1_ENVELOPE = UPSTREAM / "schemas" / "error-envelope.schema.json"
V2_ENVELOPE = UPSTREAM / "schemas" / "v2" / "error-envelope.schema.json"

# §11, plus payload_too_large (the registered 413), unsupported_media_type (the registered
# 415, app.core.http.guard) and the HTTP layer's own vendor codes.
EXPECTED_STATUS = {
    "envelope_invalid": 422,
    "unknown_schema_version": 422,
    "unknown_envelope_kind": 422,
    "envelope_refusal": 422,
    "envelope_truncation_unrecoverable": 422,
    "fork_point_invalid": 422,
    "envelope_correlation_conflict": 409,
    "run_terminal": 409,
    "run_state_conflict": 409,
    "interrupt_already_resolved": 409,
    "validation_error": 400,
    "unsupported_stream_mode": 400,
    "not_found": 404,
    "forbidden": 403,
    "unauthenticated": 401,
    "rate_limited": 429,
    "event_type_unmapped": 500,
    "payload_unprojectable": 500,
    "internal_error": 500,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "a2ui-stream.request_timeout": 408,
    "a2ui-stream.unavailable": 503,
    "a2ui-stream.outcome_timeout": 504,
}

# Every refusal code -> the code a client sees. Listed by hand: a code added to refusal.py
# fails test_every_refusal_code_has_an_expected_translation until it is decided here.
EXPECTED_TRANSLATION = {
    "not_found": "not_found",
    "forbidden": "forbidden",
    "interrupt_already_resolved": "interrupt_already_resolved",
    "action_refused": "envelope_refusal",
    "validation_error": "validation_error",
    "unknown_envelope_kind": "unknown_envelope_kind",
    "unknown_schema_version": "unknown_schema_version",
    "envelope_invalid": "envelope_invalid",
    "envelope_correlation_conflict": "envelope_correlation_conflict",
    "run_terminal": "run_terminal",
    "fork_point_invalid": "fork_point_invalid",
    "run_state_conflict": "run_state_conflict",
    "record_not_utf8": "validation_error",
    "record_not_json": "validation_error",
    "record_invalid": "validation_error",
    "record_key_mismatch": "validation_error",
    "record_too_large": "payload_too_large",
    "record_limit_exceeded": "envelope_invalid",
    "record_unrecordable": "internal_error",
}

# Details each code's v2 registry entry requires (error-envelope allOf).
REQUIRED_DETAILS: dict[str, dict[str, Any]] = {
    "unsupported_stream_mode": {"supported": ["updates"]},
    "run_state_conflict": {"runStatus": "completed"},
}


@pytest.mark.parametrize(("code", "status"), sorted(EXPECTED_STATUS.items()))
def test_status_table(code: str, status: int) -> None:
    assert STATUS[code] == status
    assert error(code, "m").status == status


def test_status_table_has_no_other_codes() -> None:
    assert set(STATUS) == set(EXPECTED_STATUS)


def test_unknown_code_is_a_500() -> None:
    assert DEFAULT_STATUS == 500
    assert error("no_such_code", "m") == HttpError(500, {"error": "no_such_code", "message": "m"})


@pytest.mark.parametrize(
    ("details", "body"),
    [
        (None, {"error": "not_found", "message": "no run x"}),
        ({}, {"error": "not_found", "message": "no run x"}),
        ({"runId": "x"}, {"error": "not_found", "message": "no run x", "details": {"runId": "x"}}),
    ],
)
def test_error_body_is_the_closed_envelope(details: dict[str, Any] | None, body: Any) -> None:
    assert error("not_found", "no run x", details) == HttpError(404, body)


def test_error_body_key_order_and_copy_of_details() -> None:
    details = {"b": 1, "a": 2}
    answer = error("validation_error", "bad", details)
    details["c"] = 3
    assert list(answer.body) == ["error", "message", "details"]
    assert answer.body["details"] == {"b": 1, "a": 2}


def test_empty_message_is_replaced_by_the_code() -> None:
    assert error("forbidden", "").body["message"] == "forbidden"


def test_http_error_is_frozen() -> None:
    answer = error("forbidden", "no")
    with pytest.raises(dataclasses.FrozenInstanceError):
        answer.status = 200  # type: ignore[misc]


def test_every_refusal_code_has_an_expected_translation() -> None:
    assert set(EXPECTED_TRANSLATION) == set(refusal.CODES)


@pytest.mark.parametrize("code", sorted(refusal.CODES))
def test_from_admission_code(code: str) -> None:
    assert from_admission_code(code) == EXPECTED_TRANSLATION[code]


@pytest.mark.parametrize("code", sorted(refusal.CODES))
def test_law_translation_keeps_the_refusal_status(code: str) -> None:
    # The dead-letter status (refusal.HTTP_STATUS) and the HTTP status never disagree.
    translated = from_admission_code(code)
    assert translated not in UNREGISTERED
    assert STATUS[translated] == refusal.HTTP_STATUS[code]


@pytest.mark.parametrize("code", ["made_up", "a2ui-stream.unavailable", "unavailable", ""])
def test_unknown_or_unregistered_admission_code_is_envelope_invalid(code: str) -> None:
    assert from_admission_code(code) == "envelope_invalid"


# --- cross-checks against the pinned upstream schemas (skipped when they are absent) ---------


def _schema(path: Path) -> dict[str, Any]:
    if not path.is_file():
        pytest.skip(f"upstream schema not found at {path}")
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def test_status_agrees_with_the_v2_registry() -> None:
    registry = _schema(V2_ENVELOPE)["x-openwop-http-status"]
    registered = {code: status for code, status in STATUS.items() if code in registry}
    assert registered == {code: registry[code] for code in registered}
    assert set(STATUS) - set(registry) == UNREGISTERED


@pytest.mark.parametrize("code", sorted(set(EXPECTED_STATUS) - UNREGISTERED))
def test_v2_error_body_validates(code: str) -> None:
    validator = Draft202012Validator(_schema(V2_ENVELOPE))
    body = error(code, "message", REQUIRED_DETAILS.get(code)).body
    assert list(validator.iter_errors(body)) == []


@pytest.mark.parametrize("code", sorted(EXPECTED_STATUS))
def test_v1_error_body_validates(code: str) -> None:
    validator = Draft202012Validator(_schema(V1_ENVELOPE))
    assert list(validator.iter_errors(error(code, "m", {"k": 1}).body)) == []
    assert list(validator.iter_errors(error(code, "m").body)) == []


def test_v2_schema_takes_our_vendor_codes_and_refuses_a_bare_unregistered_one() -> None:
    # The HTTP layer's own answers use the registry's vendor grammar <org>.<code> (§11), so a
    # v2 client validating the closed envelope accepts them; a bare made-up code it refuses.
    validator = Draft202012Validator(_schema(V2_ENVELOPE))
    for code in UNREGISTERED:
        assert list(validator.iter_errors(error(code, "m").body)) == []
    assert list(validator.iter_errors(error("unavailable", "m").body)) != []
