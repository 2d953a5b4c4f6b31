"""The read side's fetched records, decoded and filed: each log record into the store and the runs
in memory, each dead letter as the outcome of its admission record.

Shell module, called by ``app.shell.worker.run_index`` (``RunIndex._ingest``) for every record of
a fetched batch. A record's key names its run and sequence (``app.core.runlog.keys``), its headers
its admission record (``a2ui-source``) and its type (``a2ui-type``); its value is parsed only when
someone reads the run or waits for the outcome, or when the type header is missing (a record
written before the validator wrote it): issue 16, each record decoded at most once per
process. It imports ``app.core``, the shared shell modules and its siblings ``run_log`` and
``run_outcomes``.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from app.core.runlog.events import RecordedEvent, parse_event
from app.core.runlog.keys import run_of_log_key, sequence_of_log_key
from app.core.runlog.run_lifecycle import status_after
from app.shell.wire import SOURCE_HEADER, TYPE_HEADER
from app.shell.worker.run_log import DECODED_FACTOR, LoggedEvent, RunCache, RunLog
from app.shell.worker.run_outcomes import Outcomes, RecordOutcome

__all__ = ["append", "file_dead_letter", "file_log_record", "headers_of", "parsed", "source_of"]

log = logging.getLogger("a2ui_stream.http")


def source_of(record: Any) -> str | None:
    """The ``a2ui-source`` header: the admission record a validator output is the outcome of."""
    return headers_of(record)[0]


def parsed(partition: int, record: Any) -> RecordedEvent | None:
    """A log record's event, or None (logged) when its value is not a recorded event."""
    event = parse_event(record.value)
    if event is None:
        log.error("run index: log record %d:%d is not a recorded event", partition, record.offset)
    return event


def headers_of(record: Any) -> tuple[str | None, str | None]:
    """A log record's ``a2ui-source`` and ``a2ui-type`` headers (None where absent: a record
    written before the validator wrote its type is parsed for it)."""
    source = event_type = None
    for name, value in record.headers or ():
        if name == SOURCE_HEADER:
            source = bytes(value).decode(errors="replace")
        elif name == TYPE_HEADER:
            event_type = bytes(value).decode(errors="replace")
    return source, event_type


def file_log_record(
    partition: int,
    record: Any,
    writer: Any,
    touched: dict[str, RunLog],
    memory: RunCache,
    outcomes: Outcomes,
) -> None:
    """One log record of ``partition``: into the store (``writer``), onto its run when that is
    in memory (then in ``touched``), and as the outcome of its admission record."""
    if record.key is None:
        return
    try:
        run_id = run_of_log_key(record.key)
        sequence = sequence_of_log_key(record.key)
    except (ValueError, UnicodeDecodeError):
        return
    if "\x00" in run_id:  # never admitted (app.core.admission.identifiers); the store's separator
        return
    run = memory.live.get(run_id)
    if record.value is None:  # a tombstone (`runs delete`)
        gone = writer.delete(partition, run_id, sequence)
        if run is not None:
            run.events = [e for e in run.events if e.sequence != sequence]
            if gone or not run.events:
                memory.forget(run_id)
            touched[run_id] = run
        return
    source, event_type = headers_of(record)
    # Only a run someone reads, or an outcome someone waits for, keeps the decoded event;
    # anything else keeps at most the bytes (decoded if ever read: lazily, once). The type
    # comes from the record's header, so an event nobody reads is never parsed here.
    wanted = run is not None or (source is not None and outcomes.awaited(source))
    event: RecordedEvent | None = None
    if wanted or event_type is None:
        event = parsed(partition, record)
        if event is None:
            return
        if event_type is None:
            event_type = event["type"]
    appended = int(record.timestamp or 0)
    writer.put(partition, run_id, sequence, event_type, record.value, record.offset, appended)
    logged = LoggedEvent(
        sequence,
        event_type,
        record.value,
        event if wanted else None,
        partition,
        record.offset,
        appended,
    )
    if run is not None:
        append(run, logged, memory)
        touched[run_id] = run
    if source is not None:
        outcomes.note(source, RecordOutcome(events=(logged,)))


def append(run: RunLog, logged: LoggedEvent, memory: RunCache) -> None:
    """``logged`` onto ``run`` in sequence order, its status moved on, its bytes charged."""
    if run.events and logged.sequence <= run.events[-1].sequence:
        # A re-appended sequence (never with transactions): the later record wins.
        run.events = [e for e in run.events if e.sequence != logged.sequence]
        run.events.append(logged)
        run.events.sort(key=lambda e: e.sequence)
    else:
        run.events.append(logged)
    run.status = status_after(run.status, logged.type)
    if run.run_id in memory.recent:
        memory.charge(run, len(logged.data) * DECODED_FACTOR)


def file_dead_letter(record: Any, outcomes: Outcomes) -> None:
    """One dead letter: the outcome of its admission record."""
    if record.value is None:
        return
    try:
        letter = orjson.loads(record.value)
    except orjson.JSONDecodeError:
        return
    source = source_of(record)
    if isinstance(letter, dict) and source is not None:
        outcomes.note(source, RecordOutcome(letter=letter))
