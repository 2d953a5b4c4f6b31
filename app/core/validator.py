"""The validator step: one admission-topic record in, one output to send out.

Pure: standard library, orjson and app.core. The shell's validator loop calls ``validate`` once
per consumed record, in partition order, keeps the returned run state, and performs the send
the output names:

- ``Append``: the recorded event, to the per-run log, key ``runId#sequence``, on the run's
  partition (docs/topics.md);
- ``Reject``: the dead-letter record, to the dead-letter topic;
- ``Duplicate``: nothing (E2 re-emission; the original outcome stands).

Every record ends as exactly one of the three (docs/pipeline.md, "nothing lost, nothing
duplicated").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from app.core.admission import (
    Admitted,
    Deduplicated,
    Refused,
    Rules,
    decide,
    encode_event,
    event_id_for,
)
from app.core.command_seal import HEADER as SEAL_HEADER
from app.core.command_seal import sealed_by
from app.core.dead_letter import dead_letter, redact_bytes
from app.core.fold import apply
from app.core.host_commands import ForkSource, decide_command, resume_of
from app.core.identifiers import run_id_error, secret_identifier
from app.core.intake import DEFAULT_MAX_RECORD_BYTES, Intake, read_admission
from app.core.keys import log_key, partition_for_run
from app.core.policy import HostPolicy
from app.core.redaction import Secrets, prepare
from app.core.refusal import Violation
from app.core.rules import COMMAND_GATEWAY, ENCODE, RECORD_PARTITION, RECORD_SHAPE, RUN_LIVE, refuse
from app.core.run_lifecycle import TERMINAL_STATUSES
from app.core.run_state import RunState

__all__ = [
    "Append",
    "AppendMany",
    "Duplicate",
    "Reject",
    "SourceRecord",
    "letter_secrets",
    "validate",
]


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
    after it; ``drift`` as ``Admitted.drift``."""

    run_id: str
    sequence: int
    key: bytes
    value: bytes
    state: RunState
    drift: int | None


@dataclass(frozen=True, slots=True)
class AppendMany:
    """A host command's events (app.core.host_commands), to append in order in ONE transaction
    with the command's offset: ``records`` are ``(sequence, key, value)``."""

    run_id: str
    records: tuple[tuple[int, bytes, bytes], ...]
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


def _no_source(_source: ForkSource) -> None:
    return None


def _correlation_of(record: Any) -> str | None:
    envelope = record.get("envelope") if isinstance(record, dict) else None
    cid = envelope.get("correlationId") if isinstance(envelope, dict) else None
    return cid if isinstance(cid, str) else None


def _key_text(key: bytes | None) -> str | None:
    if key is None:
        return None
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        return None


def letter_secrets(
    policy: HostPolicy, run_id: str | None, key: bytes | None, lineage: tuple[str, ...] = ()
) -> Secrets:
    """SR-1 (§14) for a dead letter: the registrations of the run the record names (and of
    the runs it was forked from, ``lineage``) and of the run its Kafka key names (a record that
    never parsed still told us its run by its key), and the deployment-wide ones."""
    runs = [r for r in dict.fromkeys((run_id, _key_text(key))) if r is not None]
    registered: tuple[tuple[str, str], ...] = policy.secrets_for("", lineage)
    for run in runs:
        registered += policy.secrets_for(run)
    return prepare(registered)


def _reject(
    violation: Violation,
    source: SourceRecord,
    now: str,
    policy: HostPolicy,
    run_id: str | None,
    correlation_id: str | None,
    lineage: tuple[str, ...] = (),
) -> Reject:
    secrets = letter_secrets(policy, run_id, source.key, lineage)
    letter = dead_letter(
        violation,
        source.value,
        topic=source.topic,
        partition=source.partition,
        offset=source.offset,
        now=now,
        run_id=run_id,
        correlation_id=correlation_id,
        secrets=secrets,
    )
    key = run_id.encode("utf-8") if run_id is not None else source.key
    if key is not None and secrets:
        key = redact_bytes(key, secrets)  # the letter is sent to the source's partition
    return Reject(key, orjson.dumps(letter), violation.code, letter["runId"])


def validate(  # noqa: C901 - the validator's one choke point, a refusal per return
    source: SourceRecord,
    state_of: Callable[[str], RunState | None],
    policy: HostPolicy,
    rules: Rules,
    *,
    now: str,
    partitions: int,
    max_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    fetched: Callable[[ForkSource], Any] = _no_source,
) -> Output:
    """Decide one consumed record. ``state_of(runId)`` is the run's current state (None for a
    run with no recorded event); ``partitions`` is the admission topic's partition count;
    ``fetched`` gives the log events a fork command's source range holds (the shell reads them
    before the batch). Never raises on any bytes."""
    intake = read_admission(source.key, source.value, max_bytes=max_bytes)
    if isinstance(intake, Violation):
        return _reject(intake, source, now, policy, None, None)
    assert isinstance(intake, Intake)
    run_id = intake.run_id
    correlation_id = _correlation_of(intake.record)
    if run_id is not None:
        malformed = run_id_error(run_id)
        if malformed is not None:  # before it names a partition, a key or a log line
            return _reject(malformed, source, now, policy, run_id, correlation_id)
    if run_id is not None and partition_for_run(run_id, partitions) != source.partition:
        # Co-partitioning (docs/topics.md): a run's records must arrive on the partition the
        # default partitioner gives its runId, or its order against its own log is lost.
        wrong = refuse(
            RECORD_PARTITION,
            "/runId",
            f"run {run_id!r} belongs on partition {partition_for_run(run_id, partitions)}, "
            f"not {source.partition}: publish with key=runId and the default partitioner",
            {"partition": source.partition},
        )
        return _reject(wrong, source, now, policy, run_id, correlation_id)
    state = state_of(run_id) if run_id is not None else None
    lineage = () if state is None else state.lifecycle.lineage
    record = intake.record
    if isinstance(record, dict) and "command" in record:
        if "envelope" in record:  # exactly one of the two shapes (issue 14 item 9)
            both = refuse(
                RECORD_SHAPE,
                "",
                "an admission record is {runId, envelope} (an AI envelope) or {runId, command} "
                "(a host command), never both: send them as two records",
                {"rule": RECORD_SHAPE.id},
            )
            return _reject(both, source, now, policy, run_id, correlation_id, lineage)
        if run_id is not None:
            if not sealed_by(policy.command_key, source.value or b"", source.headers):
                forged = refuse(
                    COMMAND_GATEWAY,
                    "/command",
                    "a host command is accepted only from an a2ui-stream HTTP gateway of this "
                    f"deployment (the {SEAL_HEADER} header, sealed with A2UI_STREAM_GATEWAY_KEY): "
                    "use the HTTP API; if a worker sent it, give every worker the same key",
                    {"rule": COMMAND_GATEWAY.id},
                )
                return _reject(forged, source, now, policy, run_id, None, lineage)
            return _command(record, state, source, now, policy, run_id, fetched)
    if state is not None and state.lifecycle.status in TERMINAL_STATUSES:
        # §13: an envelope for a run that ended is refused (run_terminal), recording nothing.
        ended = refuse(
            RUN_LIVE,
            "/runId",
            f"run {run_id!r} is {state.lifecycle.status}: it takes no more envelopes",
            {"runStatus": state.lifecycle.status},
        )
        return _reject(ended, source, now, policy, run_id, correlation_id, lineage)
    outcome = decide(intake.record, state, policy, rules, now=now)
    if isinstance(outcome, Admitted):
        encoded = encode_event(outcome)
        if isinstance(encoded, Refused):  # e.g. nested deeper than orjson encodes
            return _reject(encoded.violation, source, now, policy, run_id, correlation_id, lineage)
        event = outcome.event
        return Append(
            event["runId"],
            event["sequence"],
            log_key(event["runId"], event["sequence"]),
            encoded,
            outcome.state,
            outcome.drift,
        )
    if isinstance(outcome, Deduplicated):
        assert run_id is not None
        return Duplicate(run_id, outcome.correlation_id, outcome.sequence)
    return _reject(outcome.violation, source, now, policy, run_id, correlation_id, lineage)


def _command(
    record: dict[str, Any],
    state: RunState | None,
    source: SourceRecord,
    now: str,
    policy: HostPolicy,
    run_id: str,
    fetched: Callable[[ForkSource], Any],
) -> AppendMany | Reject:
    current = state if state is not None else RunState.initial(run_id)
    lineage = current.lifecycle.lineage
    secrets = prepare(policy.secrets_for(run_id, lineage))
    in_id = secret_identifier(record, secrets)
    if in_id is not None:
        return _reject(in_id, source, now, policy, run_id, None, lineage)
    decided = decide_command(
        record, current, fetched, now=now, event_id_for=event_id_for, secrets=secrets
    )
    if isinstance(decided, Violation):
        return _reject(decided, source, now, policy, run_id, None, lineage)
    records = []
    resumes = []
    for event in decided:
        try:
            value = orjson.dumps(event)
        except orjson.JSONEncodeError as exc:  # copied events were encodable once: ours
            problem = refuse(ENCODE, "/command", f"cannot encode: {exc}")
            return _reject(problem, source, now, policy, run_id, None, lineage)
        current = apply(current, event)
        records.append((event["sequence"], log_key(run_id, event["sequence"]), value))
        resumed = resume_of(event)
        if resumed is not None:
            resumes.append(orjson.dumps(resumed))
    return AppendMany(run_id, tuple(records), current, tuple(resumes))
