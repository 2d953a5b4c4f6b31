"""The schema documents themselves: valid JSON Schema 2020-12, our own ids, self-contained, and
loadable; plus the two record shapes no producer writes (recorded event, dead letter)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from app.core.admission.refusal import CODES
from app.shell.schema_files import SCHEMA_DIR, load_schema_documents

NAMES = {
    "ai-envelope",
    "admission-record",
    "a2ui-surface-v1",
    "a2ui-surface-v2-profile",
    "recorded-event",
    "dead-letter",
}


@pytest.fixture(scope="module")
def documents() -> dict[str, dict[str, Any]]:
    return load_schema_documents()


def validator(documents: dict[str, dict[str, Any]], name: str) -> Draft202012Validator:
    registry = Registry().with_resources(
        (doc["$id"], DRAFT202012.create_resource(doc)) for doc in documents.values()
    )
    return Draft202012Validator(
        documents[name], registry=registry, format_checker=Draft202012Validator.FORMAT_CHECKER
    )


def test_loads_every_document(documents: dict[str, dict[str, Any]]) -> None:
    # The admission documents are all there (others, e.g. the subscription registry's, may be).
    assert set(documents) >= NAMES
    assert set(documents) == {
        p.name.removesuffix(".schema.json") for p in SCHEMA_DIR.glob("*.schema.json")
    }


@pytest.mark.parametrize("name", sorted(NAMES))
def test_is_our_own_valid_2020_12_document(documents: dict[str, dict[str, Any]], name: str) -> None:
    document = documents[name]
    Draft202012Validator.check_schema(document)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert document["$id"] == f"urn:a2ui-stream:schema:{name}"
    assert document["description"]
    # every root is closed, or a oneOf of closed branches (recorded-event: envelope | host)
    branches = (
        [documents[name]["$defs"][ref["$ref"].rsplit("/", 1)[1]] for ref in document["oneOf"]]
        if "oneOf" in document
        else [document]
    )
    assert all(branch.get("additionalProperties") is False for branch in branches)


@pytest.mark.parametrize("name", sorted(NAMES))
def test_refs_stay_inside_our_documents(documents: dict[str, dict[str, Any]], name: str) -> None:
    """No external or network $ref: only local fragments and our own urn ids."""
    stack: list[Any] = [documents[name]]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                assert ref.startswith("#/$defs/") or ref.startswith("urn:a2ui-stream:schema:")
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def test_loader_explains_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="schema directory"):
        load_schema_documents(tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="no"):
        load_schema_documents(tmp_path)


def test_loader_reads_an_explicit_directory(tmp_path: Path) -> None:
    (tmp_path / "x.schema.json").write_text('{"type": "object"}')
    (tmp_path / "ignored.json").write_text("{}")
    assert load_schema_documents(tmp_path) == {"x": {"type": "object"}}


# -- recorded event and dead letter ---------------------------------------------------------------


def recorded(**changes: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "eventId": "evt-0123456789abcdef",
        "runId": "tenant/run-0123456789abcdef",
        "sequence": 0,
        "type": "ui.a2ui-surface",
        "schemaVersion": 1,
        "timestamp": "2026-11-30T05:00:00Z",
        "causationId": "run:gate:0:k",
        "contentTrust": "untrusted",
        "nodeId": "gate",
        "engineVersion": 1,
        "payload": {
            "envelope": {"type": "ui.a2ui-surface", "payload": {"z": 1, "a": 2}},
            "version": 2,
            "trust": "untrusted",
            "driftFrom": 1,
        },
    }
    event.update(changes)
    return event


@pytest.mark.parametrize(
    ("name", "event", "valid"),
    [
        ("full", recorded(), True),
        (
            "minimal",
            {k: v for k, v in recorded().items() if k not in ("nodeId", "engineVersion")},
            True,
        ),
        ("short-event-id", recorded(eventId="evt-1"), False),
        ("negative-sequence", recorded(sequence=-1), False),
        ("schema-version-0", recorded(schemaVersion=0), False),
        ("no-causation", {k: v for k, v in recorded().items() if k != "causationId"}, False),
        ("trust-unknown", recorded(contentTrust="maybe"), False),
        ("root-extra", recorded(extra=1), False),
        ("payload-extra", recorded(payload={**recorded()["payload"], "x": 1}), False),
        (
            "payload-envelope-list",
            recorded(payload={**recorded()["payload"], "envelope": []}),
            False,
        ),
        ("payload-no-version", recorded(payload={"envelope": {}, "trust": "trusted"}), False),
        ("bad-timestamp", recorded(timestamp="now"), False),
    ],
)
def test_recorded_event(
    documents: dict[str, dict[str, Any]], name: str, event: Any, valid: bool
) -> None:
    assert validator(documents, "recorded-event").is_valid(event) is valid, name


def dead_letter(**changes: Any) -> dict[str, Any]:
    original = b'{"runId": "r", "envelope": 1}'
    letter: dict[str, Any] = {
        "code": "validation_error",
        "rule": "envelope-shape",
        "path": "/envelope",
        "message": "an AI envelope is an object, not a number",
        "details": {"rule": "x"},
        "runId": "r",
        "correlationId": None,
        "source": {"topic": "a2ui.admissions", "partition": 0, "offset": 42},
        "timestamp": "2026-11-30T05:00:00Z",
        "original": {
            "base64": base64.b64encode(original).decode(),
            "sha256": hashlib.sha256(original).hexdigest(),
            "size": len(original),
            "redacted": False,
        },
    }
    letter.update(changes)
    return letter


@pytest.mark.parametrize(
    ("name", "letter", "valid"),
    [
        ("full", dead_letter(), True),
        ("whole-record-path", dead_letter(path="", runId=None), True),
        ("relative-path", dead_letter(path="envelope"), False),
        ("code-uppercase", dead_letter(code="Bad"), False),
        ("details-list", dead_letter(details=[]), False),
        ("no-source", {k: v for k, v in dead_letter().items() if k != "source"}, False),
        (
            "negative-offset",
            dead_letter(source={"topic": "t", "partition": 0, "offset": -1}),
            False,
        ),
        (
            "sha-uppercase",
            dead_letter(original={**dead_letter()["original"], "sha256": "A" * 64}),
            False,
        ),
        ("original-extra", dead_letter(original={**dead_letter()["original"], "x": 1}), False),
        ("root-extra", dead_letter(extra=1), False),
    ],
)
def test_dead_letter(
    documents: dict[str, dict[str, Any]], name: str, letter: Any, valid: bool
) -> None:
    assert validator(documents, "dead-letter").is_valid(letter) is valid, name


def test_every_refusal_code_fits_the_dead_letter(documents: dict[str, dict[str, Any]]) -> None:
    check = validator(documents, "dead-letter")
    for code in CODES:
        assert check.is_valid(dead_letter(code=code)), code


def test_every_topic_value_schema_exists() -> None:
    import json

    topics = json.loads((SCHEMA_DIR.parent / "topics" / "topics.json").read_text())
    for topic in topics["topics"] + topics["templates"]:
        if topic["value_schema"] is not None:
            assert (SCHEMA_DIR.parent / topic["value_schema"]).is_file(), topic["id"]
