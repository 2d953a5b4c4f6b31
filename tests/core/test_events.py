"""The run log's records as typed values (app.core.runlog.events): what ``parse_event`` takes
and refuses, that every event the validator writes parses back to itself and is the schema's,
and that each reader of the log treats a record that is not an event as no run's, without
failing (before the one parser, the projector's decode, the validator's replay and the fork
read each raised on one)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.admission.host_commands_call import ForkSource, host_event
from app.core.admission.validator_forks import fork_events
from app.core.admission.validator_restore import restore_partition
from app.core.projection.projector_batch import decode
from app.core.projection.subscriptions import Registry, register
from app.core.runlog.events import parse_event, unreadable_event
from app.core.runlog.keys import log_key
from tests.core import admission_support as adm
from tests.core.projection_support import RUN

NOW = "2026-12-01T00:00:00Z"
GOOD = orjson.dumps(
    host_event("r", 0, "run.created", {"workflowId": "w"}, event_id="evt-r-000000000000", now=NOW)
)


@dataclass
class Stored:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)


def test_a_recorded_event_parses_to_itself() -> None:
    event = parse_event(GOOD)
    assert event is not None and orjson.dumps(event) == GOOD
    assert event["runId"] == "r" and event["sequence"] == 0 and event["type"] == "run.created"
    assert "envelope" not in event["payload"]  # a host event


NOT_EVENTS = [
    (None, "a tombstone"),
    (b"", "empty"),
    (b"{", "not JSON"),
    (b"[1]", "not an object"),
    (b'{"runId": "r", "sequence": 0, "type": "t"}', "no payload"),
    (b'{"runId": "r", "sequence": 0, "type": "t", "payload": []}', "a payload not an object"),
    (b'{"runId": 1, "sequence": 0, "type": "t", "payload": {}}', "a runId not a string"),
    (b'{"runId": "r", "sequence": "0", "type": "t", "payload": {}}', "a sequence not an int"),
    (b'{"runId": "r", "sequence": true, "type": "t", "payload": {}}', "a boolean sequence"),
    (b'{"runId": "r", "sequence": -1, "type": "t", "payload": {}}', "a negative sequence"),
    (b'{"runId": "r", "sequence": 0, "type": null, "payload": {}}', "a type not a string"),
]


@pytest.mark.parametrize(("value", "why"), NOT_EVENTS, ids=[w for _, w in NOT_EVENTS])
def test_what_is_not_a_recorded_event(value: bytes | None, why: str) -> None:
    assert parse_event(value) is None, why


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_parse_event_never_raises(value: bytes) -> None:
    parse_event(value)


def test_every_event_the_validator_writes_parses_back_and_is_the_schemas() -> None:
    jsonschema_rs = pytest.importorskip("jsonschema_rs")
    schema = orjson.loads(
        (Path(__file__).parents[2] / "schemas" / "recorded-event.schema.json").read_bytes()
    )
    validator = jsonschema_rs.validator_for(schema)
    host = adm.Host()
    outcome = host.emit(adm.envelope(adm.v2("s", adm.create_msg("s"), adm.components_msg("s"))))
    written = [*host.logs[adm.RUN], GOOD]
    assert len(written) == 2, outcome
    for value in (orjson.dumps(e) if not isinstance(e, bytes) else e for e in written):
        event = parse_event(value)
        assert event is not None and orjson.dumps(event) == value
        assert validator.is_valid(orjson.loads(value))
    envelope_event = parse_event(orjson.dumps(host.logs[adm.RUN][0]))
    assert envelope_event is not None
    payload = envelope_event["payload"]
    assert (
        isinstance(payload["envelope"], dict)
        and payload["version"] == 2
        and payload["trust"] == "trusted"
    )


def test_what_a_reader_is_shown_for_an_unreadable_record() -> None:
    shown = unreadable_event(7, "ui.a2ui-surface")
    assert shown["sequence"] == 7 and shown["type"] == "ui.a2ui-surface"
    assert shown["payload"] == {}


def _registry() -> Registry:
    doc = {"subscriberId": "sub", "runs": "*", "delta": False, "fullEvery": 3}
    registry, why = register({}, b"sub", orjson.dumps(doc))
    assert why is None
    return registry


def test_the_projector_leaves_out_a_followed_record_that_is_not_an_event() -> None:
    good = orjson.dumps(host_event(RUN, 1, "run.started", {}, event_id="e1", now=NOW))
    records: Any = [
        Stored(0, log_key(RUN, 0), b"not json"),
        Stored(1, log_key(RUN, 1), good),
        Stored(2, None, b"[]"),  # not a log key: the event would say its run
    ]
    batch = decode({0: records}, {0}, _registry())
    decoded = batch.partitions[0]
    assert [e.offset for e in decoded.events] == [1]
    assert decoded.next_offset == 3


def test_the_validators_replay_and_fork_read_pass_over_a_record_that_is_not_an_event() -> None:
    first = orjson.dumps(host_event("src", 0, "run.created", {}, event_id="e0", now=NOW))
    log: Any = [Stored(0, log_key("src", 0), first), Stored(1, log_key("src", 1), b"{")]
    restored = restore_partition(0, 0, log, [])
    assert restored.runs["src"].next_sequence == 1  # the record at 1 is no event of the run
    source = ForkSource("src", 2, 0, 0, 1)
    assert [e["sequence"] for e in fork_events(source, log)] == [0]  # a gap: refused later
