"""Intake: the bytes of one admission-topic record -> an admission record, or a Violation.

Pure: standard library and orjson. This is the part of admission that runs before the
decision: a record that is too large, not UTF-8, not JSON, or whose Kafka key disagrees with
its runId never reaches ``decide`` (docs/pipeline.md). Every one is a value, never an exception,
so the validator never crashes on a poison record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from app.core.refusal import Violation

__all__ = ["DEFAULT_MAX_RECORD_BYTES", "Intake", "read_admission"]

DEFAULT_MAX_RECORD_BYTES = 1_048_576


@dataclass(frozen=True, slots=True)
class Intake:
    """A decoded admission record (``record`` is whatever JSON the bytes held) and its runId
    as far as it could be read (for keys and dead letters)."""

    record: Any
    run_id: str | None


def _run_id_of(record: Any) -> str | None:
    run_id = record.get("runId") if isinstance(record, dict) else None
    return run_id if isinstance(run_id, str) else None


def read_admission(
    key: bytes | None, value: bytes | None, *, max_bytes: int = DEFAULT_MAX_RECORD_BYTES
) -> Intake | Violation:
    """Decode one admission-topic record. The size limit is checked before any parsing."""
    if value is None:
        return Violation(
            "record_invalid", "record-bytes", "", "the record has no value (a tombstone?)"
        )
    if len(value) > max_bytes:
        return Violation(
            "record_too_large",
            "record-size",
            "",
            f"the record is {len(value)} bytes; the limit is {max_bytes} "
            "(A2UI_STREAM_MAX_RECORD_BYTES); it was refused before parsing",
            {"size": len(value), "limit": max_bytes},
        )
    try:
        value.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Violation(
            "record_not_utf8",
            "record-utf8",
            "",
            f"the record is not UTF-8 (byte {exc.start}: {exc.reason})",
            {"offset": exc.start},
        )
    try:
        record = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        return Violation(
            "record_not_json",
            "record-json",
            "",
            f"the record is not JSON: {exc}",
            {"position": exc.pos},
        )
    run_id = _run_id_of(record)
    if key is not None and run_id is not None:
        try:
            key_text = key.decode("utf-8")
        except UnicodeDecodeError:
            key_text = None
        if key_text != run_id:
            # The key places the record on the run's partition (docs/topics.md): a record keyed
            # for another run would be ordered against the wrong run's log.
            return Violation(
                "record_key_mismatch",
                "record-key",
                "/runId",
                "the Kafka key must equal the record's runId (UTF-8): publish with key=runId",
                {"key": key.decode("utf-8", "replace"), "runId": run_id},
            )
    return Intake(record, run_id)
