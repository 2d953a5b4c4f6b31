"""The v1 envelope accept seam ``POST /v1/host/sample/envelope/accept`` (RFC 0021's acceptor,
as the suite's v1 A2UI scenarios use it: a2ui-surface-replay, -version-refusal, -degrades,
a2ui-untrusted-blocks-approval; openwop-a2ui.md §13): the request, what is decided before
admission, and the EnvelopeOutcome answered.

Role: pure. Request ``{envelope, hostSupportedEnvelopes?, boundInterruptKind?, ...}`` (the
other acceptor fields are not read). Two outcomes are decided here, from the request alone,
and record nothing:

- ``gated``: the envelope's kind is not in ``hostSupportedEnvelopes`` and not universal
  (RFC 0102 §A, N6: a consumer that does not advertise the kind stores it without rendering
  and the run goes on);
- ``blocked``: an untrusted envelope bound to an ``approval`` interrupt (RFC 0102 §A.5,
  untrusted_content_blocks_approval).

Every other envelope goes through the production admission path (the validator, on the
seam's own run ``SEAM_RUN``), so the floor, the catalog, the branch and E2's correlation rule
are the real ones; ``outcome_of`` turns the admission's answer into the EnvelopeOutcome:
``accepted``, ``invalid`` (the payload or the record is malformed) or ``refused`` (a version,
a kind, a correlation conflict), ``reason`` starting with the code.

May import: the standard library, app.core.http.errors and app.core.admission.policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.core.admission.policy import UNIVERSAL_KINDS
from app.core.http.errors import HttpError, error

__all__ = ["SEAM_RUN", "Admit", "decide_accept", "outcome_of"]

# The run the seam's admitted envelopes are recorded in: the acceptor request names no run,
# and E2 (a correlationId re-emitted with another type conflicts) holds within one run.
SEAM_RUN = "conformance/envelope-accept"
_INVALID = frozenset({"envelope_invalid", "validation_error"})


@dataclass(frozen=True, slots=True)
class Admit:
    """Admit ``envelope`` through the production path on ``SEAM_RUN``."""

    envelope: dict[str, Any]


def decide_accept(body: Any) -> Admit | dict[str, Any] | HttpError:
    """The request -> the envelope to admit, an EnvelopeOutcome decided without admission
    (``gated``, ``blocked``), or the 400 of a malformed request."""
    if not isinstance(body, dict) or not isinstance(body.get("envelope"), dict):
        return error("validation_error", "the request body is {envelope, hostSupportedEnvelopes?}")
    envelope: dict[str, Any] = body["envelope"]
    supported = body.get("hostSupportedEnvelopes")
    if supported is not None and not (
        isinstance(supported, list) and all(isinstance(k, str) for k in supported)
    ):
        return error("validation_error", "hostSupportedEnvelopes is a list of envelope kinds")
    kind = envelope.get("type")
    gated = supported is not None and kind not in supported and kind not in UNIVERSAL_KINDS
    if isinstance(kind, str) and gated:
        return _outcome(
            "gated",
            f"unknown_envelope_kind: {kind!r} is not advertised by the consumer; stored "
            "without rendering, the run goes on (RFC 0102 §A)",
            envelope,
        )
    meta = envelope.get("meta")
    trust = meta.get("contentTrust") if isinstance(meta, dict) else None
    if trust == "untrusted" and body.get("boundInterruptKind") == "approval":
        return _outcome(
            "blocked",
            "untrusted_content_blocks_approval: an untrusted envelope cannot drive an approval "
            "interrupt (RFC 0102 §A.5)",
            envelope,
        )
    return Admit(envelope)


def outcome_of(
    status: int, answer: Mapping[str, Any], envelope: Mapping[str, Any]
) -> dict[str, Any]:
    """The admission's HTTP answer (201 and the recorded event, or an error envelope) -> the
    EnvelopeOutcome."""
    if status < 300:
        outcome = _outcome("accepted", "accepted", envelope)
        outcome["details"] = {k: answer[k] for k in ("sequence", "eventId") if k in answer}
        return outcome
    details = answer.get("details")
    refusal = details.get("refusal") if isinstance(details, dict) else None
    code = str(refusal or answer.get("error", "refused"))
    verdict = "invalid" if code in _INVALID else "refused"
    reason = f"{code}: {answer.get('message', '')}".rstrip(": ")
    outcome = _outcome(verdict, reason, envelope)
    if isinstance(details, dict):
        outcome["details"] = dict(details)
    return outcome


def _outcome(status: str, reason: str, envelope: Mapping[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {"status": status, "reason": reason}
    if isinstance(envelope.get("envelopeId"), str):
        doc["envelopeId"] = envelope["envelopeId"]
    return doc
