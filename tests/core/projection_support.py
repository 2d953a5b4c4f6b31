"""Builders for projection tests: recorded events (schemas/recorded-event) written by hand, so
the fold can be driven through cases admission would never produce, plus v1/v2 payloads."""

from __future__ import annotations

import itertools
from typing import Any

from app.core.runlog.events import RecordedEvent

RUN = "tenant-a/run-0000000000000001"
BASIC = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"

_ids = itertools.count()


def event(
    sequence: int,
    body: Any,
    *,
    run_id: str = RUN,
    trust: str = "trusted",
    partial: dict[str, Any] | None = None,
    kind: str = "ui.a2ui-surface",
    version: int | None = None,
) -> RecordedEvent:
    """A recorded event carrying an envelope whose payload is ``body``."""
    n = next(_ids)
    envelope: dict[str, Any] = {
        "type": kind,
        "schemaVersion": 2,
        "envelopeId": f"env-{n}",
        "correlationId": f"corr-{n}",
        "payload": body,
        "meta": {"source": "ai-generation", "ts": "2026-01-01T00:00:00Z"},
    }
    if partial is not None:
        envelope["partial"] = partial
    if version is None:
        version = 2 if isinstance(body, dict) and body.get("version") == "v0.9" else 1
    return {
        "eventId": f"evt-{run_id.replace('/', '-')}-{sequence:012d}",
        "runId": run_id,
        "sequence": sequence,
        "type": kind,
        "schemaVersion": 1,
        "timestamp": "2026-01-01T00:00:00Z",
        "causationId": envelope["correlationId"],
        "contentTrust": trust,
        "payload": {"envelope": envelope, "version": version, "trust": trust},
    }


def v2(sid: str, *messages: dict[str, Any]) -> dict[str, Any]:
    return {"version": "v0.9", "catalogId": BASIC, "surfaceId": sid, "messages": list(messages)}


def create(sid: str = "s", theme: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"surfaceId": sid, "catalogId": BASIC}
    if theme is not None:
        body["theme"] = theme
    return {"version": "v0.9", "createSurface": body}


def components(sid: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {"version": "v0.9", "updateComponents": {"surfaceId": sid, "components": list(items)}}


def data(sid: str, **body: Any) -> dict[str, Any]:
    return {"version": "v0.9", "updateDataModel": {"surfaceId": sid, **body}}


def delete(sid: str = "s") -> dict[str, Any]:
    return {"version": "v0.9", "deleteSurface": {"surfaceId": sid}}


def text(cid: str, value: str = "x") -> dict[str, Any]:
    return {"id": cid, "component": "Text", "text": value}


def column(cid: str, *children: str) -> dict[str, Any]:
    return {"id": cid, "component": "Column", "children": list(children)}


# RFC 0114 / openwop-a2ui.md §16c: the reconstruction example's base surface.
FULL_SURFACE_V0: dict[str, Any] = {
    "catalogVersion": "0.9.1",
    "surface": {
        "title": "Schedule the kickoff",
        "components": [
            {"component": "heading", "text": "Schedule the kickoff", "level": 2},
            {"component": "text", "text": "Pick a date and confirm."},
            {"component": "field.text", "id": "name", "label": "Your name", "required": True},
            {
                "component": "action.button",
                "id": "go",
                "label": "Confirm",
                "action": {"target": "resume"},
            },
        ],
    },
}
