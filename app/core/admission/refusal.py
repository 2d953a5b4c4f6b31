"""Refusals as values: the stable codes, and the ``Violation`` every rule returns.

Pure: standard library only. A refusal is never an exception (STYLE rule 3): Faust
acknowledges a message whose agent raised, so an exception would lose the record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "CODES",
    "HTTP_STATUS",
    "Violation",
]

# Stable refusal codes (openwop-a2ui.md §5, §11; dead-letter codes of our own for bytes that
# never became an admission record). The HTTP status is the v2 registry's x-openwop-http-status.
HTTP_STATUS: Final[Mapping[str, int]] = {
    "validation_error": 400,
    "unknown_envelope_kind": 422,
    "unknown_schema_version": 422,
    "envelope_invalid": 422,
    "envelope_correlation_conflict": 409,
    "run_terminal": 409,
    # Host commands (app.core.admission.host_commands): a fork at a sequence the source log does not
    # hold (§9), or a command that the run's state does not allow.
    "fork_point_invalid": 422,
    "run_state_conflict": 409,
    # Interrupts and actions (issue 7; §7, §9 Interrupt resolve, a2ui-action-confinement).
    "not_found": 404,
    "forbidden": 403,
    "interrupt_already_resolved": 409,
    "action_refused": 422,
    # Our own, for records that are not admission records at all (dead letters only).
    "record_not_utf8": 400,
    "record_not_json": 400,
    "record_invalid": 400,
    "record_key_mismatch": 400,
    "record_too_large": 413,
    "record_limit_exceeded": 422,
    # The broker would not take the outcome (e.g. over the topic's size limit): ours to fix.
    "record_unrecordable": 500,
}
CODES: Final[frozenset[str]] = frozenset(HTTP_STATUS)


@dataclass(frozen=True, slots=True)
class Violation:
    """Why a record was refused: a stable ``code``, the ``rule`` that refused it, a JSON Pointer
    ``path`` into the admission record (RFC 6901), a ``message`` a producer can act on, and
    machine-readable ``details``."""

    code: str
    rule: str
    path: str
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.code not in CODES:  # a programming error, not an input error
            raise ValueError(f"unregistered refusal code {self.code!r}")

    def to_dict(self) -> dict[str, Any]:
        """The refusal as JSON members (a dead letter's and an error body's fields)."""
        return {
            "code": self.code,
            "rule": self.rule,
            "path": self.path,
            "message": self.message,
            "details": dict(self.details),
        }
