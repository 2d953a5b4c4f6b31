"""The OpenAPI 3.1 document built from the route table (app.core.http.openapi): the document's
shape (OpenAPI 3.1's required members, path templating, operations, responses, security), its
schemas valid JSON Schema 2020-12 (OpenAPI 3.1's dialect), and exactly the served routes."""

from __future__ import annotations

import re

import pytest
from jsonschema import Draft202012Validator

from app.core.http.openapi import document
from app.core.http.routes import ROUTES, served

CONFIGS = [
    served(ROUTES, seams=False, envelope_accept=False),
    served(ROUTES, seams=True, envelope_accept=False),
    served(ROUTES, seams=True, envelope_accept=True),
]
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def _schemas(value: object) -> list[object]:
    """Every Schema Object in the document (under ``schema`` keys and components.schemas)."""
    found: list[object] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "schema":
                found.append(item)
            else:
                found += _schemas(item)
    elif isinstance(value, list):
        for item in value:
            found += _schemas(item)
    return found


@pytest.mark.parametrize("routes", CONFIGS)
def test_the_document_has_openapi_3_1_shape(routes: tuple) -> None:
    doc = document(routes, version="9.9.9")
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["title"] and doc["info"]["version"] == "9.9.9"
    assert isinstance(doc["paths"], dict) and doc["paths"]
    schemes = doc["components"]["securitySchemes"]
    operation_ids = []
    for path, item in doc["paths"].items():
        assert path.startswith("/")
        placeholders = re.findall(r"\{([^}]+)\}", path)
        assert set(item) <= METHODS and item, path
        for op in item.values():
            operation_ids.append(op["operationId"])
            assert op["responses"] and all(re.fullmatch(r"[1-5]\d\d", c) for c in op["responses"])
            assert all(r["description"] for r in op["responses"].values())
            params = [p for p in op.get("parameters", []) if p["in"] == "path"]
            # OpenAPI 3.1 §4.8.2 path templating: each template expression is a required parameter
            assert sorted(p["name"] for p in params) == sorted(placeholders), path
            assert all(p["required"] is True for p in params)
            for requirement in op["security"]:
                assert set(requirement) <= set(schemes)
            if "requestBody" in op:
                assert op["requestBody"]["content"]
    assert len(operation_ids) == len(set(operation_ids)), "operationId is unique (§4.8.10)"
    Draft202012Validator.check_schema(doc["components"]["schemas"]["Error"])
    for schema in _schemas(doc):
        if "$ref" not in schema:  # type: ignore[operator]
            Draft202012Validator.check_schema(schema)
        else:
            ref = schema["$ref"]  # type: ignore[index]
            assert ref.removeprefix("#/components/schemas/") in doc["components"]["schemas"]


@pytest.mark.parametrize("routes", CONFIGS)
def test_the_document_lists_exactly_the_documented_routes(routes: tuple) -> None:
    doc = document(routes, version="1")
    listed = {(m.upper(), p) for p, item in doc["paths"].items() for m in item}
    assert listed == {(m, r.path) for r in routes if r.documented for m in r.methods}
    for route in routes:
        if not route.documented:
            continue
        for method in route.methods:
            op = doc["paths"][route.path][method.lower()]
            assert op["operationId"] == route.name
            assert (op["security"] == []) == (route.auth == "none")
            assert op.get("x-a2ui-stream-right") == route.right
            assert ("requestBody" in op) == (route.body != "none")
            assert set(op["responses"]) == {str(c) for c in route.responses}


def test_the_seams_are_listed_only_where_served() -> None:
    plain, seams, everything = (set(document(r, version="1")["paths"]) for r in CONFIGS)
    assert "/conformance/seams/sample/a2ui/emit-surface" not in plain
    assert "/conformance/seams/sample/a2ui/emit-surface" in seams
    assert "/v1/host/sample/envelope/accept" not in seams
    assert "/v1/host/sample/envelope/accept" in everything
    assert "/v1/openapi.json" in plain and "/runs/{rest}" not in everything
