"""The projection bench's inputs: envelopes of a 100-component surface updated one leaf at a
time (v2: the A2UI v0.9 fold; v1: full payloads), recorded by the real admission decision and
materialized by ``surfaces.project``.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import orjson

from app.core.admission.decision import Admitted, decide
from app.core.admission.policy import SURFACE_KIND, HostPolicy
from app.core.projection.surfaces import Projection, SurfaceChange, project
from app.core.runlog.events import RecordedEvent, parse_event

__all__ = [
    "BASIC",
    "COMPONENTS",
    "FANOUT",
    "FANOUT_TOPICS",
    "NOW",
    "RANDOM_PAIRS",
    "RUN_ID",
    "TARGET_BYTES_RATIO",
    "TARGET_SPEEDUP",
    "surface_changes",
    "v1_component",
    "v1_events",
    "v2_events",
]


BASIC = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"
RUN_ID = "bench/run-000000000000000002"
NOW = "2026-01-01T00:00:00Z"
COMPONENTS = 100
TARGET_BYTES_RATIO = 0.05
TARGET_SPEEDUP = 20.0
FANOUT = (1, 100, 1000)
FANOUT_TOPICS = 1000  # one topic per subscriber, as the projector writes
RANDOM_PAIRS = 3000


# --- inputs: envelopes recorded by the real admission decision ---------------------------------


def _envelope(payload: dict[str, Any], n: int, schema_version: int) -> dict[str, Any]:
    return {
        "type": SURFACE_KIND,
        "schemaVersion": schema_version,
        "envelopeId": f"env-bench-{n}",
        "correlationId": f"corr-bench-{n}",
        "payload": payload,
        "meta": {"source": "ai-generation", "ts": NOW},
    }


def _v2_component(i: int) -> dict[str, Any]:
    cid = f"c{i}"
    kind = i % 5
    if kind == 0:
        return {
            "id": cid,
            "component": "TextField",
            "label": f"Field {i}",
            "value": {"path": f"/f{i}"},
        }
    if kind == 1:
        return {
            "id": cid,
            "component": "CheckBox",
            "label": f"Agree {i}",
            "value": {"path": f"/b{i}"},
        }
    if kind == 2:
        return {"id": cid, "component": "Divider", "axis": "horizontal"}
    return {
        "id": cid,
        "component": "Text",
        "text": f"Paragraph {i} of the brief",
        "variant": "body",
    }


def v1_component(i: int) -> dict[str, Any]:
    kind = i % 4
    if kind == 0:
        return {"component": "field.text", "id": f"f{i}", "label": f"Field {i}", "required": True}
    if kind == 1:
        return {"component": "heading", "text": f"Section {i}", "level": 2}
    return {"component": "text", "text": f"Paragraph {i} of the brief"}


def _text_ids() -> list[int]:
    return [i for i in range(1, COMPONENTS) if i % 5 in (3, 4)]


def v2_events(updates: int, rules: Any) -> list[RecordedEvent]:
    """createSurface + 100 components, then ``updates`` updateComponents of one Text each."""
    sid = "bench"
    comps = [{"id": "root", "component": "Column", "children": [f"c{i}" for i in range(1, 100)]}]
    comps += [_v2_component(i) for i in range(1, COMPONENTS)]
    first = {
        "version": "v0.9",
        "catalogId": BASIC,
        "surfaceId": sid,
        "messages": [
            {"version": "v0.9", "createSurface": {"surfaceId": sid, "catalogId": BASIC}},
            {"version": "v0.9", "updateComponents": {"surfaceId": sid, "components": comps}},
        ],
    }
    payloads = [first]
    texts = _text_ids()
    rnd = random.Random(2)
    for n in range(updates):
        i = rnd.choice(texts)
        leaf = {"id": f"c{i}", "component": "Text", "text": f"Update {n}", "variant": "body"}
        payloads.append(
            {
                "version": "v0.9",
                "catalogId": BASIC,
                "surfaceId": sid,
                "messages": [
                    {
                        "version": "v0.9",
                        "updateComponents": {"surfaceId": sid, "components": [leaf]},
                    }
                ],
            }
        )
    return _record(payloads, HostPolicy(), rules, 2)


def v1_events(updates: int, rules: Any) -> list[RecordedEvent]:
    """A 100-component v1 surface, then ``updates`` full payloads with one text changed."""
    current: dict[str, Any] = {
        "catalogVersion": "0.9.1",
        "surface": {"title": "Bench", "components": [v1_component(i) for i in range(COMPONENTS)]},
    }
    payloads = [current]
    texts = [i for i in range(COMPONENTS) if i % 4 in (1, 2, 3)]
    rnd = random.Random(1)
    for n in range(updates):
        current = copy.deepcopy(current)
        current["surface"]["components"][rnd.choice(texts)]["text"] = f"Update {n}"
        payloads.append(current)
    return _record(payloads, HostPolicy(schema_versions={SURFACE_KIND: 1}), rules, 1)


def _record(
    payloads: list[dict[str, Any]], policy: HostPolicy, rules: Any, version: int
) -> list[RecordedEvent]:
    state = None
    events = []
    for n, payload in enumerate(payloads):
        record = {"runId": RUN_ID, "envelope": _envelope(payload, n, version)}
        outcome = decide(record, state, policy, rules, now=NOW)
        if not isinstance(outcome, Admitted):
            raise RuntimeError(f"bench input {n} was not admitted: {outcome}")
        state = outcome.state
        # the projector reads the log: decode what the validator wrote, as the shell will
        event = parse_event(orjson.dumps(outcome.event))
        assert event is not None
        events.append(event)
    return events


def surface_changes(events: list[RecordedEvent]) -> list[SurfaceChange]:
    state = Projection()
    out: list[SurfaceChange] = []
    for event in events:
        state, changes = project(state, event)
        out.extend(changes)
    return out
