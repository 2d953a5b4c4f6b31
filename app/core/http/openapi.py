"""The OpenAPI 3.1 document of the routes this worker serves, built from the route table.

Role: ``document(routes, version=...)`` turns the served routes (``app.core.http.routes.served``)
into the document ``GET /v1/openapi.json`` answers (rest-endpoints.md: "self-describing OpenAPI
spec", no auth; the upstream suite's ``discovery`` scenario asks for ``openapi`` 3.1 or later).
Nothing here is written by hand per route: a route's path, methods, auth, right, body and
response codes are the table's, so the document lists exactly what the dispatcher serves.

May import: the standard library and ``app.core.http.routes``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from app.core.http.routes import ANY, Route

__all__ = ["OPENAPI_VERSION", "document"]

OPENAPI_VERSION = "3.1.0"
_PLACEHOLDER = re.compile(r"\{([A-Za-z]+)\}")
_ERROR = {"$ref": "#/components/schemas/Error"}
_REASONS = {
    200: "OK",
    201: "Created",
    302: "Found: the viewer's page",
    400: "validation_error (an OpenWOP error envelope)",
    401: "unauthenticated: a bearer token is required",
    403: "forbidden: the token lacks the route's right in the run's tenant (a run of another "
    "tenant answers as an unknown one: 404)",
    404: "not_found",
    409: "a conflict (e.g. run_terminal, envelope_correlation_conflict)",
    413: "payload_too_large",
    415: "unsupported_media_type: the body must be application/json",
    422: "envelope_invalid, unknown_schema_version, fork_point_invalid",
    503: "a2ui-stream.unavailable: the run's partition has no ready owner (Retry-After)",
    504: "a2ui-stream.outcome_timeout: no validator outcome in time",
}
_PARAM_TEXT = {
    "runId": "The runId in one path segment: projected (acme~2Fr-1) or percent-encoded "
    "(acme%2Fr-1)",
    "nodeId": "The interrupt's nodeId, in the same wire form as a runId",
    "name": "An asset's file name",
    "runPath": "The run's page (its runId in the projected form)",
}


def _response(status: int) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": _REASONS.get(status, "")}
    if status >= 400:
        answer["content"] = {"application/json": {"schema": _ERROR}}
    return answer


def _operation(route: Route) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": route.name,
        "summary": route.summary,
        "tags": [route.tag],
        "responses": {str(code): _response(code) for code in route.responses},
        "security": [{"bearer": []}] if route.auth == "bearer" else [],
    }
    if route.right is not None:
        op["x-a2ui-stream-right"] = route.right  # issue 18: the right the route will check
    names = _PLACEHOLDER.findall(route.path)
    if names:
        op["parameters"] = [
            {
                "name": name,
                "in": "path",
                "required": True,
                "description": _PARAM_TEXT.get(name, name),
                "schema": {"type": "string"},
            }
            for name in names
        ]
    if route.body != "none":
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {}}},
        }
    return op


def document(
    routes: Iterable[Route], *, version: str, title: str = "a2ui-stream"
) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``routes`` (the served ones): every documented route under
    its path template, one operation per method (``HEAD`` is implied by ``GET``)."""
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        if not route.documented:
            continue
        for method in route.methods:
            if method == ANY:
                continue
            paths.setdefault(route.path, {})[method.lower()] = _operation(route)
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": title,
            "version": version,
            "description": "OpenWOP v1 and v2 over HTTP, served by an a2ui-stream worker: "
            "the routes this worker serves at its configuration (docs/http.md).",
        },
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error", "message"],
                    "properties": {
                        "error": {"type": "string"},
                        "message": {"type": "string"},
                        "details": {"type": "object"},
                    },
                    "additionalProperties": False,
                }
            },
        },
    }
