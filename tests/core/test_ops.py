"""The pure part of the operators' commands (app/core/admission/ops.py): tables of cases."""

from __future__ import annotations

import base64
import hashlib
from typing import Any, cast

import orjson
import pytest

from app.core.admission.ops import (
    NotReplayable,
    Resubmission,
    dead_letter_line,
    event_line,
    live_log_values,
    original_of,
    parse_position,
    replay_corrected,
    replay_original,
    run_events,
    select_dead_letters,
    tombstone_keys,
)
from app.core.runlog.events import RecordedEvent
from app.core.runlog.keys import log_key


def letter(
    code: str = "envelope_invalid",
    run: str | None = "run-a",
    partition: int = 1,
    offset: int = 7,
    original: bytes = b'{"runId":"run-a","envelope":{}}',
    kept: bytes | None = None,
    message: str = "surface s is not live",
) -> dict[str, Any]:
    kept = original if kept is None else kept
    return {
        "code": code,
        "rule": "fold",
        "path": "/envelope/payload/messages/0",
        "message": message,
        "details": {},
        "runId": run,
        "correlationId": "c-1",
        "source": {"topic": "a2ui.admission", "partition": partition, "offset": offset},
        "timestamp": "2026-11-30T05:00:00.000Z",
        "original": {
            "base64": base64.b64encode(kept).decode(),
            "sha256": hashlib.sha256(original).hexdigest(),
            "size": len(original),
            "redacted": kept != original,
        },
    }


def event(run: str, seq: int, **extra: Any) -> RecordedEvent:
    envelope = {
        "type": "ui.a2ui-surface",
        "correlationId": f"c-{seq}",
        "payload": {
            "version": "v0.9",
            "surfaceId": "s1",
            "messages": [
                {"version": "v0.9", "createSurface": {"surfaceId": "s1", "catalogId": "x"}},
                {"version": "v0.9", "updateDataModel": {"surfaceId": "s1", "value": "SECRET"}},
            ],
        },
    }
    doc: dict[str, Any] = {
        "eventId": f"evt-{run}-{seq:012d}",
        "runId": run,
        "sequence": seq,
        "type": "ui.a2ui-surface",
        "schemaVersion": 2,
        "timestamp": "2026-11-30T05:00:00.000Z",
        "causationId": f"c-{seq}",
        "contentTrust": "untrusted",
        "payload": {"envelope": envelope, "version": 2, "trust": "untrusted"},
    }
    doc.update(extra)
    return cast(RecordedEvent, doc)  # extra sets any field, by name


def rec(run: str, seq: int, value: RecordedEvent | None = None) -> tuple[bytes, bytes | None]:
    return log_key(run, seq), None if value is None else orjson.dumps(value)


# -- positions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2:17", (2, 17)),
        ("0:0", (0, 0)),
        (" 3:4 ", (3, 4)),
        ("2", None),
        ("2:", None),
        (":5", None),
        ("-1:5", None),
        ("a:b", None),
        ("1:2:3", None),
    ],
)
def test_parse_position(text: str, expected: tuple[int, int] | None) -> None:
    assert parse_position(text) == expected


# -- dead letters -----------------------------------------------------------------------------

LETTERS = [
    letter("envelope_invalid", "run-a", offset=1),
    letter("validation_error", "run-a", offset=2),
    letter("envelope_invalid", "run-b", offset=3),
    letter("record_not_json", None, offset=4),
]


@pytest.mark.parametrize(
    ("code", "run", "offsets"),
    [
        (None, None, [1, 2, 3, 4]),
        ("envelope_invalid", None, [1, 3]),
        ("envelope_invalid", "run-a", [1]),
        (None, "run-a", [1, 2]),
        ("record_not_json", None, [4]),
        ("nope", None, []),
        (None, "run-z", []),
    ],
)
def test_select_dead_letters(code: str | None, run: str | None, offsets: list[int]) -> None:
    chosen = select_dead_letters(LETTERS, code=code, run=run)
    assert [c["source"]["offset"] for c in chosen] == offsets


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            letter(),
            "1:7  2026-11-30T05:00:00.000Z  envelope_invalid  fold  "
            "/envelope/payload/messages/0  run-a  surface s is not live",
        ),
        (
            {**letter(run=None), "path": ""},
            "1:7  2026-11-30T05:00:00.000Z  envelope_invalid  fold  -  -  surface s is not live",
        ),
        (
            letter(message="two\nlines\t here"),
            "1:7  2026-11-30T05:00:00.000Z  envelope_invalid  fold  "
            "/envelope/payload/messages/0  run-a  two lines here",
        ),
    ],
)
def test_dead_letter_line(doc: dict[str, Any], expected: str) -> None:
    assert dead_letter_line(doc) == expected


@pytest.mark.parametrize(
    ("doc", "text", "redacted", "emptied"),
    [
        (letter(original=b"abc"), "abc", False, False),
        (letter(original=b"\xff\xfe x"), "\ufffd\ufffd x", False, False),
        (letter(original=b"pw=hunter22", kept=b"pw=[REDACTED:k]"), "pw=[REDACTED:k]", True, False),
        (letter(original=b"pw=hunter22", kept=b""), "", True, True),
        (letter(original=b""), "", False, False),
    ],
)
def test_original_of(doc: dict[str, Any], text: str, redacted: bool, emptied: bool) -> None:
    original = original_of(doc)
    assert (original.text, original.redacted, original.emptied) == (text, redacted, emptied)
    assert original.size == doc["original"]["size"]


# -- replay -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "dl_key", "expected"),
    [
        (
            letter(original=b"ORIG"),
            b"run-a",
            Resubmission((1, 7), "run-a", b"run-a", b"ORIG", corrected=False),
        ),
        # No runId (unreadable record): the dead letter's key is the source record's key.
        (
            letter(run=None, original=b"\xff"),
            b"src-key",
            Resubmission((1, 7), None, b"src-key", b"\xff", corrected=False),
        ),
        (
            letter(run=None, original=b"{"),
            None,
            Resubmission((1, 7), None, None, b"{", corrected=False),
        ),
    ],
)
def test_replay_original_resubmits_the_bytes_keyed_by_run(
    doc: dict[str, Any], dl_key: bytes | None, expected: Resubmission
) -> None:
    assert replay_original(doc, dl_key) == expected


@pytest.mark.parametrize(
    ("doc", "reason_part"),
    [
        (letter(original=b"pw=hunter22", kept=b"pw=[REDACTED:k]"), "SR-1 redacted"),
        (letter(original=b"pw=hunter22", kept=b""), "emptied"),
        (letter(original=b""), "was empty"),
    ],
)
def test_replay_original_refuses_redacted_or_empty(doc: dict[str, Any], reason_part: str) -> None:
    out = replay_original(doc, b"run-a")
    assert isinstance(out, NotReplayable)
    assert out.source == (1, 7)
    assert reason_part in out.reason
    if "redacted" in reason_part or "emptied" in reason_part:
        assert "--source 1:7 --file" in out.reason


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            b'{"runId": "run-c", "envelope": {"type": "ui.a2ui-surface"}}\n',
            Resubmission(
                (1, 7),
                "run-c",
                b"run-c",
                b'{"runId": "run-c", "envelope": {"type": "ui.a2ui-surface"}}\n',
                corrected=True,
            ),
        ),
        (b"{nope", "not JSON"),
        (b"[1]", "JSON object"),
        (b'{"envelope": {}}', "no runId"),
        (b'{"runId": "", "envelope": {}}', "no runId"),
        (b'{"runId": "r", "envelope": []}', "no envelope"),
        (b'{"runId": "r"}', "no envelope"),
    ],
)
def test_replay_corrected(data: bytes, expected: Resubmission | str) -> None:
    # A corrected record is the operator's: the original's redaction does not matter.
    out = replay_corrected(letter(original=b"x", kept=b""), data)
    if isinstance(expected, str):
        assert isinstance(out, NotReplayable)
        assert expected in out.reason
    else:
        assert out == expected


# -- the log ----------------------------------------------------------------------------------

A0, A1, A2 = event("a", 0), event("a", 1), event("a", 2)
LOG = [
    rec("a", 0, A0),
    rec("b", 0, event("b", 0)),
    rec("a", 1, A1),
    rec("a#x", 0, event("a#x", 0)),  # another run whose name starts with "a#"
    rec("a", 2, A2),
    (None, b"ignored: no key"),
]


@pytest.mark.parametrize(
    ("records", "run", "expected_keys"),
    [
        (LOG, "a", [b"a#0", b"a#1", b"a#2"]),
        (LOG, "b", [b"b#0"]),
        (LOG, "a#x", [b"a#x#0"]),
        (LOG, "zzz", []),
        # Already tombstoned keys need no second tombstone.
        (LOG + [rec("a", 1)], "a", [b"a#0", b"a#2"]),
        (LOG + [rec("a", 0), rec("a", 1), rec("a", 2)], "a", []),
        # Deleted, then the run started again at sequence 0: only the new event is live.
        (LOG + [rec("a", 0), rec("a", 1), rec("a", 2), rec("a", 0, A0)], "a", [b"a#0"]),
        # Sequence order, not partition order or string order.
        ([rec("a", 10, A0), rec("a", 9, A0), rec("a", 2, A0)], "a", [b"a#2", b"a#9", b"a#10"]),
    ],
)
def test_tombstone_keys(
    records: list[tuple[bytes | None, bytes | None]], run: str, expected_keys: list[bytes]
) -> None:
    assert tombstone_keys(records, run) == expected_keys
    assert [k for k, _ in live_log_values(records, run)] == expected_keys


@pytest.mark.parametrize(
    ("records", "from_sequence", "sequences"),
    [
        (LOG, 0, [0, 1, 2]),
        (LOG, 1, [1, 2]),
        (LOG, 3, []),
        (LOG + [rec("a", 1)], 0, [0, 2]),
        (LOG + [rec("a", 1, {**A1, "eventId": "evt-newer-0000001"})], 0, [0, 1, 2]),
    ],
)
def test_run_events(
    records: list[tuple[bytes | None, bytes | None]], from_sequence: int, sequences: list[int]
) -> None:
    events = run_events(records, "a", from_sequence)
    assert [e["sequence"] for e in events] == sequences


def test_run_events_takes_a_keys_latest_value() -> None:
    newer: RecordedEvent = {**A1, "eventId": "evt-newer-0000001"}
    events = run_events(LOG + [rec("a", 1, newer)], "a")
    assert events[1]["eventId"] == "evt-newer-0000001"


V1 = event("a", 3, nodeId="node-1", contentTrust="trusted")
V1["payload"]["envelope"]["payload"] = {"catalogVersion": 1, "surface": {"components": []}}
OTHER = event("a", 4, type="ui.other-kind")
OTHER["payload"]["envelope"]["payload"] = {"anything": "VALUE"}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            A0,
            "0  evt-a-000000000000  2026-11-30T05:00:00.000Z  ui.a2ui-surface  untrusted  "
            "node=-  causation=c-0  surface=s1 [createSurface,updateDataModel]",
        ),
        (
            V1,
            "3  evt-a-000000000003  2026-11-30T05:00:00.000Z  ui.a2ui-surface  trusted  "
            "node=node-1  causation=c-3  v1 surface",
        ),
        (
            OTHER,
            "4  evt-a-000000000004  2026-11-30T05:00:00.000Z  ui.other-kind  untrusted  "
            "node=-  causation=c-4  -",
        ),
    ],
)
def test_event_line(doc: RecordedEvent, expected: str) -> None:
    line = event_line(doc)
    assert line == expected
    # Ids and message kinds only: no payload value reaches the line.
    assert "SECRET" not in line and "VALUE" not in line
