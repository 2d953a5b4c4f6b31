"""The fork sources of a validator batch: the log ranges its fork commands name, and the
source run's events among the records the shell read back for one.

Role: pure values around the batch step (app.core.admission.validator_batch). A fork command
says where its source events are and never carries them (app.core.admission.host_commands):
before the step, the shell reads each range ``fork_sources`` names, and ``fork_events`` picks
the source run's events from what it read; the step gets them as its ``fetched``.

May import: the standard library, orjson and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from app.core.admission.host_commands_call import ForkSource, fork_source_of
from app.core.admission.intake import Intake, read_admission
from app.core.admission.validator import SourceRecord
from app.core.admission.validator_batch import Stored
from app.core.runlog.events import RecordedEvent, parse_event
from app.core.runlog.keys import run_of_log_key

__all__ = ["fork_events", "fork_sources"]


def fork_sources(batch: Mapping[int, Sequence[SourceRecord]], max_bytes: int) -> list[ForkSource]:
    """The log ranges the batch's fork commands name (app.core.admission.host_commands: a command
    says where its source events are, never carries them); the shell reads each before the step."""
    found: dict[ForkSource, None] = {}
    for records in batch.values():
        for record in records:
            if record.value is None or b'"run.fork"' not in record.value:
                continue  # a screen: only a fork command holds this token
            intake = read_admission(record.key, record.value, max_bytes=max_bytes)
            source = fork_source_of(intake.record) if isinstance(intake, Intake) else None
            if source is not None:
                found[source] = None
    return list(found)


def fork_events(source: ForkSource, records: Iterable[Stored]) -> list[RecordedEvent]:
    """The source run's events ``0 .. fromSeq-1`` among the log records read for ``source``
    (another run's records in the range are not its; ``decide_command`` refuses a gap)."""
    by_sequence: dict[int, RecordedEvent] = {}
    for record in records:
        if record.key is None or record.value is None:
            continue
        if run_of_log_key(record.key) != source.source_run_id:
            continue
        event = parse_event(record.value)
        if event is not None:  # not a recorded event: a gap, which decide_command refuses
            by_sequence[event["sequence"]] = event
    return [by_sequence[i] for i in range(source.from_seq) if i in by_sequence]
