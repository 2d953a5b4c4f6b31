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

The whole decision of one record is the table ``ADMISSION`` (STYLE rule 1): stages, each an
ordered table of steps (name, the rules it refuses by, check), from the bytes to the outcome:

  intake    app.core.admission.intake ``INTAKE``: value, size, UTF-8, JSON, exact JSON, key = runId
  run       the runId's grammar, its partition, the run's state read, one shape of two
  command   {runId, command}: the gateway's seal, identifiers, the dispatch by type
            (app.core.admission.host_commands ``COMMANDS``), the events encoded  -> AppendMany
  envelope  any other record: the terminal run (run-live), ``decide`` (app.core.admission.decision
            ``STEPS``), ``encode_event``                               -> Append | Duplicate

``validate`` walks it: the one choke point, where the first refusal becomes the dead letter
that names its rule. ``RULE_ORDER`` is the same order with the sub-tables spelled out, from
which docs/admission.md's rule order is written (scripts/rules_doc.py). The tables are built
once at import; a decision allocates one working value (``_Record``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import orjson

from app.core.admission.command_seal import HEADER as SEAL_HEADER
from app.core.admission.command_seal import sealed_by
from app.core.admission.dead_letter import dead_letter, redact_bytes
from app.core.admission.decision import (
    STEPS,
    Admitted,
    Deduplicated,
    Refused,
    Rules,
    decide,
    encode_event,
    event_id_for,
)
from app.core.admission.fold import apply
from app.core.admission.host_commands import COMMANDS, ForkSource, decide_command, resume_of
from app.core.admission.identifiers import run_id_error, secret_identifier
from app.core.admission.intake import DEFAULT_MAX_RECORD_BYTES, INTAKE, Reading
from app.core.admission.policy import HostPolicy
from app.core.admission.redaction import Secrets, prepare
from app.core.admission.refusal import Violation
from app.core.admission.rules import (
    COMMAND_GATEWAY,
    DEPTH,
    ENCODE,
    HOST_COMMAND,
    IDENTIFIER_SECRET,
    RECORD_PARTITION,
    RECORD_SHAPE,
    RUN_ID,
    RUN_LIVE,
    Rule,
    refuse,
)
from app.core.runlog.keys import log_key, partition_for_run
from app.core.runlog.run_lifecycle import TERMINAL_STATUSES
from app.core.runlog.run_state import RunState

__all__ = [
    "ADMISSION",
    "RULE_ORDER",
    "Append",
    "AppendMany",
    "Duplicate",
    "Reject",
    "SourceRecord",
    "Stage",
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


class _Record(Reading):
    """The working values of one decision (local to one ``validate`` call). Intake's steps
    fill ``record`` and ``run_id``; the run stage ``state`` and ``lineage``."""

    __slots__ = (
        "source",
        "state_of",
        "policy",
        "rules",
        "now",
        "partitions",
        "fetched",
        "state",
        "lineage",
        "secrets",
        "events",
        "admitted",
    )

    def __init__(
        self,
        source: SourceRecord,
        state_of: Callable[[str], RunState | None],
        policy: HostPolicy,
        rules: Rules,
        now: str,
        partitions: int,
        max_bytes: int,
        fetched: Callable[[ForkSource], Any],
    ) -> None:
        super().__init__(source.key, source.value, max_bytes)
        self.source = source
        self.state_of = state_of
        self.policy = policy
        self.rules = rules
        self.now = now
        self.partitions = partitions
        self.fetched = fetched
        self.state: RunState | None = None
        self.lineage: tuple[str, ...] = ()  # the runs a fork descends from (their secrets)
        self.secrets: Secrets = ()  # a command's (the command stage)
        self.events: list[dict[str, Any]] = []  # a command's decided events
        self.admitted: Admitted | None = None  # an envelope's decision


Checked = Violation | Output | None  # a step's answer: refuse, the outcome, or go on
Check = Callable[[_Record], Checked]
StageStep = tuple[str, tuple[Rule, ...], Check]


# --- the run: its id, its partition, its state -------------------------------------------------


def _run_id(ctx: _Record) -> Checked:
    # before the runId names a partition, a key or a log line
    return None if ctx.run_id is None else run_id_error(ctx.run_id)


def _partition(ctx: _Record) -> Checked:
    run_id, partition = ctx.run_id, ctx.source.partition
    if run_id is not None and partition_for_run(run_id, ctx.partitions) != partition:
        # Co-partitioning (docs/topics.md): a run's records must arrive on the partition the
        # default partitioner gives its runId, or its order against its own log is lost.
        return refuse(
            RECORD_PARTITION,
            "/runId",
            f"run {run_id!r} belongs on partition {partition_for_run(run_id, ctx.partitions)}, "
            f"not {partition}: publish with key=runId and the default partitioner",
            {"partition": partition},
        )
    return None


def _look_up(ctx: _Record) -> Checked:
    # Refuses nothing; its place in the order is where the run's state is read (a shell that
    # keeps some runs out of memory loads them here: app.core.admission.validator_batch).
    if ctx.run_id is not None:
        ctx.state = ctx.state_of(ctx.run_id)
        if ctx.state is not None:
            ctx.lineage = ctx.state.lifecycle.lineage
    return None


def _record_shape(ctx: _Record) -> Checked:
    record = ctx.record
    if isinstance(record, dict) and "command" in record and "envelope" in record:
        # exactly one of the two shapes (issue 14 item 9)
        return refuse(
            RECORD_SHAPE,
            "",
            "an admission record is {runId, envelope} (an AI envelope) or {runId, command} "
            "(a host command), never both: send them as two records",
            {"rule": RECORD_SHAPE.id},
        )
    return None


# --- a host command {runId, command} (app.core.admission.host_commands) ---------------------------


def _is_command(ctx: _Record) -> bool:
    # without a runId it is no command: the envelope stage refuses its shape
    return isinstance(ctx.record, dict) and "command" in ctx.record and ctx.run_id is not None


def _gateway(ctx: _Record) -> Checked:
    source = ctx.source
    if sealed_by(ctx.policy.command_key, source.value or b"", source.headers):
        return None
    return refuse(
        COMMAND_GATEWAY,
        "/command",
        "a host command is accepted only from an a2ui-stream HTTP gateway of this "
        f"deployment (the {SEAL_HEADER} header, sealed with A2UI_STREAM_GATEWAY_KEY): "
        "use the HTTP API; if a worker sent it, give every worker the same key",
        {"rule": COMMAND_GATEWAY.id},
    )


def _command_identifiers(ctx: _Record) -> Checked:
    assert ctx.run_id is not None  # _is_command
    if ctx.state is None:
        ctx.state = RunState.initial(ctx.run_id)
    ctx.secrets = prepare(ctx.policy.secrets_for(ctx.run_id, ctx.lineage))
    return secret_identifier(ctx.record, ctx.secrets)


def _command(ctx: _Record) -> Checked:
    assert ctx.state is not None  # _command_identifiers
    decided = decide_command(
        ctx.record,
        ctx.state,
        ctx.fetched,
        now=ctx.now,
        event_id_for=event_id_for,
        secrets=ctx.secrets,
    )
    if isinstance(decided, Violation):
        return decided
    ctx.events = decided
    return None


def _encode_command(ctx: _Record) -> Checked:
    run_id, current = ctx.run_id, ctx.state
    assert run_id is not None and current is not None
    records = []
    resumes = []
    types = []
    for event in ctx.events:
        try:
            value = orjson.dumps(event)
        except orjson.JSONEncodeError as exc:  # copied events were encodable once: ours
            return refuse(ENCODE, "/command", f"cannot encode: {exc}")
        current = apply(current, event)
        records.append((event["sequence"], log_key(run_id, event["sequence"]), value))
        types.append(str(event["type"]))
        resumed = resume_of(event)
        if resumed is not None:
            resumes.append(orjson.dumps(resumed))
    return AppendMany(run_id, tuple(records), tuple(types), current, tuple(resumes))


# --- an envelope {runId, envelope} (app.core.admission.decision) ----------------------------------


def _is_envelope(ctx: _Record) -> bool:
    return not _is_command(ctx)


def _run_live(ctx: _Record) -> Checked:
    state = ctx.state
    if state is not None and state.lifecycle.status in TERMINAL_STATUSES:
        # §13: an envelope for a run that ended is refused (run_terminal), recording nothing.
        return refuse(
            RUN_LIVE,
            "/runId",
            f"run {ctx.run_id!r} is {state.lifecycle.status}: it takes no more envelopes",
            {"runStatus": state.lifecycle.status},
        )
    return None


def _decide(ctx: _Record) -> Checked:
    outcome = decide(ctx.record, ctx.state, ctx.policy, ctx.rules, now=ctx.now)
    if isinstance(outcome, Admitted):
        ctx.admitted = outcome
        return None
    if isinstance(outcome, Deduplicated):
        assert ctx.run_id is not None
        return Duplicate(ctx.run_id, outcome.correlation_id, outcome.sequence)
    return outcome.violation


def _encode_envelope(ctx: _Record) -> Checked:
    admitted = ctx.admitted
    assert admitted is not None  # _decide
    encoded = encode_event(admitted)
    if isinstance(encoded, Refused):  # e.g. nested deeper than orjson encodes
        return encoded.violation
    event = admitted.event
    return Append(
        event["runId"],
        event["sequence"],
        log_key(event["runId"], event["sequence"]),
        encoded,
        admitted.state,
        admitted.drift,
        str(event["type"]),
    )


class Stage(NamedTuple):
    """One stage of the admission order: it ``applies`` to a record or is skipped; its
    ``steps`` run in order; ``correlated``: its dead letters name the envelope's
    correlationId (intake has no record yet, a command carries none)."""

    name: str
    applies: Callable[[_Record], bool]
    steps: tuple[StageStep, ...]
    correlated: bool


def _always(_ctx: _Record) -> bool:
    return True


# The admission order of one record, from its bytes to its outcome (STYLE rule 1): stages, each
# an ordered table of steps (name, the rules it refuses by, its check). ``validate`` walks it,
# the one choke point: the first step that answers decides the record, with a refusal that
# names its rule or with the outcome. A command record and an envelope part after the shape:
# exactly one of the last two stages applies. The envelope steps of ``decide`` are
# app.core.admission.decision ``STEPS`` (openwop-a2ui.md §5), a command's by type are
# app.core.admission.host_commands ``COMMANDS``; ``RULE_ORDER`` spells it all out, and
# docs/admission.md's rule order is written from it (scripts/rules_doc.py). Not ``Final``: compiled
# with mypyc, a ``Final`` table is bound into ``validate`` at build time, and the test that every
# refusing step declares its rule wraps the steps of this one (tests/core/test_admission_golden.py).
ADMISSION: tuple[Stage, ...] = (
    Stage("intake", _always, INTAKE, False),
    Stage(
        "run",
        _always,
        (
            ("run-id", (RUN_ID,), _run_id),
            ("partition", (RECORD_PARTITION,), _partition),
            ("state", (), _look_up),
            ("record-shape", (RECORD_SHAPE,), _record_shape),
        ),
        True,
    ),
    Stage(
        "command",
        _is_command,
        (
            ("command-gateway", (COMMAND_GATEWAY,), _gateway),
            ("identifiers", (IDENTIFIER_SECRET,), _command_identifiers),
            (
                "command",
                tuple(dict.fromkeys(r for rules, _ in COMMANDS.values() for r in rules)),
                _command,
            ),
            ("encode", (ENCODE,), _encode_command),
        ),
        False,
    ),
    Stage(
        "envelope",
        _is_envelope,
        (
            ("run-live", (RUN_LIVE,), _run_live),
            ("decide", tuple(dict.fromkeys(r for _, rules, _ in STEPS for r in rules)), _decide),
            ("encode", (DEPTH,), _encode_envelope),
        ),
        True,
    ),
)


# The steps that walk a table of their own, spelled out in ``RULE_ORDER``: a command's
# dispatch by type (after the record's ``command`` is found to be an object of a known type),
# and ``decide``'s envelope steps.
_WALKS: Final[dict[Check, tuple[tuple[str, tuple[Rule, ...]], ...]]] = {
    _command: (
        ("", (HOST_COMMAND,)),
        *((kind, rules) for kind, (rules, _handler) in COMMANDS.items()),
    ),
    _decide: tuple((name, rules) for name, rules, _step in STEPS),
}


def _rule_order() -> tuple[tuple[str, str, tuple[Rule, ...]], ...]:
    rows: list[tuple[str, str, tuple[Rule, ...]]] = []
    for stage in ADMISSION:
        for name, rules, check in stage.steps:
            walked = _WALKS.get(check)
            if walked is None:
                rows.append((stage.name, name, rules))
            else:
                rows += [(stage.name, f"{name} {sub}".strip(), rs) for sub, rs in walked]
    return tuple(rows)


# Every step of the order with the rules it refuses by, the sub-tables spelled out: (stage,
# step, rules). Data for docs and tests; ``validate`` walks ``ADMISSION``.
RULE_ORDER: Final = _rule_order()


def validate(
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
    """Decide one consumed record: walk ``ADMISSION`` (the choke point). ``state_of(runId)`` is
    the run's current state (None for a run with no recorded event); ``partitions`` is the
    admission topic's partition count; ``fetched`` gives the log events a fork command's source
    range holds (the shell reads them before the batch). Never raises on any bytes."""
    ctx = _Record(source, state_of, policy, rules, now, partitions, max_bytes, fetched)
    for stage in ADMISSION:
        if not stage.applies(ctx):
            continue
        for _name, _rules, check in stage.steps:
            answer = check(ctx)
            if answer is None:
                continue
            if not isinstance(answer, Violation):
                return answer
            correlation_id = _correlation_of(ctx.record) if stage.correlated else None
            return _reject(answer, source, now, policy, ctx.run_id, correlation_id, ctx.lineage)
    raise AssertionError("every record ends in the command or the envelope stage")  # a bug
