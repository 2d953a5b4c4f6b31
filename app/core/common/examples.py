"""Reference payloads from the specifications, as data (one definition for the tests, the
benchmarks and the docs).

Pure: standard library only. Each function returns a fresh copy, so a caller may mutate it.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["BASIC_CATALOG", "rfc0209_positive_payload"]

BASIC_CATALOG = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"

# RFC 0209 §Examples (openwop-a2ui.md §4 "Positive example"), key order as published.
_RFC0209_POSITIVE: dict[str, Any] = {
    "version": "v0.9",
    "catalogId": BASIC_CATALOG,
    "surfaceId": "approve-brief",
    "messages": [
        {
            "version": "v0.9",
            "createSurface": {"surfaceId": "approve-brief", "catalogId": BASIC_CATALOG},
        },
        {
            "version": "v0.9",
            "updateComponents": {
                "surfaceId": "approve-brief",
                "components": [
                    {"id": "root", "component": "Column", "children": ["h", "name", "submit"]},
                    {"id": "h", "component": "Text", "text": "Launch brief", "variant": "h2"},
                    {
                        "id": "name",
                        "component": "TextField",
                        "label": "Product name",
                        "value": {"path": "/name"},
                        "checks": [
                            {
                                "condition": {
                                    "call": "required",
                                    "args": {"value": {"path": "/name"}},
                                },
                                "message": "Required",
                            }
                        ],
                    },
                    {"id": "submit_label", "component": "Text", "text": "Submit"},
                    {
                        "id": "submit",
                        "component": "Button",
                        "child": "submit_label",
                        "action": {
                            "event": {"name": "resume", "context": {"name": {"path": "/name"}}}
                        },
                    },
                ],
            },
        },
        {
            "version": "v0.9",
            "updateDataModel": {"surfaceId": "approve-brief", "value": {"name": ""}},
        },
    ],
}


def rfc0209_positive_payload() -> dict[str, Any]:
    """The RFC 0209 positive v2 payload (surface ``approve-brief``), a fresh copy."""
    return copy.deepcopy(_RFC0209_POSITIVE)
