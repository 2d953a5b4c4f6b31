"""Intake, dead letters and the validator step: every input bytes -> exactly one output."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import replace

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.admission.command_seal import seal
from app.core.admission.dead_letter import dead_letter, redact_bytes
from app.core.admission.intake import Intake, read_admission
from app.core.admission.payload_rules import PayloadRules
from app.core.admission.policy import HostPolicy
from app.core.admission.redaction import prepare
from app.core.admission.refusal import CODES, Violation
from app.core.admission.validator import Append, Duplicate, Reject, SourceRecord, validate
from app.core.runlog.keys import partition_for_run
from app.core.runlog.run_state import RunState
from app.shell.schema_files import load_schema_documents

RULES = PayloadRules.from_documents(load_schema_documents())
BASIC = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"
NOW = "2026-11-30T00:00:00Z"
N = 6


def _record(run: str, cid: str, messages: list, sid: str = "s") -> bytes:
    return orjson.dumps(
        {
            "runId": run,
            "envelope": {
                "type": "ui.a2ui-surface",
                "schemaVersion": 2,
                "envelopeId": f"e-{cid}",
                "correlationId": cid,
                "payload": {
                    "version": "v0.9",
                    "catalogId": BASIC,
                    "surfaceId": sid,
                    "messages": messages,
                },
                "meta": {"source": "ai-generation", "ts": NOW},
            },
        }
    )


CREATE = {"version": "v0.9", "createSurface": {"surfaceId": "s", "catalogId": BASIC}}


def _source(
    run: str, value: bytes | None, key: bytes | None = None, offset: int = 0
) -> SourceRecord:
    return SourceRecord(
        "a2ui.admission",
        partition_for_run(run, N),
        offset,
        run.encode() if key is None else key,
        value,
    )


@pytest.mark.parametrize(
    ("key", "value", "code"),
    [
        (b"r", None, "record_invalid"),
        (b"r", b"\xff\xfe{}", "record_not_utf8"),
        (b"r", b'{"runId": "r", ', "record_not_json"),
        (b"r", b"[1, 2", "record_not_json"),
        (b"other", b'{"runId": "r", "envelope": {}}', "record_key_mismatch"),
        (b"r", b"x" * 2048, "record_too_large"),
    ],
)
def test_intake_refuses_unreadable_records_by_code(
    key: bytes, value: bytes | None, code: str
) -> None:
    got = read_admission(key, value, max_bytes=1024)
    assert isinstance(got, Violation) and got.code == code and got.message


def test_intake_checks_size_before_parsing() -> None:
    # Far too large and not JSON: the size refusal wins, the parser never sees it.
    got = read_admission(b"r", b"{" * 5000, max_bytes=1024)
    assert isinstance(got, Violation) and got.code == "record_too_large"


def test_intake_accepts_any_json_and_reads_the_run() -> None:
    got = read_admission(b"r", b'{"runId": "r", "envelope": 1}')
    assert isinstance(got, Intake) and got.run_id == "r"
    assert read_admission(None, b"[]") == Intake([], None)


def test_dead_letter_keeps_the_original_bytes_and_their_digest() -> None:
    raw = b'{"runId": "r", "oops": true}'
    letter = dead_letter(
        Violation("validation_error", "envelope-shape", "/envelope", "missing"),
        raw,
        topic="t",
        partition=2,
        offset=9,
        now=NOW,
        run_id="r",
        correlation_id=None,
    )
    assert base64.b64decode(letter["original"]["base64"]) == raw
    assert letter["original"] == {
        **letter["original"],
        "sha256": hashlib.sha256(raw).hexdigest(),
        "size": len(raw),
        "redacted": False,
    }
    assert letter["source"] == {"topic": "t", "partition": 2, "offset": 9}


def test_dead_letter_never_stores_a_registered_secret() -> None:
    secret = "sk-live-0123456789"
    raw = (
        '{"runId": "r", "envelope": {"reasoning": "key '
        + secret
        + '", "x": "\\u0073k-live-0123456789"}}'
    ).encode()
    letter = dead_letter(
        Violation("validation_error", "envelope-shape", "", "bad"),
        raw,
        topic="t",
        partition=0,
        offset=0,
        now=NOW,
        run_id="r",
        correlation_id=None,
        secrets=prepare([("api", secret)]),
    )
    kept = base64.b64decode(letter["original"]["base64"])
    assert secret.encode() not in kept
    assert letter["original"]["redacted"] is True
    assert letter["original"]["sha256"] == hashlib.sha256(raw).hexdigest()


def test_redact_bytes_replaces_raw_and_escaped_forms_in_non_utf8_bytes() -> None:
    secrets = prepare([("k", "secret-value-1")])
    data = b"\xff secret-value-1 \xfe"
    assert b"secret-value-1" not in redact_bytes(data, secrets)
    assert b"[REDACTED:k]" in redact_bytes(data, secrets)


def test_validator_appends_then_deduplicates_then_refuses() -> None:
    states: dict[str, RunState] = {}
    policy = HostPolicy()
    first = validate(
        _source("r", _record("r", "c1", [CREATE])), states.get, policy, RULES, now=NOW, partitions=N
    )
    assert isinstance(first, Append) and first.key == b"r#0" and first.sequence == 0
    event = orjson.loads(first.value)
    assert event["causationId"] == "c1" and event["runId"] == "r"
    states["r"] = first.state
    again = validate(
        _source("r", _record("r", "c1", [CREATE]), offset=1),
        states.get,
        policy,
        RULES,
        now=NOW,
        partitions=N,
    )
    assert isinstance(again, Duplicate) and again.sequence == 0
    fold = validate(
        _source("r", _record("r", "c2", [CREATE]), offset=2),
        states.get,
        policy,
        RULES,
        now=NOW,
        partitions=N,
    )
    assert isinstance(fold, Reject) and fold.code == "envelope_invalid" and fold.key == b"r"
    letter = orjson.loads(fold.value)
    assert letter["correlationId"] == "c2" and letter["source"]["offset"] == 2


def test_validator_refuses_a_run_on_the_wrong_partition() -> None:
    run = "r"
    wrong = (partition_for_run(run, N) + 1) % N
    out = validate(
        SourceRecord("a", wrong, 0, run.encode(), _record(run, "c", [CREATE])),
        lambda _r: None,
        HostPolicy(),
        RULES,
        now=NOW,
        partitions=N,
    )
    assert isinstance(out, Reject) and out.code == "record_key_mismatch"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_validator_never_raises_on_any_bytes(data: bytes) -> None:
    out = validate(_source("r", data), lambda _r: None, HostPolicy(), RULES, now=NOW, partitions=N)
    assert isinstance(out, Reject | Append | Duplicate)
    if isinstance(out, Reject):
        assert out.code in CODES


def test_validator_refuses_what_cannot_be_encoded_instead_of_crashing() -> None:
    deep: object = 1
    for _ in range(400):
        deep = [deep]
    record = orjson.loads(_record("r", "c1", [CREATE]))
    record["envelope"]["payload"]["messages"].append(
        {"version": "v0.9", "updateDataModel": {"surfaceId": "s", "path": "/d", "value": None}}
    )
    raw = orjson.dumps(record).replace(
        b'"value":null', b'"value":' + b"[" * 400 + b"1" + b"]" * 400
    )
    out = validate(_source("r", raw), lambda _r: None, HostPolicy(), RULES, now=NOW, partitions=N)
    assert isinstance(out, Reject)
    assert out.code == "record_limit_exceeded"


# --- issue 14: ambiguous records and secrets in dead letters --------------------------------------

SECRET = "sk_live_0123456789abcdef"
RUN_S = "tenant-a/run-0000000000000001"
SECRETS = HostPolicy(secrets={RUN_S: (("k", SECRET),)})


def _letter(out: object) -> dict:
    assert isinstance(out, Reject), out
    return orjson.loads(out.value)


def test_a_record_with_both_an_envelope_and_a_command_is_refused() -> None:
    """Item 9: such a record was decided as the command, its envelope silently dropped."""
    both = orjson.loads(_record("r", "c-1", [CREATE]))
    both["command"] = {"type": "run.cancel"}
    out = validate(
        _source("r", orjson.dumps(both)),
        lambda _r: None,
        HostPolicy(),
        RULES,
        now=NOW,
        partitions=N,
    )
    letter = _letter(out)
    assert (letter["code"], letter["rule"], letter["path"]) == (
        "validation_error",
        "record-shape",
        "",
    )


@pytest.mark.parametrize(
    "value",
    [
        b'{"runId": "tenant-a/run-0000000000000001", "envelope": {"note": "' + SECRET.encode(),
        b'{"runId": "x", "note": "' + SECRET.encode() + b'", "bad": "\xff"}',
        b'{"runId": "tenant-a/run-0000000000000001", "note": "'
        + SECRET.encode()
        + b'", "runId": "tenant-a/run-0000000000000001"}',
    ],
    ids=["truncated", "not-utf8", "duplicate-member"],
)
def test_a_dead_letter_of_an_unparsed_record_is_redacted_by_its_keys_run(value: bytes) -> None:
    """Item 6c: the Kafka key names the run, so the run's secrets apply even when the bytes
    never became a record."""
    out = validate(_source(RUN_S, value), lambda _r: None, SECRETS, RULES, now=NOW, partitions=N)
    assert isinstance(out, Reject)
    letter = orjson.loads(out.value)
    assert letter["code"] in ("record_not_json", "record_not_utf8")
    kept = base64.b64decode(letter["original"]["base64"])
    assert SECRET.encode() not in kept and SECRET.encode() not in out.value
    assert letter["original"]["redacted"] is True


def test_a_run_id_holding_a_secret_never_reaches_a_dead_letter() -> None:
    """Item 6a: the runId is refused as an identifier, and the letter's key and runId are
    redacted (the letter still goes to the record's partition)."""
    run = f"tenant-a/run-{SECRET}"
    key = b"k" * 32
    policy = HostPolicy(secrets={run: (("k", SECRET),)}, command_key=key)
    for value in (
        _record(run, "c-1", [CREATE]),
        orjson.dumps({"runId": run, "command": {"type": "run.create", "workflowId": "w"}}),
    ):
        source = replace(_source(run, value), headers=(("a2ui-gateway", seal(key, value)),))
        out = validate(source, lambda _r: None, policy, RULES, now=NOW, partitions=N)
        letter = _letter(out)
        assert (letter["code"], letter["rule"], letter["path"]) == (
            "envelope_invalid",
            "identifier-secret",
            "/runId",
        )
        assert isinstance(out, Reject)  # _letter checked it; this says so to mypy
        assert out.key is not None and SECRET.encode() not in out.key
        assert SECRET.encode() not in out.value
        assert letter["runId"] == "tenant-a/run-[REDACTED:k]"


@pytest.mark.parametrize(
    "run_id",
    ["r\nINFO validator: forged line", "r\n", "tenant/run id", "a/b/c", "", "é/run", "x" * 129],
)
def test_a_run_id_outside_the_grammar_is_refused_for_envelopes_and_commands(run_id: str) -> None:
    """Item 10: a runId with a newline forged the worker's log lines; the grammar is the
    OpenWOP one (app.core.admission.identifiers.RUN_ID_PATTERN, the same pattern as the schemas)."""
    for value in (
        _record(run_id, "c-1", [CREATE]),
        orjson.dumps({"runId": run_id, "command": {"type": "run.create", "workflowId": "w"}}),
    ):
        source = SourceRecord("a2ui.admission", 0, 0, None, value)
        letter = _letter(
            validate(source, lambda _r: None, HostPolicy(), RULES, now=NOW, partitions=N)
        )
        if run_id == "":
            assert letter["code"] == "validation_error"
            continue
        assert (letter["code"], letter["rule"], letter["path"]) == (
            "validation_error",
            "run-id",
            "/runId",
        )


def test_the_schemas_carry_the_run_id_grammar() -> None:
    from app.core.admission.identifiers import RUN_ID_PATTERN

    docs = load_schema_documents()
    for name in ("admission-record", "host-command"):
        assert docs[name]["properties"]["runId"]["pattern"] == RUN_ID_PATTERN
