"""HTTP admission decides the client's bytes (app.core.http.admission,
app.core.admission.intake.read_body; issue 14 item 8): every body goes through the Kafka path's
intake with its codes, and an envelope travels into its admission record byte for byte."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from app.core.admission.intake import Intake, read_admission, read_body
from app.core.admission.refusal import Violation
from app.core.http.admission import (
    AdmissionRequest,
    body_too_large,
    command_request,
    envelope_request,
    read_json_body,
    v2_seam_request,
)
from app.core.http.errors import HttpError

RUN = "acme/r-1"
ENVELOPE = {
    "type": "ui.a2ui-surface",
    "schemaVersion": 2,
    "envelopeId": "env-1",
    "correlationId": "corr-1",
    "payload": {"version": "v0.9", "messages": []},
    "meta": {"source": "ai-generation", "contentTrust": "untrusted"},
}
PLAIN = json.dumps(ENVELOPE).encode()
DUPLICATED = PLAIN.replace(
    b'"contentTrust": "untrusted"', b'"contentTrust": "untrusted", "contentTrust": "trusted"'
)


def _deep(levels: int) -> bytes:
    return PLAIN.replace(b'"messages": []', b'"messages": ' + b"[" * levels + b"]" * levels)


# Bodies whose bytes differ from what a decode-and-re-encode would publish.
SPELLINGS = [
    PLAIN,
    b"  \n" + PLAIN + b"\n\t ",
    PLAIN.replace(b'"env-1"', b'"env-\\u0031"'),  # an escape orjson would not write
    PLAIN.replace(b'"source": "ai-generation"', b'"source": "ai-g\\u00e9n\\u00e9ration"'),
    json.dumps(dict(reversed(list(ENVELOPE.items())))).encode(),  # another member order
    PLAIN.replace(b"[]", b"[1.0, 1e2, -0]"),
]


@pytest.mark.parametrize("raw", SPELLINGS)
def test_the_envelope_travels_byte_for_byte(raw: bytes) -> None:
    built = envelope_request(RUN, raw)
    assert isinstance(built, AdmissionRequest)
    assert built.record == b'{"runId":"acme/r-1","envelope":' + raw + b"}"
    assert built.run_id == RUN and built.envelope == orjson.loads(raw)


@pytest.mark.parametrize("raw", SPELLINGS)
def test_law_the_validators_intake_reads_the_envelope_the_client_sent(raw: bytes) -> None:
    built = envelope_request(RUN, raw)
    assert isinstance(built, AdmissionRequest)
    decoded = read_admission(RUN.encode(), built.record)
    assert isinstance(decoded, Intake)
    assert decoded.record == {"runId": RUN, "envelope": orjson.loads(raw)}


def _refusal(answer: Any) -> tuple[int, str, str, str, str]:
    assert isinstance(answer, HttpError), answer
    details = answer.body["details"]
    return (
        answer.status,
        answer.body["error"],
        details["refusal"],
        details["rule"],
        details["pointer"],
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            DUPLICATED,
            (
                400,
                "validation_error",
                "record_not_json",
                "record-duplicate-key",
                "/envelope/meta/contentTrust",
            ),
        ),
        (
            PLAIN.replace(b"[]", b"[18446744073709551616]"),
            (
                422,
                "envelope_invalid",
                "record_limit_exceeded",
                "number-range",
                "/envelope/payload/messages/0",
            ),
        ),
        (
            PLAIN.replace(b"[]", b"[-9223372036854775809]"),
            (
                422,
                "envelope_invalid",
                "record_limit_exceeded",
                "number-range",
                "/envelope/payload/messages/0",
            ),
        ),
        (
            PLAIN.replace(b"[]", b"[1e400]"),
            (422, "envelope_invalid", "record_limit_exceeded", "number-range", "/envelope"),
        ),
        (_deep(300), (422, "envelope_invalid", "record_limit_exceeded", "depth", None)),
        (_deep(1000), (422, "envelope_invalid", "record_limit_exceeded", "depth", None)),
        # beyond orjson's own parse ceiling (1024): no pointer further in than the body
        (_deep(1100), (422, "envelope_invalid", "record_limit_exceeded", "depth", "/envelope")),
        (
            b'{"a": "\xff"}',
            (400, "validation_error", "record_not_utf8", "record-utf8", "/envelope"),
        ),
        (b'{"a": ', (400, "validation_error", "record_not_json", "record-json", "/envelope")),
        (b"", (400, "validation_error", "record_not_json", "record-json", "/envelope")),
        # a body that would close the record around it and add a member: not one JSON value
        (
            PLAIN + b', "command": {"type": "run.cancel"}',
            (400, "validation_error", "record_not_json", "record-json", "/envelope"),
        ),
    ],
)
def test_envelope_bodies_meet_the_kafka_intake(
    raw: bytes, expected: tuple[int, str, str, str, str | None]
) -> None:
    got = _refusal(envelope_request(RUN, raw))
    if expected[4] is None:  # the pointer of a deep record names the first container too deep
        assert got[:4] == expected[:4] and got[4].startswith("/envelope/payload/messages/0")
    else:
        assert got == expected


@pytest.mark.parametrize("raw", [b"[]", b'"envelope"', b"1", b"null"])
def test_an_envelope_body_is_one_object(raw: bytes) -> None:
    answer = envelope_request(RUN, raw)
    assert isinstance(answer, HttpError) and answer.status == 400


def test_the_record_limit_counts_the_record_around_the_body() -> None:
    limit = 2048
    wrapper = len(b'{"runId":"acme/r-1","envelope":}')
    fits = PLAIN + b" " * (limit - wrapper - len(PLAIN))
    assert isinstance(envelope_request(RUN, fits, max_record_bytes=limit), AdmissionRequest)
    over = fits + b" "
    answer = envelope_request(RUN, over, max_record_bytes=limit)
    assert _refusal(answer)[:3] == (413, "payload_too_large", "record_too_large")
    assert isinstance(answer, HttpError)
    assert "A2UI_STREAM_MAX_RECORD_BYTES" in answer.body["message"]
    assert answer.body["details"]["size"] == limit + 1
    alone = envelope_request(RUN, PLAIN + b" " * limit, max_record_bytes=limit)
    assert _refusal(alone)[:3] == (413, "payload_too_large", "record_too_large")


def test_the_v2_seam_body_is_the_record() -> None:
    raw = b'{ "runId" : "acme/r-1", "envelope" : ' + PLAIN + b" }"
    built = v2_seam_request(raw)
    assert isinstance(built, AdmissionRequest)
    assert (built.run_id, built.record, built.envelope) == (RUN, raw, ENVELOPE)


@pytest.mark.parametrize(
    ("raw", "status", "rule"),
    [
        (b'{"runId": "acme/r-1", "envelope": ' + DUPLICATED + b"}", 400, "record-duplicate-key"),
        (
            b'{"runId": "a/b", "runId": "acme/r-1", "envelope": ' + PLAIN + b"}",
            400,
            "record-duplicate-key",
        ),
        (b'{"runId": "acme/r-1", "envelope": ' + PLAIN + b', "command": {}}', 400, None),
        (b'{"runId": "acme/r-1", "envelope": []}', 400, None),
        (b'{"envelope": ' + PLAIN + b"}", 400, None),
    ],
)
def test_v2_seam_refusals(raw: bytes, status: int, rule: str | None) -> None:
    answer = v2_seam_request(raw)
    assert isinstance(answer, HttpError) and answer.status == status
    if rule is not None:
        assert answer.body["details"]["rule"] == rule


def test_an_assembled_record_too_deep_to_encode_is_a_refusal_not_an_exception() -> None:
    # 250 levels pass intake on their own; inside {runId, command: {resumeValue}} they are 253+
    value = read_json_body(b"[" * 253 + b"]" * 253)
    assert not isinstance(value, HttpError)
    answer = command_request(RUN, {"type": "interrupt.resolve", "resumeValue": value})
    assert _refusal(answer)[:4] == (422, "envelope_invalid", "record_limit_exceeded", "depth")


def test_a_command_record_is_its_json() -> None:
    built = command_request(RUN, {"type": "run.cancel"})
    assert isinstance(built, AdmissionRequest) and built.envelope is None
    assert orjson.loads(built.record) == {"runId": RUN, "command": {"type": "run.cancel"}}


def test_a_command_record_over_the_limit_is_413() -> None:
    answer = command_request(RUN, {"type": "x", "v": "y" * 2000}, max_record_bytes=1024)
    assert _refusal(answer)[:3] == (413, "payload_too_large", "record_too_large")


@pytest.mark.parametrize(
    ("raw", "at", "pointer"),
    [
        (b'{"a": {"b": 1, "b": 2}}', "", "/a/b"),
        (b'{"a": {"b": 1, "b": 2}}', "/envelope", "/envelope/a/b"),
        (b'{"a~/": 1, "a~/": 2}', "", "/a~0~1"),
        (b"{", "/x", "/x"),
    ],
)
def test_read_body_pointers_are_placed_where_the_body_goes(
    raw: bytes, at: str, pointer: str
) -> None:
    decoded = read_body(raw, at=at)
    assert isinstance(decoded, Violation) and decoded.path == pointer


def test_read_body_speaks_of_the_request_body() -> None:
    for raw in (b"{", b"\xff", b" " * 2000):
        decoded = read_body(raw, max_bytes=1024)
        assert isinstance(decoded, Violation) and "request body" in decoded.message


def test_read_body_accepts_what_read_admission_accepts() -> None:
    for raw in SPELLINGS:
        decoded = read_body(raw)
        assert isinstance(decoded, Intake) and decoded.record == orjson.loads(raw)


def test_body_too_large_names_the_setting() -> None:
    answer = body_too_large(None, max_bytes=1024)
    assert answer.status == 413 and answer.body["error"] == "payload_too_large"
    assert "A2UI_STREAM_MAX_RECORD_BYTES" in answer.body["message"]
    assert answer.body["details"]["refusal"] == "record_too_large"
    assert body_too_large(5000, max_bytes=1024).body["details"]["size"] == 5000
