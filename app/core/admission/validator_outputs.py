"""The validator step's values: the consumed record it reads and the outputs it returns.

``validate`` (app.core.admission.validator) turns one ``SourceRecord`` into exactly one
``Output``, which names the send the shell performs: ``Append`` (one recorded event),
``AppendMany`` (a host command's events), ``Reject`` (a dead letter) or ``Duplicate``
(nothing: E2 re-emission). Data only (STYLE rule 2).

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.runlog.run_state import RunState

__all__ = ["Append", "AppendMany", "Duplicate", "Output", "Reject", "SourceRecord"]


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """One consumed admission-topic record, as the shell received it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class Append:
    """Append ``value`` at ``sequence`` of the run's log with ``key``; ``state`` is the run state
    after it; ``drift`` as ``Admitted.drift``; ``event_type``: the recorded event's ``type``
    (its ``a2ui-type`` header on the log, so a reader need not parse the value for it)."""

    run_id: str
    sequence: int
    key: bytes
    value: bytes
    state: RunState
    drift: int | None
    event_type: str


@dataclass(frozen=True, slots=True)
class AppendMany:
    """A host command's events (app.core.admission.host_commands), to append in order in ONE
    transaction with the command's offset: ``records`` are ``(sequence, key, value)``, ``types``
    their events' ``type`` in the same order (``Append.event_type``)."""

    run_id: str
    records: tuple[tuple[int, bytes, bytes], ...]
    types: tuple[str, ...]
    state: RunState
    resumes: tuple[bytes, ...] = ()  # schemas/resume records for the resumes topic


@dataclass(frozen=True, slots=True)
class Reject:
    """Dead-letter ``value`` (a dead letter with ``code``) under ``key``."""

    key: bytes | None
    value: bytes
    code: str
    run_id: str | None


@dataclass(frozen=True, slots=True)
class Duplicate:
    """E2 re-emission (``Deduplicated``): ``correlation_id`` is recorded already, at
    ``sequence``; nothing is appended."""

    run_id: str
    correlation_id: str
    sequence: int


Output = Append | AppendMany | Reject | Duplicate
