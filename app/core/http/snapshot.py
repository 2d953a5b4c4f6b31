"""The run snapshot that ``GET /runs/{runId}`` (v2) and ``GET /v1/runs/{runId}`` (v1) answer (an
OpenWOP HTTP value, beside http_errors and http_admission), built from the run's recorded host
events (a fold of the log, like every read here).

Role: pure. The shell passes the major, the run's status (app.core.runlog.run_lifecycle's fold, kept
by the run index), its last sequence and the decoded host events whose types are in
``SNAPSHOT_EVENT_TYPES`` (the only ones the snapshot reads, so the shell decodes no envelope).

The schemas' required fields (v2 ``schemas/v2/run-snapshot.schema.json``, closed: runId,
workflowId, status, owner, eventLogSchemaVersion; v1 ``schemas/run-snapshot.schema.json``, open:
runId, workflowId, status), which openwop-client's ``runs_get`` reads:

- ``workflowId``: the ``run.created`` one (a fork copies it); a run that began with an envelope
  (``POST /runs/{runId}/envelopes``, a seam) or a fork from sequence 0 has none recorded and says
  ``WORKFLOW_OF_SURFACE_RUNS``.
- ``owner``: the tenant is the runId's ``<tenant>/`` segment (``DEFAULT_TENANT`` for a runId
  without one). This host records no identity for a run (a bearer token names nobody), so the v2
  subject is the one RFC 0170 §A.3 gives a run without subject emission: issuer
  ``urn:openwop:legacy``, which takes part in no link, actor chain or delegation decision.
  v1's owner is ``{tenant}`` (closed there, no subject).
- ``eventLogSchemaVersion``: RFC 0176 §A.2's era key: a v2 host writes 3 (one log serves both
  majors here).

Host state beyond the schema (lastSequence, isTerminal, interrupts, eventsUrl) is at the root
in v1 (open) and under ``extensions["a2ui-stream.run"]`` in v2 (closed; RFC 0169 §A.4's seat).

Interrupts: ``node.suspended {nodeId}`` opens one (``pending``), ``interrupt.resolved {nodeId}``
closes it (``resolved``). When the run ends while one is still pending, it is ``cancelled``:
the run's end closed it (spec/v2/core/errors.md §One code per state: a resolve after the end is
409 interrupt_already_resolved), so a snapshot never offers a pending interrupt on a run that
cannot resume (the suite's v2-interrupt-resolve-terminal). ``currentNodeId`` names the pending
interrupt's node while the run waits for approval.

May import: the standard library, app.core.http.principals, app.core.runlog.run_lifecycle and
app.core.http.wire_ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from app.core.http.principals import tenant_of
from app.core.http.wire_ids import project_run_id
from app.core.runlog.events import RecordedEvent
from app.core.runlog.run_lifecycle import TERMINAL_STATUSES

__all__ = [
    "DEFAULT_TENANT",
    "EVENT_LOG_SCHEMA_VERSION",
    "EXTENSION",
    "LEGACY_ISSUER",
    "SNAPSHOT_EVENT_TYPES",
    "WORKFLOW_OF_SURFACE_RUNS",
    "interrupts_of",
    "snapshot",
]

SNAPSHOT_EVENT_TYPES: frozenset[str] = frozenset(
    {"run.created", "run.forked", "node.suspended", "interrupt.resolved"}
)
EVENT_LOG_SCHEMA_VERSION = 3  # RFC 0176 §A.2: the era key a v2 host writes
EXTENSION = "a2ui-stream.run"  # v2 snapshot extensions seat: ``<org>.<name>``
LEGACY_ISSUER = "urn:openwop:legacy"  # RFC 0170 §A.3: a run without subject emission
DEFAULT_TENANT = "local"  # the tenant of POST /runs' runIds, and of runIds without one
WORKFLOW_OF_SURFACE_RUNS = "a2ui-stream:surfaces"  # ids.schema.json workflowId grammar


def interrupts_of(events: Iterable[RecordedEvent], status: str) -> dict[str, str]:
    """nodeId -> ``pending`` | ``resolved`` | ``cancelled`` for every interrupt the events
    opened, in the order each was first opened, for a run whose status is ``status``."""
    interrupts: dict[str, str] = {}
    for event in events:
        payload = event.get("payload")
        node = payload.get("nodeId") if isinstance(payload, dict) else None
        if not isinstance(node, str):
            continue
        if event.get("type") == "node.suspended":
            interrupts[node] = "pending"
        elif event.get("type") == "interrupt.resolved":
            interrupts[node] = "resolved"
    if status in TERMINAL_STATUSES:
        interrupts = {n: "cancelled" if s == "pending" else s for n, s in interrupts.items()}
    return interrupts


def _tenant(run_id: str) -> str:
    # the one reading of a runId's tenant: the one issue 18's authorization checks
    return tenant_of(run_id, DEFAULT_TENANT)


def _payload(events: Sequence[RecordedEvent], event_type: str) -> Mapping[str, Any] | None:
    for event in events:
        payload = event.get("payload")
        if event.get("type") == event_type and isinstance(payload, dict):
            return payload
    return None


def snapshot(
    run_id: str,
    status: str,
    last_sequence: int,
    events: Iterable[RecordedEvent],
    *,
    major: int = 2,
) -> dict[str, Any]:
    """The snapshot document of run ``run_id`` for ``major`` (2: ``GET /runs/{runId}``, 1:
    ``GET /v1/runs/{runId}``); ``events``: its host events of ``SNAPSHOT_EVENT_TYPES``, in
    sequence order."""
    read = list(events)
    interrupts = interrupts_of(read, status)
    created = _payload(read, "run.created")
    workflow = created.get("workflowId") if created is not None else None
    tenant = _tenant(run_id)
    doc: dict[str, Any] = {
        "runId": run_id,
        "workflowId": workflow if isinstance(workflow, str) else WORKFLOW_OF_SURFACE_RUNS,
        "status": status,
        "owner": {"tenant": tenant},
        "eventLogSchemaVersion": EVENT_LOG_SCHEMA_VERSION,
    }
    waiting = [n for n, s in interrupts.items() if s == "pending"]
    if status == "waiting-approval" and waiting:
        doc["currentNodeId"] = waiting[-1]
    forked = _payload(read, "run.forked")
    if forked is not None and isinstance(forked.get("sourceRunId"), str):
        doc["parentRunId"] = forked["sourceRunId"]
    host = {
        "lastSequence": last_sequence,
        "isTerminal": status in TERMINAL_STATUSES,
        "interrupts": [{"nodeId": n, "status": s} for n, s in interrupts.items()],
        "eventsUrl": f"{'/v1' if major == 1 else ''}/runs/{project_run_id(run_id)}/events",
    }
    if major == 1:
        return {**doc, **host}
    subject = {
        "issuer": LEGACY_ISSUER,
        "subjectId": f"{tenant}.unrecorded",
        "tenant": tenant,
        "lane": "api-key",
        "kind": "workload",
    }
    doc["owner"] = {"tenant": tenant, "subject": subject}
    doc["extensions"] = {EXTENSION: host}
    return doc
