"""Discovery documents (app.core.http.discovery, openwop-a2ui.md §12, §13): the v1 and v2 documents
as golden values, the header choice, the config's refusals, and the v2 seats validated against
the pinned upstream facet schemas (skipped when those are absent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from app.core.admission.policy import SURFACE_VERSIONS, HostPolicy
from app.core.http.discovery import (
    DiscoveryConfig,
    document_for,
    requested_major,
    serves_delta_transport,
    v1_document,
    v2_document,
)
from app.core.http.errors import HttpError
from app.core.http.run_list import ListQuery, parse_list_query

FACETS = (
    Path(__file__).resolve().parents[2].parent
    / "shared"
    / "upstream"
    / "openwop"
    / "spec/v2/facets"
)
SURFACE = "ui.a2ui-surface"


def config(**overrides: Any) -> DiscoveryConfig:
    values: dict[str, Any] = {
        "floor": 2,
        "strictness": "warn",
        "seams": True,
        "delta_transport": True,
        "fixtures": ("conformance-approval",),
        "version": "0.1.0",
    }
    return DiscoveryConfig(**{**values, **overrides})


def test_v1_document_golden() -> None:
    assert v1_document(config()) == {
        "protocolVersion": "1.0",
        "protocolVersions": ["2.0", "1.0"],
        "preferredVersion": "1.0",
        "implementation": {"name": "a2ui-stream", "version": "0.1.0"},
        "supportedEnvelopes": [
            "clarification.request",
            "error",
            "schema.request",
            "schema.response",
            SURFACE,
        ],
        "schemaVersions": {SURFACE: 2},
        "envelopeStrictness": "warn",
        "limits": {"clarificationRounds": 0, "schemaRounds": 0, "envelopesPerTurn": 0},
        # floor 2: v1 surfaces are refused, so the delta transport cannot work (RFC 0209)
        "a2uiSurface": {"deltaTransport": False},
        "fixtures": ["conformance-approval"],
        # floor 2: the v1 envelope accept seam is not served either (app.core.http.envelope_accept)
        "seams": ["/v1/host/sample/a2ui/emit-surface"],
    }


def test_v2_document_golden() -> None:
    assert v2_document(config()) == {
        "protocolVersions": ["2.0", "1.0"],
        "preferredVersion": "1.0",
        "implementation": {"name": "a2ui-stream", "version": "0.1.0"},
        "supportedEnvelopes": {
            "status": "stable",
            "since": "2.0",
            "witness": "witnessable-gated",
            "kinds": [SURFACE],
        },
        "schemaVersions": {
            "status": "stable",
            "since": "2.0",
            "witness": "witnessable-gated",
            "kinds": {SURFACE: 2},
        },
        "envelopeStrictness": {
            "status": "experimental",
            "since": "2.0",
            "until": "2.1",
            "witness": "claims-check",
            "mode": "warn",
        },
        "runList": {
            "status": "experimental",
            "since": "2.0",
            "until": "2.1",
            "witness": "witnessable-gated",
            "maxPageSize": 200,
            "filters": ["workflowId", "status"],
        },
        "conformance": {"seamsProfile": "openwop-conformance-seams-v2"},
        "fixtures": ["conformance-approval"],
    }


@pytest.mark.parametrize(
    ("overrides", "path", "value"),
    [
        ({"floor": 1}, ("schemaVersions",), {SURFACE: 1}),
        ({"floor": 0}, ("schemaVersions",), {SURFACE: 0}),
        ({"strictness": "strict"}, ("envelopeStrictness",), "strict"),
        ({"delta_transport": False}, ("a2uiSurface",), {"deltaTransport": False}),
        ({"floor": 1}, ("a2uiSurface",), {"deltaTransport": True}),
        ({"floor": 0}, ("a2uiSurface",), {"deltaTransport": True}),
        ({"floor": 1, "delta_transport": False}, ("a2uiSurface",), {"deltaTransport": False}),
        ({"version": "9.9.9"}, ("implementation", "version"), "9.9.9"),
        ({"fixtures": ("b", "a")}, ("fixtures",), ["b", "a"]),
    ],
)
def test_v1_document_follows_the_config(
    overrides: dict[str, Any], path: tuple[str, ...], value: Any
) -> None:
    node: Any = v1_document(config(**overrides))
    for key in path:
        node = node[key]
    assert node == value


@pytest.mark.parametrize(
    ("overrides", "path", "value"),
    [
        ({"floor": 1}, ("schemaVersions", "kinds"), {SURFACE: 1}),
        ({"strictness": "strict"}, ("envelopeStrictness", "mode"), "strict"),
        ({"version": "9.9.9"}, ("implementation", "version"), "9.9.9"),
        ({"fixtures": ()}, ("fixtures",), []),
    ],
)
def test_v2_document_follows_the_config(
    overrides: dict[str, Any], path: tuple[str, ...], value: Any
) -> None:
    node: Any = v2_document(config(**overrides))
    for key in path:
        node = node[key]
    assert node == value


def test_without_seams_no_fixtures_and_no_seams_profile() -> None:
    assert "conformance" not in v2_document(config(seams=False))
    assert "fixtures" not in v2_document(config(seams=False))
    assert "fixtures" not in v1_document(config(seams=False))


@pytest.mark.parametrize("delta_transport", [True, False])
@pytest.mark.parametrize("seams", [True, False])
def test_v2_never_carries_the_deprecated_delta_facet(delta_transport: bool, seams: bool) -> None:
    document = v2_document(config(delta_transport=delta_transport, seams=seams))
    assert "a2uiSurface" not in document
    assert "deltaTransport" not in json.dumps(document)


@pytest.mark.parametrize("version", ["2", "2.0", "2.1", "2.x", " 2 ", "2.0\t"])
def test_header_major_2_gets_v2(version: str) -> None:
    assert document_for(version, config()) == v2_document(config())


@pytest.mark.parametrize(
    "version",
    [None, "", "1", "1.0", "1.x", "3", "3.0", "0", "v2", "2.0.0", "02", "two", "2,1", "1 2"],
)
def test_other_headers_get_v1(version: str | None) -> None:
    assert document_for(version, config()) == v1_document(config())


@pytest.mark.parametrize(
    ("version", "major"),
    [
        (None, None),
        ("", None),
        ("1", 1),
        ("2.x", 2),
        ("10.3", 10),
        ("3", 3),
        ("v2", None),
        ("2.0.0", None),
        ("02", None),
        ("1" * 20, None),
    ],
)
def test_requested_major(version: str | None, major: int | None) -> None:
    assert requested_major(version) == major


@pytest.mark.parametrize(
    "overrides",
    [{"strictness": "lenient"}, {"floor": 3}, {"floor": -1}, {"floor": True}, {"floor": "2"}],
)
def test_config_refuses_what_admission_cannot_honour(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        config(**overrides)


def test_config_is_keyword_only_and_frozen() -> None:
    with pytest.raises(TypeError):
        DiscoveryConfig(2, "warn", True, True, (), "0.1.0")  # type: ignore[call-arg]
    with pytest.raises(AttributeError):
        config().floor = 1  # type: ignore[misc]
    assert config(fixtures=["x"]).fixtures == ("x",)


@pytest.mark.parametrize("floor", [0, 1, 2])
@pytest.mark.parametrize("strictness", ["warn", "strict"])
def test_law_the_advertised_catalog_is_an_admission_policy(floor: int, strictness: str) -> None:
    """What v2 advertises builds the policy admission enforces (advertised == enforced)."""
    document = v2_document(config(floor=floor, strictness=strictness))
    policy = HostPolicy(
        kinds=tuple(document["supportedEnvelopes"]["kinds"]),
        schema_versions=document["schemaVersions"]["kinds"],
        strictness=document["envelopeStrictness"]["mode"],
    )
    assert policy.kinds == HostPolicy().kinds
    assert policy.floor(SURFACE) == floor
    assert all(policy.knows(kind) for kind in v1_document(config())["supportedEnvelopes"])


@pytest.mark.parametrize("floor", sorted(SURFACE_VERSIONS))
@pytest.mark.parametrize("seams", [True, False])
def test_v2_does_not_advertise_the_replay_family(floor: int, seams: bool) -> None:
    """No ``replay`` record at any floor, with or without the seams, although ``:fork`` is
    served: a v2 ``replay`` record promises GET /host/effect-seams, replay suppression on
    every outward path (our subscriber frames deliver a fork's copied prefix) and re-execution
    from ``fromSeq`` (our fork re-executes nothing), none of which this host gives
    (docs/http.md "Fork"). The suite then records its replay-gated scenarios inapplicable."""
    document = v2_document(config(floor=floor, seams=seams))
    assert "replay" not in document
    assert "effectSeamsManifest" not in json.dumps(document)


def test_v2_records_that_are_not_stable_carry_until() -> None:
    for name, record in v2_document(config()).items():
        if isinstance(record, dict) and "status" in record:
            assert record["since"] == "2.0", name
            assert ("until" in record) is (record["status"] != "stable"), name


# --- runList (RFC 0182): advertised where GET /runs is served, saying what it enforces ---------

# openwop/openwop schemas/v2/capabilities.schema.json (commit 046ac537, generated from
# spec/v2/declaration.json) ``properties.runList``, transcribed: the family record, closed,
# with maxPageSize required; "core/capabilities.md#runList: witness witnessable-gated; maturity
# experimental". The record's file spec/v2/facets/runList.schema.json is not in the stored
# index, so the rules are pinned here (as tests/core/test_http_snapshot.py pins RunSnapshot's).
_VERSION_PATTERN = r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$"
RUN_LIST_RECORD: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["status", "since", "witness", "maxPageSize"],
    "properties": {
        "status": {"enum": ["stable", "experimental", "deprecated"]},
        "since": {"type": "string", "pattern": _VERSION_PATTERN},
        "until": {
            "type": "string",
            "pattern": r"^((0|[1-9][0-9]*)\.(0|[1-9][0-9]*)|\d{4}-\d{2}-\d{2})$",
        },
        "witness": {
            "enum": [
                "witnessable-unaided",
                "witnessable-gated",
                "seam-gated",
                "claims-check",
                "negative-existence",
            ]
        },
        "maxPageSize": {"type": "integer", "minimum": 1, "maximum": 1000},
        "filters": {
            "type": "array",
            "uniqueItems": True,
            "items": {"type": "string", "enum": ["workflowId", "status"]},
        },
    },
    "allOf": [
        {
            "if": {"properties": {"status": {"const": "stable"}}},
            "then": {"not": {"required": ["until"]}},
        },
        {
            "if": {"properties": {"status": {"enum": ["experimental", "deprecated"]}}},
            "then": {"required": ["until"]},
        },
    ],
}


@pytest.mark.parametrize("floor", sorted(SURFACE_VERSIONS))
@pytest.mark.parametrize("seams", [True, False])
@pytest.mark.parametrize("strictness", ["warn", "strict"])
def test_v2_advertises_the_run_list_at_every_configuration(
    floor: int, seams: bool, strictness: str
) -> None:
    """GET /runs is served at every configuration (routes.py ``list_runs``, ``when="always"``),
    and runs.md §Surface answers an unadvertised gated operation with 404: so the record is
    in every v2 document, and it is a valid upstream ``runList`` record."""
    record = v2_document(config(floor=floor, seams=seams, strictness=strictness))["runList"]
    validator = Draft202012Validator(RUN_LIST_RECORD)
    assert list(validator.iter_errors(record)) == []
    # a v2 record's since is a minor of this host's protocolVersions (capabilities.schema.json)
    assert record["since"] in v2_document(config())["protocolVersions"]


@pytest.mark.parametrize(
    "bad",
    [
        {"status": "stable", "since": "2.0", "witness": "witnessable-gated"},  # no maxPageSize
        {"status": "stable", "since": "2.0", "witness": "witnessable-gated", "maxPageSize": 0},
        {"status": "experimental", "since": "2.0", "witness": "witnessable-gated",
         "maxPageSize": 5},  # experimental without until
        {"status": "stable", "since": "2.0", "witness": "witnessable-gated", "maxPageSize": 5,
         "filters": ["tenant"]},
        {"status": "stable", "since": "2.0", "witness": "witnessable-gated", "maxPageSize": 5,
         "sortOrder": "newest"},  # closed
    ],
)  # fmt: skip
def test_the_pinned_run_list_record_can_refuse(bad: dict[str, Any]) -> None:
    assert list(Draft202012Validator(RUN_LIST_RECORD).iter_errors(bad)) != []


def test_law_the_advertised_run_list_is_what_the_listing_enforces() -> None:
    """advertised == enforced: a page of maxPageSize is accepted and one more is refused, and
    every advertised filter is one the query reads (exact match, carried in the query)."""
    record = v2_document(config())["runList"]
    size = record["maxPageSize"]
    assert parse_list_query(str(size), None, None, None) == ListQuery(size)
    assert isinstance(parse_list_query(str(size + 1), None, None, None), HttpError)
    given = {"workflowId": "wf", "status": "running"}
    query = parse_list_query(None, None, given["workflowId"], given["status"])
    assert isinstance(query, ListQuery)
    read = {"workflowId": query.workflow_id, "status": query.status}
    assert record["filters"] == list(read) and read == given


# --- the v2 seats against the pinned upstream facet schemas ----------------------------------


def _facet(name: str) -> Draft202012Validator:
    path = FACETS / f"{name}.schema.json"
    if not path.is_file():
        pytest.skip(f"upstream facet schema not found at {path}")
    schema = json.loads(path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@pytest.mark.parametrize("seat", ["supportedEnvelopes", "schemaVersions"])
@pytest.mark.parametrize("floor", [0, 1, 2])
def test_v2_seats_validate_against_the_upstream_facets(seat: str, floor: int) -> None:
    validator = _facet(seat)
    record = v2_document(config(floor=floor))[seat]
    assert list(validator.iter_errors(record)) == []


@pytest.mark.parametrize(
    ("seat", "bad"),
    [
        ("supportedEnvelopes", {"kinds": [SURFACE, SURFACE]}),
        ("supportedEnvelopes", {"kinds": [""]}),
        ("schemaVersions", {"kinds": {SURFACE: -1}}),
        ("schemaVersions", {"kinds": {SURFACE: "2"}}),
    ],
)
def test_the_upstream_facets_can_refuse(seat: str, bad: dict[str, Any]) -> None:
    # The validation above is not vacuous: the same facet refuses a wrong seat.
    assert list(_facet(seat).iter_errors(bad)) != []


@pytest.mark.parametrize("floor", sorted(SURFACE_VERSIONS))
@pytest.mark.parametrize("asked", [True, False])
def test_the_delta_transport_is_advertised_only_where_v1_surfaces_are_admitted(
    floor: int, asked: bool
) -> None:
    """a2ui-surface-delta-transport at the default floor 2: the facet is advertised (and
    served: the same predicate) only when the floor admits v1 surfaces."""
    cfg = config(floor=floor, delta_transport=asked)
    advertised = v1_document(cfg)["a2uiSurface"]["deltaTransport"]
    assert advertised == serves_delta_transport(cfg) == (asked and floor < 2)
