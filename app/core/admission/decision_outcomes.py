"""The admission decision's outcomes, as values (STYLE rule 2): ``Admitted`` (record the event),
``Refused`` (dead-letter the record) or ``Deduplicated`` (E2: answer with the original outcome).
``decide`` (app.core.admission.decision) returns one; the shell records, dead-letters or
acknowledges.

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final

from app.core.admission.refusal import Violation
from app.core.runlog.events import RecordedEvent
from app.core.runlog.run_state import FrozenValue, RunState

__all__ = ["Admitted", "Deduplicated", "Outcome", "Refused"]


class Admitted(FrozenValue):
    """Record ``event`` on the run log; ``state`` is the run state after it. ``drift`` is the
    emitted schemaVersion when warn admitted it below the floor (``envelope_schema_version_drift``
    to log), else None. Immutable like the other outcomes, and, like the run state's values,
    a plain class rather than a frozen dataclass: compiled, building one is a native call (about
    0.1 µs) where the dataclass's generated ``__init__`` took about 1 µs
    (app/core/runlog/run_state.py)."""

    __slots__ = ("event", "state", "drift")
    _fields: ClassVar[tuple[str, ...]] = ("event", "state", "drift")

    def __init__(self, event: RecordedEvent, state: RunState, drift: int | None = None) -> None:
        self.event: Final = event
        self.state: Final = state
        self.drift: Final = drift

    @property
    def sequence(self) -> int:
        """The run sequence ``event`` is recorded at."""
        return int(self.event["sequence"])


@dataclass(frozen=True, slots=True)
class Refused:
    """Dead-letter the record with ``violation``; the run state is unchanged, nothing recorded."""

    violation: Violation


@dataclass(frozen=True, slots=True)
class Deduplicated:
    """E2 re-emission: the correlationId was already recorded with the same type. Answer with
    the ORIGINAL outcome (``sequence``, ``event_id``) and record nothing."""

    sequence: int
    event_id: str
    correlation_id: str


Outcome = Admitted | Refused | Deduplicated
