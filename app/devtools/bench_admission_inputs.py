"""The admission bench's inputs: the RFC 0209 positive example as an admission record (fresh,
numbered, on a run of 3000 recorded envelopes) and an ``updateComponents`` of 512 components
on a live surface.
"""

from __future__ import annotations

from typing import Any

import orjson

from app.core.admission.decision import Admitted, decide
from app.core.admission.policy import HostPolicy
from app.core.common.examples import rfc0209_positive_payload
from app.core.runlog.run_state import RunState

__all__ = [
    "BASIC",
    "LARGE_RUN",
    "NOW",
    "RUN_ID",
    "components_512",
    "large_run_state",
    "numbered_positive",
    "positive_record",
]


BASIC = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"
RUN_ID = "bench/run-000000000000000001"
NOW = "2026-01-01T00:00:00Z"
LARGE_RUN = 3000  # envelopes already recorded in the run of the third figure
# --- inputs -------------------------------------------------------------------------------------


def _envelope(payload: dict[str, Any], correlation_id: str) -> dict[str, Any]:
    return {
        "type": "ui.a2ui-surface",
        "schemaVersion": 2,
        "envelopeId": f"env-{correlation_id}",
        "correlationId": correlation_id,
        "nodeId": "gate",
        "payload": payload,
        "meta": {"source": "ai-generation", "ts": NOW},
    }


def positive_record() -> dict[str, Any]:
    """The RFC 0209 §Examples positive payload in an admission record, parsed from its bytes
    as the validator parses every record (a dict literal's keys are interned strings, which
    hash and compare faster than the parsed ones: the fresh-run and the large-run figures
    decide like records)."""
    record = {"runId": RUN_ID, "envelope": _envelope(rfc0209_positive_payload(), "corr-positive")}
    parsed: dict[str, Any] = orjson.loads(orjson.dumps(record))
    return parsed


def numbered_positive(i: int) -> dict[str, Any]:
    """The positive example with its own correlationId, envelopeId and surfaceId (number i)."""
    record = positive_record()  # a fresh copy, parsed
    sid = f"brief-{i}"
    payload = record["envelope"]["payload"]
    payload["surfaceId"] = sid
    for message in payload["messages"]:
        for key, body in message.items():
            if key != "version":
                body["surfaceId"] = sid
    record["envelope"]["correlationId"] = f"corr-{i}"
    record["envelope"]["envelopeId"] = f"env-{i}"
    return record


def large_run_state(rules: Any, entries: int = LARGE_RUN) -> RunState:
    """The state of a run that recorded ``entries`` numbered positive envelopes."""
    state = RunState.initial(RUN_ID)
    policy = HostPolicy()
    for i in range(entries):
        outcome = decide(numbered_positive(i), state, policy, rules, now=NOW)
        if not isinstance(outcome, Admitted):
            raise RuntimeError(f"bench input {i} was not admitted: {outcome}")
        state = outcome.state
    return state


def _component(i: int) -> dict[str, Any]:
    """A varied, profile-valid component (every kind of the profile appears)."""
    cid = f"c{i}"
    kind = i % 8
    if kind == 0:
        return {"id": cid, "component": "Text", "text": f"Paragraph {i}", "variant": "body"}
    if kind == 1:
        return {
            "id": cid,
            "component": "TextField",
            "label": f"Field {i}",
            "value": {"path": f"/f{i}"},
            "checks": [
                {
                    "condition": {"call": "required", "args": {"value": {"path": f"/f{i}"}}},
                    "message": "Required",
                }
            ],
        }
    if kind == 2:
        return {
            "id": cid,
            "component": "CheckBox",
            "label": f"Agree {i}",
            "value": {"path": f"/b{i}"},
        }
    if kind == 3:
        return {
            "id": cid,
            "component": "ChoicePicker",
            "label": "Pick",
            "options": [{"label": "A", "value": "a"}, {"label": "B", "value": "b"}],
            "value": {"path": f"/p{i}"},
            "variant": "mutuallyExclusive",
        }
    if kind == 4:
        return {
            "id": cid,
            "component": "Button",
            "child": f"c{i - 4}",
            "action": {"event": {"name": "resume", "context": {"v": {"path": f"/f{i}"}}}},
        }
    if kind == 5:
        return {"id": cid, "component": "Row", "children": [f"c{i - 5}", f"c{i - 4}"]}
    if kind == 6:
        return {
            "id": cid,
            "component": "DateTimeInput",
            "value": {"path": f"/d{i}"},
            "enableDate": True,
        }
    return {"id": cid, "component": "Divider", "axis": "horizontal"}


def components_512() -> tuple[dict[str, Any], dict[str, Any]]:
    """(the createSurface record that makes the surface live, the 512-component record)."""
    sid = "big"
    create = {
        "version": "v0.9",
        "catalogId": BASIC,
        "surfaceId": sid,
        "messages": [{"version": "v0.9", "createSurface": {"surfaceId": sid, "catalogId": BASIC}}],
    }
    components = [
        {"id": "root", "component": "Column", "children": [f"c{i}" for i in range(1, 256)]}
    ]
    components += [_component(i) for i in range(1, 512)]
    update = {
        "version": "v0.9",
        "catalogId": BASIC,
        "surfaceId": sid,
        "messages": [
            {"version": "v0.9", "updateComponents": {"surfaceId": sid, "components": components}}
        ],
    }
    return (
        {"runId": RUN_ID, "envelope": _envelope(create, "corr-create")},
        {"runId": RUN_ID, "envelope": _envelope(update, "corr-512")},
    )
