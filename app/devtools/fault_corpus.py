"""The fault suite's corpus: a seeded mix of admission records (valid surface lifecycles, fold
violations, excluded components, bad shapes, undecodable bytes, re-sends) and the outcomes the
core decides for them (``expected_outcomes``). Part of the kit (``app.devtools.fault_kit``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.core.admission.decision import Admitted, Deduplicated, decide
from app.core.admission.payload_rules import PayloadRules
from app.core.admission.policy import HostPolicy
from app.core.runlog.run_state import RunState
from app.shell.schema_files import load_schema_documents

__all__ = [
    "BASIC",
    "Expected",
    "Published",
    "RULES",
    "components",
    "corpus",
    "create",
    "data",
    "delete",
    "envelope",
    "expected_outcomes",
    "image",
]


BASIC = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"
RULES = PayloadRules.from_documents(load_schema_documents())

# -- corpus -----------------------------------------------------------------------------------


def envelope(run: str, n: int, messages: list[Any], sid: str, **extra: Any) -> dict[str, Any]:
    env: dict[str, Any] = {
        "type": "ui.a2ui-surface",
        "schemaVersion": 2,
        "envelopeId": f"env-{run}-{n}",
        "correlationId": f"corr-{run}-{n}",
        "payload": {"version": "v0.9", "catalogId": BASIC, "surfaceId": sid, "messages": messages},
        "meta": {"source": "ai-generation", "ts": "2026-11-30T00:00:00Z"},
    }
    env.update(extra)
    return {"runId": run, "envelope": env}


def create(sid: str) -> dict[str, Any]:
    return {"version": "v0.9", "createSurface": {"surfaceId": sid, "catalogId": BASIC}}


def components(sid: str, text: str) -> dict[str, Any]:
    return {
        "version": "v0.9",
        "updateComponents": {
            "surfaceId": sid,
            "components": [
                {"id": "root", "component": "Column", "children": ["t"]},
                {"id": "t", "component": "Text", "text": text},
            ],
        },
    }


def data(sid: str, value: Any) -> dict[str, Any]:
    return {"version": "v0.9", "updateDataModel": {"surfaceId": sid, "path": "/v", "value": value}}


def delete(sid: str) -> dict[str, Any]:
    return {"version": "v0.9", "deleteSurface": {"surfaceId": sid}}


def image(sid: str) -> dict[str, Any]:
    return {
        "version": "v0.9",
        "updateComponents": {
            "surfaceId": sid,
            "components": [
                {"id": "hero", "component": "Image", "url": "https://evil.example/x.png"}
            ],
        },
    }


@dataclass
class Published:
    run: str
    key: bytes
    value: bytes
    correlation_id: str | None


def corpus(runs: int, per_run: int, seed: int, prefix: str = "run") -> list[Published]:  # noqa: C901 - one weighted roll per record, read top to bottom
    """A mixed stream: valid surface lifecycles, fold violations, excluded components, bad
    shapes, undecodable bytes and producer re-sends of earlier correlationIds, interleaved
    across runs."""
    rng = random.Random(seed)
    streams: list[list[Published]] = []
    for r in range(runs):
        run = f"{prefix}-{seed}-{r:03d}"
        out: list[Published] = []
        live: set[str] = set()
        for n in range(per_run):
            roll = rng.random()
            sid = f"s{rng.randrange(3)}"
            if roll < 0.05 and out:
                out.append(rng.choice(out))  # a producer retry: same bytes, same correlationId
                continue
            if roll < 0.08:
                out.append(Published(run, run.encode(), b"\xff\xfe not utf-8", None))
                continue
            if roll < 0.11:
                out.append(
                    Published(run, run.encode(), b'{"runId": "' + run.encode() + b'", ', None)
                )
                continue
            if roll < 0.15:
                rec = envelope(run, n, [image(sid)], sid)
            elif roll < 0.19:
                rec = envelope(run, n, [data(sid, n)], sid)
                del rec["envelope"]["meta"]["source"]  # shape: validation_error
            elif sid not in live:
                rec = envelope(run, n, [create(sid), components(sid, f"t{n}")], sid)
                if rng.random() < 0.2:
                    rec = envelope(run, n, [data(sid, n)], sid)  # fold: no createSurface yet
                else:
                    live.add(sid)
            elif roll < 0.25:
                rec = envelope(run, n, [delete(sid)], sid)
                live.discard(sid)
            elif roll < 0.30:
                rec = envelope(run, n, [create(sid)], sid)  # fold: createSurface while live
            else:
                rec = envelope(run, n, [data(sid, n), components(sid, f"t{n}")], sid)
            out.append(
                Published(run, run.encode(), orjson.dumps(rec), rec["envelope"]["correlationId"])
            )
        streams.append(out)
    # Interleave runs, keeping each run's own order (that order is what must be preserved).
    merged: list[Published] = []
    cursors = [0] * runs
    while any(cursors[i] < len(streams[i]) for i in range(runs)):
        i = rng.choice([i for i in range(runs) if cursors[i] < len(streams[i])])
        merged.append(streams[i][cursors[i]])
        cursors[i] += 1
    return merged


@dataclass
class Expected:
    admitted: dict[str, list[str]] = field(default_factory=dict)  # run -> correlationIds in order
    refused: int = 0
    deduplicated: int = 0


def expected_outcomes(records: list[Published], policy: HostPolicy | None = None) -> Expected:
    """The oracle: decide every record in publication order, one state per run."""
    policy = policy or HostPolicy()
    states: dict[str, RunState] = {}
    exp = Expected()
    for rec in records:
        try:
            record = orjson.loads(rec.value)
        except orjson.JSONDecodeError:
            exp.refused += 1
            continue
        outcome = decide(record, states.get(rec.run), policy, RULES, now="2026-11-30T00:00:00Z")
        if isinstance(outcome, Admitted):
            states[rec.run] = outcome.state
            exp.admitted.setdefault(rec.run, []).append(str(rec.correlation_id))
        elif isinstance(outcome, Deduplicated):
            exp.deduplicated += 1
        else:
            exp.refused += 1
    return exp
