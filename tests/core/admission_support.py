"""Builders for admission tests, mirroring the conformance suite's (openwop-a2ui.md §16a
"Envelope and message builders"), and one compiled ``PayloadRules`` for the whole session."""

from __future__ import annotations

import copy
import itertools
from functools import lru_cache
from typing import Any

from app.core.admission.decision import Admitted, Outcome, decide
from app.core.admission.payload_rules import PayloadRules
from app.core.admission.policy import HostPolicy
from app.core.common.examples import rfc0209_positive_payload
from app.core.runlog.events import RecordedEvent
from app.core.runlog.run_state import RunState
from app.shell.schema_files import load_schema_documents

BASIC = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"
RUN = "tenant-a/run-0000000000000001"
NOW = "2026-01-01T00:00:00Z"
TS = "2026-01-01T00:00:00Z"

POSITIVE: dict[str, Any] = rfc0209_positive_payload()

V1_SURFACE: dict[str, Any] = {
    "catalogVersion": "0.9.1",
    "surface": {
        "title": "Kickoff",
        "components": [
            {"component": "heading", "text": "Kickoff", "level": 2},
            {
                "component": "action.button",
                "id": "go",
                "label": "Go",
                "action": {"target": "resume"},
            },
        ],
    },
}
V1_LATER: dict[str, Any] = {
    "catalogVersion": "0.9.1",
    "surface": {"components": [{"component": "heading", "text": "Kickoff, later"}]},
}

_counter = itertools.count()


@lru_cache(maxsize=1)
def rules() -> PayloadRules:
    return PayloadRules.from_documents(load_schema_documents())


def create_msg(sid: str = "s") -> dict[str, Any]:
    return {"version": "v0.9", "createSurface": {"surfaceId": sid, "catalogId": BASIC}}


def components_msg(sid: str = "s") -> dict[str, Any]:
    msg = copy.deepcopy(POSITIVE["messages"][1])
    msg["updateComponents"]["surfaceId"] = sid
    return msg


def data_msg(sid: str = "s", **body: Any) -> dict[str, Any]:
    return {
        "version": "v0.9",
        "updateDataModel": {"surfaceId": sid, **(body or {"value": {"name": "x"}})},
    }


def delete_msg(sid: str = "s") -> dict[str, Any]:
    return {"version": "v0.9", "deleteSurface": {"surfaceId": sid}}


def v2(sid: str, *messages: dict[str, Any]) -> dict[str, Any]:
    """A v2 payload for ``sid`` holding ``messages`` as given (no stamping: tests that break
    surface-id-equality pass a foreign message)."""
    return {"version": "v0.9", "catalogId": BASIC, "surfaceId": sid, "messages": list(messages)}


def envelope(
    payload: Any,
    *,
    schema_version: int | None = 2,
    kind: str = "ui.a2ui-surface",
    correlation_id: str | None = None,
    node_id: str | None = None,
    trust: str | None = None,
    partial: dict[str, Any] | None = None,
) -> dict[str, Any]:
    n = next(_counter)
    env: dict[str, Any] = {"type": kind}
    if schema_version is not None:
        env["schemaVersion"] = schema_version
    env["envelopeId"] = f"env-test-{n}"
    env["correlationId"] = correlation_id or f"corr-test-{n}"
    if node_id is not None:
        env["nodeId"] = node_id
    env["payload"] = payload
    meta: dict[str, Any] = {"source": "ai-generation", "ts": TS}
    if trust is not None:
        meta["contentTrust"] = trust
    env["meta"] = meta
    if partial is not None:
        env["partial"] = partial
    return env


def record(env: dict[str, Any], run_id: str = RUN) -> dict[str, Any]:
    return {"runId": run_id, "envelope": env}


class Host:
    """A tiny in-memory host: one RunState and log per run, decided as the worker would."""

    def __init__(self, policy: HostPolicy | None = None) -> None:
        self.policy = policy or HostPolicy()
        self.states: dict[str, RunState] = {}
        self.logs: dict[str, list[RecordedEvent]] = {}

    def emit(self, env: dict[str, Any], run_id: str = RUN) -> Outcome:
        outcome = decide(
            record(env, run_id), self.states.get(run_id), self.policy, rules(), now=NOW
        )
        if isinstance(outcome, Admitted):
            self.states[run_id] = outcome.state
            self.logs.setdefault(run_id, []).append(outcome.event)
        return outcome

    def state(self, run_id: str = RUN) -> RunState:
        return self.states.get(run_id) or RunState.initial(run_id)
