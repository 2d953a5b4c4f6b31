"""Admission over HTTP: request bodies -> admission records, validator outcomes -> responses.

Role: pure translation for the shell's HTTP handlers (docs/http.md). Every HTTP admission goes
through the production path: the handler publishes the record built here on the admission
topic and waits for the validator's outcome (a recorded event or a dead letter); these
functions only shape the bytes on either side (openwop-a2ui.md §13).

- ``v2_seam_record``: ``POST /conformance/seams/sample/a2ui/emit-surface`` ``{runId, envelope}``
  (closed);
- ``v1_seam_record``: ``POST /v1/host/sample/a2ui/emit-surface`` ``{runId, surface,
  contentTrust?, nodeId?}`` where ``surface`` is the full v1 payload; the host wraps it in a
  schemaVersion-1 envelope;
- ``envelope_record``: ``POST /runs/{runId}/envelopes`` with the AI envelope as the body;
- ``fork_record``: ``POST /runs/{runId}:fork`` ``{mode, fromSeq?, runOptionsOverlay?}`` checked
  against the source log (§9, §16f), as a ``run.fork`` host command (app.core.host_commands);
- ``refusal_response``: a dead letter -> the OpenWOP error envelope and status.

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.core.http_errors import HttpError, error, from_admission_code
from app.core.policy import SURFACE_KIND

__all__ = [
    "v2_seam_record",
    "v1_seam_record",
    "envelope_record",
    "ForkPoint",
    "fork_record",
    "refusal_response",
]

_FORK_KEYS = frozenset({"mode", "fromSeq", "runOptionsOverlay"})


def _body_error(message: str, **details: Any) -> HttpError:
    return error("validation_error", message, details or None)


def _run_id(value: Any) -> str | HttpError:
    if not isinstance(value, str) or not 1 <= len(value) <= 256:
        return _body_error("runId must be a string of 1..256 characters")
    return value


def v2_seam_record(body: Any) -> tuple[str, dict[str, Any]] | HttpError:
    """§13 v2 seam request (closed ``{runId, envelope}``) -> ``(runId, admission record)``."""
    if not isinstance(body, dict):
        return _body_error("the request body is a JSON object {runId, envelope}")
    extra = sorted(set(body) - {"runId", "envelope"})
    if extra:
        return _body_error(f"unexpected properties {extra}: the body is {{runId, envelope}}")
    run_id = _run_id(body.get("runId"))
    if isinstance(run_id, HttpError):
        return run_id
    if not isinstance(body.get("envelope"), dict):
        return _body_error("envelope must be an AI envelope object")
    return run_id, {"runId": run_id, "envelope": body["envelope"]}


def v1_seam_record(
    body: Any, *, envelope_id: str, correlation_id: str, now: str
) -> tuple[str, dict[str, Any]] | HttpError:
    """§13 v1 seam request ``{runId, surface, contentTrust?, nodeId?}`` -> a schemaVersion-1
    ``ui.a2ui-surface`` envelope around the full payload (the payload object is kept as sent,
    key order included, so the log carries it byte-equal: §8)."""
    if not isinstance(body, dict):
        return _body_error("the request body is a JSON object {runId, surface}")
    run_id = _run_id(body.get("runId"))
    if isinstance(run_id, HttpError):
        return run_id
    surface = body.get("surface")
    if not isinstance(surface, dict):
        return _body_error("surface must be the full v1 payload {catalogVersion, surface}")
    meta: dict[str, Any] = {"source": "ai-generation", "ts": now}
    trust = body.get("contentTrust")
    if trust is not None:
        if trust not in ("trusted", "untrusted"):
            return _body_error("contentTrust must be trusted or untrusted")
        meta["contentTrust"] = trust
    envelope: dict[str, Any] = {
        "type": SURFACE_KIND,
        "schemaVersion": 1,
        "envelopeId": envelope_id,
        "correlationId": correlation_id,
    }
    node_id = body.get("nodeId")
    if node_id is not None:
        if not isinstance(node_id, str):
            return _body_error("nodeId must be a string")
        envelope["nodeId"] = node_id
    envelope["payload"] = surface
    envelope["meta"] = meta
    return run_id, {"runId": run_id, "envelope": envelope}


def envelope_record(run_id: str, body: Any) -> dict[str, Any] | HttpError:
    """``POST /runs/{runId}/envelopes``: the body is one AI envelope for that run."""
    if not isinstance(body, dict):
        return _body_error("the request body is one AI envelope (a JSON object)")
    return {"runId": run_id, "envelope": body}


class ForkPoint:
    """What the fork check needs to know about the source run's log."""

    def __init__(self, last_sequence: int, offsets: Sequence[tuple[int, int]]) -> None:
        self.last_sequence = last_sequence  # -1 for an empty log
        self.offsets = offsets  # (partition, offset) of sequences 0..last_sequence, in order


def fork_record(
    source_run_id: str, child_run_id: str, body: Any, source: ForkPoint
) -> tuple[dict[str, Any], Mapping[str, Any]] | HttpError:
    """§9 Fork / §16f: validate ``{mode, fromSeq?, runOptionsOverlay?}`` against the source log
    and build the ``run.fork`` command record for ``child_run_id``. Returns the record and the
    response fields known before the validator runs."""
    if not isinstance(body, dict):
        return _body_error("the request body is {mode, fromSeq?, runOptionsOverlay?}")
    extra = sorted(set(body) - _FORK_KEYS)
    if extra:
        return _body_error(f"unexpected properties {extra}")
    mode = body.get("mode")
    if mode not in ("replay", "branch"):
        return _body_error("mode must be replay or branch")
    overlay = body.get("runOptionsOverlay")
    if overlay is not None and not isinstance(overlay, dict):
        return _body_error("runOptionsOverlay must be an object")
    if mode == "replay" and overlay:
        return _body_error("a replay fork takes no runOptionsOverlay (it re-runs as recorded)")
    from_seq = body.get("fromSeq")
    if from_seq is None:
        if mode == "branch":
            return _body_error("fromSeq is required for a branch fork")
        from_seq = 0
    if not isinstance(from_seq, int) or isinstance(from_seq, bool) or from_seq < 0:
        return _body_error("fromSeq must be an integer >= 0")
    # A fork point is a sequence the source log holds (§9: "A fromSeq not in the source log").
    if from_seq > source.last_sequence and not (from_seq == 0 and mode == "replay"):
        return error(
            "fork_point_invalid",
            f"fromSeq {from_seq} is not in the source log (sequences 0..{source.last_sequence})",
            {"lastSequence": source.last_sequence, "fromSeq": from_seq},
        )
    copied = source.offsets[:from_seq]
    by_partition = {p for p, _ in copied}
    partition = copied[0][0] if copied else 0
    if len(by_partition) > 1:  # a run's events share one partition (docs/topics.md)
        return error("internal_error", "the source run's events span partitions")
    command = {
        "type": "run.fork",
        "sourceRunId": source_run_id,
        "fromSeq": from_seq,
        "mode": mode,
        "source": {
            "partition": partition,
            "firstOffset": copied[0][1] if copied else 0,
            "lastOffset": copied[-1][1] if copied else 0,
        },
    }
    fields = {
        "runId": child_run_id,
        "sourceRunId": source_run_id,
        "fromSeq": from_seq,
        "mode": mode,
    }
    return {"runId": child_run_id, "command": command}, fields


def refusal_response(letter: Mapping[str, Any]) -> HttpError:
    """A dead letter -> the error envelope a client sees (§11): the registered code, the
    producer-facing message (already SR-1 redacted), and where/which rule refused."""
    code = str(letter.get("code", "internal_error"))
    details = {"rule": letter.get("rule"), "pointer": letter.get("path"), "refusal": code}
    extra = letter.get("details")
    if isinstance(extra, dict) and extra:
        details["validation"] = extra
    return error(from_admission_code(code), str(letter.get("message", "refused")), details)
