"""The steps of the validator's admission order after intake, and the working value they share.

``validate`` (app.core.admission.validator) walks the table ``ADMISSION``: intake
(app.core.admission.intake ``INTAKE``), then the stages whose steps are here, each an ordered
table (name, the rules it refuses by, its check): ``RUN_STEPS`` (the runId's grammar, its
partition, the run's state read, one shape of two), ``COMMAND_STEPS`` for a host command
(``is_command``: the gateway's seal, identifiers, the dispatch by type, the events encoded) and
``ENVELOPE_STEPS`` for an envelope (``is_envelope``: the terminal run, ``decide``, the event
encoded). A check answers a refusal, the record's outcome, or None (go on); ``WALKS`` names the
steps that walk a table of their own, for ``RULE_ORDER``.

May import: the standard library, orjson and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import orjson

from app.core.admission.command_seal import HEADER as SEAL_HEADER
from app.core.admission.command_seal import sealed_by
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
from app.core.admission.host_commands import COMMANDS, decide_command, resume_of
from app.core.admission.host_commands_call import ForkSource
from app.core.admission.identifiers import run_id_error, secret_identifier
from app.core.admission.intake import Reading
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
from app.core.admission.validator_outputs import (
    Append,
    AppendMany,
    Duplicate,
    Output,
    SourceRecord,
)
from app.core.runlog.events import RecordedEvent
from app.core.runlog.keys import log_key, partition_for_run
from app.core.runlog.run_lifecycle import TERMINAL_STATUSES
from app.core.runlog.run_state import RunState

__all__ = [
    "COMMAND_STEPS",
    "ENVELOPE_STEPS",
    "RUN_STEPS",
    "WALKS",
    "Check",
    "Checked",
    "StageStep",
    "ValidationContext",
    "is_command",
    "is_envelope",
]


class ValidationContext(Reading):
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
        self.events: list[RecordedEvent] = []  # a command's decided events
        self.admitted: Admitted | None = None  # an envelope's decision


Checked = Violation | Output | None  # a step's answer: refuse, the outcome, or go on
Check = Callable[[ValidationContext], Checked]
StageStep = tuple[str, tuple[Rule, ...], Check]


# --- the run: its id, its partition, its state -------------------------------------------------


def _run_id(ctx: ValidationContext) -> Checked:
    # before the runId names a partition, a key or a log line
    return None if ctx.run_id is None else run_id_error(ctx.run_id)


def _partition(ctx: ValidationContext) -> Checked:
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


def _look_up(ctx: ValidationContext) -> Checked:
    # Refuses nothing; its place in the order is where the run's state is read (a shell that
    # keeps some runs out of memory loads them here: app.core.admission.validator_batch).
    if ctx.run_id is not None:
        ctx.state = ctx.state_of(ctx.run_id)
        if ctx.state is not None:
            ctx.lineage = ctx.state.lifecycle.lineage
    return None


def _record_shape(ctx: ValidationContext) -> Checked:
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


def is_command(ctx: ValidationContext) -> bool:
    """The record is a host command ``{runId, command}`` (the command stage applies)."""
    # without a runId it is no command: the envelope stage refuses its shape
    return isinstance(ctx.record, dict) and "command" in ctx.record and ctx.run_id is not None


def _gateway(ctx: ValidationContext) -> Checked:
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


def _command_identifiers(ctx: ValidationContext) -> Checked:
    assert ctx.run_id is not None  # is_command
    if ctx.state is None:
        ctx.state = RunState.initial(ctx.run_id)
    ctx.secrets = prepare(ctx.policy.secrets_for(ctx.run_id, ctx.lineage))
    return secret_identifier(ctx.record, ctx.secrets)


def _command(ctx: ValidationContext) -> Checked:
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


def _encode_command(ctx: ValidationContext) -> Checked:
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


def is_envelope(ctx: ValidationContext) -> bool:
    """The record is not a host command: the envelope stage applies."""
    return not is_command(ctx)


def _run_live(ctx: ValidationContext) -> Checked:
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


def _decide(ctx: ValidationContext) -> Checked:
    outcome = decide(ctx.record, ctx.state, ctx.policy, ctx.rules, now=ctx.now)
    if isinstance(outcome, Admitted):
        ctx.admitted = outcome
        return None
    if isinstance(outcome, Deduplicated):
        assert ctx.run_id is not None
        return Duplicate(ctx.run_id, outcome.correlation_id, outcome.sequence)
    return outcome.violation


def _encode_envelope(ctx: ValidationContext) -> Checked:
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


# The stages' tables of steps (name, the rules it refuses by, its check), in order: the run's,
# then a command's or an envelope's (app.core.admission.validator ``ADMISSION``).
RUN_STEPS: Final[tuple[StageStep, ...]] = (
    ("run-id", (RUN_ID,), _run_id),
    ("partition", (RECORD_PARTITION,), _partition),
    ("state", (), _look_up),
    ("record-shape", (RECORD_SHAPE,), _record_shape),
)
COMMAND_STEPS: Final[tuple[StageStep, ...]] = (
    ("command-gateway", (COMMAND_GATEWAY,), _gateway),
    ("identifiers", (IDENTIFIER_SECRET,), _command_identifiers),
    (
        "command",
        tuple(dict.fromkeys(r for rules, _ in COMMANDS.values() for r in rules)),
        _command,
    ),
    ("encode", (ENCODE,), _encode_command),
)
ENVELOPE_STEPS: Final[tuple[StageStep, ...]] = (
    ("run-live", (RUN_LIVE,), _run_live),
    ("decide", tuple(dict.fromkeys(r for _, rules, _ in STEPS for r in rules)), _decide),
    ("encode", (DEPTH,), _encode_envelope),
)


# The steps that walk a table of their own, spelled out in ``RULE_ORDER``: a command's
# dispatch by type (after the record's ``command`` is found to be an object of a known type),
# and ``decide``'s envelope steps.
WALKS: Final[dict[Check, tuple[tuple[str, tuple[Rule, ...]], ...]]] = {
    _command: (
        ("", (HOST_COMMAND,)),
        *((kind, rules) for kind, (rules, _handler) in COMMANDS.items()),
    ),
    _decide: tuple((name, rules) for name, rules, _step in STEPS),
}
