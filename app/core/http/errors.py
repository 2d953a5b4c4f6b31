"""HTTP errors as values: the OpenWOP error code -> status table, the closed error envelope,
and the translation of our refusal codes into the codes a client sees over HTTP.

Role: the shell's handlers return ``error(code, message, details)`` and write its ``status`` and
``body``; they never build an error body themselves, so every error on the wire has the closed
shape ``{error, message, details?}`` (openwop-a2ui.md §11; v1 and v2 error-envelope schemas).

May import: the standard library only (the refusal codes it translates are
app.core.admission.refusal's; tests/core/test_http_errors.py
checks that every one of them is covered).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__all__ = [
    "DEFAULT_STATUS",
    "STATUS",
    "UNREGISTERED",
    "HttpError",
    "error",
    "from_admission_code",
]

# openwop-a2ui.md §11: the codes this host can answer with and their HTTP status, as in the v2
# registry's ``x-openwop-http-status`` (schemas/v2/error-envelope.schema.json).
STATUS: Mapping[str, int] = MappingProxyType(
    {
        "validation_error": 400,
        "unsupported_stream_mode": 400,
        "unauthenticated": 401,
        "forbidden": 403,
        "not_found": 404,
        "envelope_correlation_conflict": 409,
        "run_terminal": 409,
        "run_state_conflict": 409,  # details.runStatus is required by the v2 registry
        "interrupt_already_resolved": 409,
        "payload_too_large": 413,
        # app.core.http.guard: a mutating request that does not say application/json (CSRF)
        "unsupported_media_type": 415,
        "envelope_invalid": 422,
        "unknown_schema_version": 422,
        "unknown_envelope_kind": 422,
        "envelope_refusal": 422,
        "envelope_truncation_unrecoverable": 422,
        "fork_point_invalid": 422,
        "rate_limited": 429,
        "event_type_unmapped": 500,
        "payload_unprojectable": 500,
        "internal_error": 500,
        # NOT in the v2 registry (see UNREGISTERED): answers the HTTP layer gives on its own
        # account before any OpenWOP operation ran. They use the registry's vendor-code grammar
        # ``<org>.<code>`` (§11), so a closed v2 error envelope still validates.
        "a2ui-stream.request_timeout": 408,  # the body did not arrive within the read timeout
        "a2ui-stream.unavailable": 503,  # the broker or the run index is not ready right now
        "a2ui-stream.outcome_timeout": 504,  # no validator outcome within the admission wait
    }
)
UNREGISTERED: frozenset[str] = frozenset(
    {"a2ui-stream.request_timeout", "a2ui-stream.unavailable", "a2ui-stream.outcome_timeout"}
)
# An unknown code is a bug on our side: answer as ``internal_error`` does.
DEFAULT_STATUS = 500

# Our refusal codes (app.core.admission.refusal.CODES) -> the registered code a client sees. The
# ``record_*`` codes describe an admission record that never reached ``decide``: over HTTP the
# request body IS that record, so they are the sender's validation errors, except size (413)
# and the two that are not the sender's fault. Each maps to a code with the same HTTP status as
# refusal.HTTP_STATUS gives it, so the dead-letter status and the HTTP status never disagree.
_FROM_ADMISSION: Mapping[str, str] = MappingProxyType(
    {
        "record_not_utf8": "validation_error",
        "record_not_json": "validation_error",
        "record_invalid": "validation_error",
        # The shell builds the record from the request's runId, so a mismatch means the body
        # named another run than the path: the sender's validation error.
        "record_key_mismatch": "validation_error",
        "record_too_large": "payload_too_large",
        # Nested deeper than the recorder can encode (admission.encode_event): the envelope is
        # well-formed JSON the host refuses to record, i.e. an invalid envelope (422).
        "record_limit_exceeded": "envelope_invalid",
        # The broker would not take the outcome: ours to fix (refusal.py), never the sender's.
        "record_unrecordable": "internal_error",
        # An action the host refuses (issue 7: not a Button, a name outside resume/exchange, a
        # partial surface, a context path outside the data model): the registry's refusal.
        "action_refused": "envelope_refusal",
    }
)


@dataclass(frozen=True, slots=True)
class HttpError:
    """An error response: the HTTP ``status`` and the closed error-envelope ``body``."""

    status: int
    body: dict[str, Any]


def error(code: str, message: str, details: Mapping[str, Any] | None = None) -> HttpError:
    """The error response for ``code``: body ``{error, message, details?}`` (§11; ``details``
    is left out when None or empty, since the envelope is closed and ``details`` must be an
    object) and the status from ``STATUS`` (``DEFAULT_STATUS`` for an unknown code). The schema
    requires a non-empty ``message``: an empty one is replaced by the code."""
    body: dict[str, Any] = {"error": code, "message": message or code}
    if details:
        body["details"] = dict(details)
    return HttpError(STATUS.get(code, DEFAULT_STATUS), body)


def from_admission_code(code: str) -> str:
    """The registered OpenWOP code a client sees over HTTP for refusal code ``code``
    (app.core.admission.refusal.CODES): registered codes pass through, ``record_*`` codes are
    translated (see ``_FROM_ADMISSION``), anything else is ``envelope_invalid`` (an admission
    refused the envelope for a reason the registry has no closer name for)."""
    if code in _FROM_ADMISSION:
        return _FROM_ADMISSION[code]
    if code in STATUS and code not in UNREGISTERED:
        return code
    return "envelope_invalid"
