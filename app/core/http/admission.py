"""Admission over HTTP: request bodies -> admission records, validator outcomes -> responses.

Role: pure translation for the shell's HTTP handlers (docs/http.md). Every HTTP admission goes
through the production path: the handler publishes the record bytes built here on the admission
topic and waits for the validator's outcome (a recorded event or a dead letter); these
functions only shape the bytes on either side (openwop-a2ui.md §13).

Every request body first goes through the Kafka path's intake
(``app.core.admission.intake.read_body``: size, UTF-8, JSON, duplicate member names, integers
outside 64 bits, nesting) with the same codes, so what HTTP admits is what the client's bytes say to
every reader (issue 14 item 8). The envelope of ``POST .../envelopes`` and the v2 seam's ``{runId,
envelope}`` then travel as the client sent them, byte
for byte, and the validator decides exactly those bytes.

- ``read_json_body``: any request body -> its JSON value, or the intake refusal;
- ``envelope_request``: ``POST /runs/{runId}/envelopes`` with the AI envelope as the body;
- ``v2_seam_request``: ``POST /conformance/seams/sample/a2ui/emit-surface`` ``{runId,
  envelope}`` (closed);
- ``v1_seam_request``: ``POST /v1/host/sample/a2ui/emit-surface`` ``{runId, surface,
  contentTrust?, nodeId?}`` where ``surface`` is the full v1 payload; the host wraps it in a
  schemaVersion-1 envelope;
- ``fork_request``: ``POST /runs/{runId}:fork`` ``{mode, fromSeq?, runOptionsOverlay?}``
  checked against the source log (§9, §16f), as a ``run.fork`` host command
  (app.core.admission.host_commands_fork);
- ``command_request``: any other host command (run lifecycle, interrupts, actions);
- ``refusal_response`` / ``violation_response``: a dead letter or a refusal -> the OpenWOP error
  envelope and status.

May import: the standard library, orjson and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from app.core.admission.intake import DEFAULT_MAX_RECORD_BYTES, read_body
from app.core.admission.limits import DEPTH_CEILING, first_deeper
from app.core.admission.policy import SURFACE_KIND
from app.core.admission.refusal import Violation
from app.core.admission.rules import DEPTH, RECORD_SIZE, refuse
from app.core.http.errors import HttpError, error, from_admission_code
from app.core.runlog.run_lifecycle import MAX_LINEAGE

__all__ = [
    "AdmissionRequest",
    "ForkPoint",
    "body_too_large",
    "command_request",
    "envelope_request",
    "fork_request",
    "read_json_body",
    "refusal_response",
    "v1_seam_request",
    "v2_seam_request",
    "violation_response",
]

_FORK_KEYS = frozenset({"mode", "fromSeq", "runOptionsOverlay"})


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """What the shell publishes: ``record`` exactly as it goes on the admission topic (key =
    ``run_id``), and the ``envelope`` it carries as decoded (None for a host command), for the
    E2 lookup after the wait. ``command``: a host command, which the gateway seals
    (app.core.admission.command_seal); nothing else is sealed."""

    run_id: str
    record: bytes
    envelope: Mapping[str, Any] | None = None
    command: bool = False


def violation_response(violation: Violation) -> HttpError:
    """A refusal decided before or without the validator (intake, an action check) -> the error
    envelope: the registered code, the message, and the rule, pointer and our refusal code."""
    details = {"rule": violation.rule, "pointer": violation.path, "refusal": violation.code}
    details.update(violation.details)
    return error(from_admission_code(violation.code), violation.message, details)


def read_json_body(
    body: bytes, *, max_bytes: int = DEFAULT_MAX_RECORD_BYTES, at: str = ""
) -> Any | HttpError:
    """The JSON value of a request body, or the intake's refusal as an error (4xx)."""
    decoded = read_body(body, max_bytes=max_bytes, at=at)
    if isinstance(decoded, Violation):
        return violation_response(decoded)
    return decoded.record


def body_too_large(size: int | None, *, max_bytes: int) -> HttpError:
    """A body the web server stopped reading (larger than it reads at all)."""
    shown = f"more than {max_bytes}" if size is None else str(size)
    return violation_response(
        refuse(
            RECORD_SIZE,
            "",
            f"the request body is {shown} bytes; the limit is {max_bytes} "
            "(A2UI_STREAM_MAX_RECORD_BYTES); it was refused before parsing",
            {"limit": max_bytes} if size is None else {"size": size, "limit": max_bytes},
        )
    )


def _record_too_large(size: int, max_bytes: int, body_size: int | None = None) -> HttpError:
    around = "" if body_size is None else f"the request body is {body_size} bytes, and "
    return violation_response(
        refuse(
            RECORD_SIZE,
            "",
            f"{around}the admission record it becomes is {size} bytes; the limit is {max_bytes} "
            "(A2UI_STREAM_MAX_RECORD_BYTES)",
            {"size": size, "limit": max_bytes},
        )
    )


def _encoded(
    run_id: str, record: Mapping[str, Any], max_bytes: int, envelope: Any = None
) -> AdmissionRequest | HttpError:
    """A record the host assembled (from bodies intake accepted) -> its bytes. Accepted values
    nested near the ceiling can still be too deep once wrapped; that is the sender's 4xx."""
    try:
        encoded = orjson.dumps(record)
    except orjson.JSONEncodeError:  # orjson encodes 254 levels (app.core.admission.intake)
        return violation_response(
            refuse(
                DEPTH,
                first_deeper(record, DEPTH_CEILING) or "",
                f"the request nests deeper than {DEPTH_CEILING} levels once wrapped in its "
                "admission record, more than any host setting admits (A2UI_STREAM_MAX_DEPTH); "
                "flatten it",
                {"rule": DEPTH.id, "limit": DEPTH_CEILING},
            )
        )
    if len(encoded) > max_bytes:
        return _record_too_large(len(encoded), max_bytes)
    return AdmissionRequest(run_id, encoded, envelope if isinstance(envelope, dict) else None)


def command_request(
    run_id: str, command: Mapping[str, Any], *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
) -> AdmissionRequest | HttpError:
    """A host command record ``{runId, command}`` (app.core.admission.host_commands) for ``run_id``,
    marked for the gateway's seal."""
    built = _encoded(run_id, {"runId": run_id, "command": command}, max_record_bytes)
    if isinstance(built, HttpError):
        return built
    return AdmissionRequest(built.run_id, built.record, None, command=True)


def _body_error(message: str, **details: Any) -> HttpError:
    return error("validation_error", message, details or None)


def _run_id(value: Any) -> str | HttpError:
    if not isinstance(value, str) or not 1 <= len(value) <= 256:
        return _body_error("runId must be a string of 1..256 characters")
    return value


def v2_seam_request(
    raw: bytes, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
) -> AdmissionRequest | HttpError:
    """§13 v2 seam request (closed ``{runId, envelope}``): the body has the admission record's
    own shape, so once intake and the shape check accept it, its bytes ARE the record."""
    body = read_json_body(raw, max_bytes=max_record_bytes)
    if isinstance(body, HttpError):
        return body
    checked = _v2_seam_shape(body)
    if isinstance(checked, HttpError):
        return checked
    return AdmissionRequest(checked, raw, body["envelope"])


def _v2_seam_shape(body: Any) -> str | HttpError:
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
    return run_id


def v1_seam_request(
    body: Any,
    *,
    envelope_id: str,
    correlation_id: str,
    now: str,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
) -> AdmissionRequest | HttpError:
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
    return _encoded(run_id, {"runId": run_id, "envelope": envelope}, max_record_bytes, envelope)


def envelope_request(
    run_id: str, raw: bytes, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
) -> AdmissionRequest | HttpError:
    """``POST /runs/{runId}/envelopes``: the body is one AI envelope for that run. Intake
    decides the body on its own (so it is exactly one JSON value and cannot close the record
    around it); the record is then built around the client's bytes, unchanged."""
    body = read_json_body(raw, max_bytes=max_record_bytes, at="/envelope")
    if isinstance(body, HttpError):
        return body
    if not isinstance(body, dict):
        return _body_error("the request body is one AI envelope (a JSON object)")
    record = b'{"runId":' + orjson.dumps(run_id) + b',"envelope":' + raw + b"}"
    if len(record) > max_record_bytes:
        return _record_too_large(len(record), max_record_bytes, len(raw))
    return AdmissionRequest(run_id, record, body)


class ForkPoint:
    """What the fork check needs to know about the source run's log."""

    def __init__(
        self,
        last_sequence: int,
        offsets: Sequence[tuple[int, int]],
        lineage: Sequence[str] = (),
    ) -> None:
        self.last_sequence = last_sequence  # -1 for an empty log
        self.offsets = offsets  # (partition, offset) of sequences 0..last_sequence, in order
        # the source's own ancestors (its last run.forked marker): the child inherits their
        # SR-1 secrets (app.core.runlog.run_lifecycle.lineage_of)
        self.lineage = tuple(lineage)


def fork_request(
    source_run_id: str,
    child_run_id: str,
    body: Any,
    source: ForkPoint,
    *,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
) -> tuple[AdmissionRequest, Mapping[str, Any]] | HttpError:
    """§9 Fork / §16f: validate ``{mode, fromSeq?, runOptionsOverlay?}`` against the source log
    and build the ``run.fork`` command record for ``child_run_id``. Returns the record and the
    response fields known before the validator runs."""
    asked = _fork_body(body)
    if isinstance(asked, HttpError):
        return asked
    mode, from_seq = asked
    # A fork point is a sequence the source log holds (§9: "A fromSeq not in the source log").
    if from_seq > source.last_sequence and not (from_seq == 0 and mode == "replay"):
        return error(
            "fork_point_invalid",
            f"fromSeq {from_seq} is not in the source log (sequences 0..{source.last_sequence})",
            {"lastSequence": source.last_sequence, "fromSeq": from_seq},
        )
    command = _fork_command(source_run_id, mode, from_seq, source)
    if isinstance(command, HttpError):
        return command
    fields = {
        "runId": child_run_id,
        "sourceRunId": source_run_id,
        "fromSeq": from_seq,
        "mode": mode,
    }
    built = command_request(child_run_id, command, max_record_bytes=max_record_bytes)
    if isinstance(built, HttpError):
        return built
    return built, fields


def _fork_body(body: Any) -> tuple[str, int] | HttpError:
    """The fork's ``mode`` and ``fromSeq`` (0 when a replay omits it), checked in the spec's
    order, one refusal each (§9, §16f)."""
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
    return mode, from_seq


def _fork_command(
    source_run_id: str, mode: str, from_seq: int, source: ForkPoint
) -> dict[str, Any] | HttpError:
    """The ``run.fork`` command: where in the log the copied sequences ``0 .. fromSeq-1`` are
    (app.core.admission.host_commands_fork reads them from there), and the source's lineage."""
    copied = source.offsets[:from_seq]
    by_partition = {p for p, _ in copied}
    partition = copied[0][0] if copied else 0
    if len(by_partition) > 1:  # a run's events share one partition (docs/topics.md)
        return error("internal_error", "the source run's events span partitions")
    command: dict[str, Any] = {
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
    if source.lineage:
        command["sourceLineage"] = list(source.lineage[: MAX_LINEAGE - 1])
    return command


def refusal_response(letter: Mapping[str, Any]) -> HttpError:
    """A dead letter -> the error envelope a client sees (§11): the registered code, the
    producer-facing message (already SR-1 redacted), and where/which rule refused."""
    code = str(letter.get("code", "internal_error"))
    details = {"rule": letter.get("rule"), "pointer": letter.get("path"), "refusal": code}
    extra = letter.get("details")
    if isinstance(extra, dict) and extra:
        details["validation"] = extra
    return error(from_admission_code(code), str(letter.get("message", "refused")), details)
