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
once at import; a decision allocates one working value (``ValidationContext``). The stages'
steps are app.core.admission.validator_steps'; the record read and the outputs,
app.core.admission.validator_outputs'.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple

import orjson

from app.core.admission.dead_letter import dead_letter, redact_bytes
from app.core.admission.decision import Rules
from app.core.admission.host_commands_call import ForkSource
from app.core.admission.intake import DEFAULT_MAX_RECORD_BYTES, INTAKE
from app.core.admission.policy import HostPolicy
from app.core.admission.redaction import Secrets, prepare
from app.core.admission.refusal import Violation
from app.core.admission.rules import Rule
from app.core.admission.validator_outputs import (
    Append,
    AppendMany,
    Duplicate,
    Output,
    Reject,
    SourceRecord,
)
from app.core.admission.validator_steps import (
    COMMAND_STEPS,
    ENVELOPE_STEPS,
    RUN_STEPS,
    WALKS,
    StageStep,
    ValidationContext,
    is_command,
    is_envelope,
)
from app.core.runlog.run_state import RunState

# Append, AppendMany, Duplicate, Reject and SourceRecord are validator_outputs', named here too
# beside ``validate``, which takes and returns them.
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


class Stage(NamedTuple):
    """One stage of the admission order: it ``applies`` to a record or is skipped; its
    ``steps`` run in order; ``correlated``: its dead letters name the envelope's
    correlationId (intake has no record yet, a command carries none)."""

    name: str
    applies: Callable[[ValidationContext], bool]
    steps: tuple[StageStep, ...]
    correlated: bool


def _always(_ctx: ValidationContext) -> bool:
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
    Stage("run", _always, RUN_STEPS, True),
    Stage("command", is_command, COMMAND_STEPS, False),
    Stage("envelope", is_envelope, ENVELOPE_STEPS, True),
)


def _rule_order() -> tuple[tuple[str, str, tuple[Rule, ...]], ...]:
    rows: list[tuple[str, str, tuple[Rule, ...]]] = []
    for stage in ADMISSION:
        for name, rules, check in stage.steps:
            walked = WALKS.get(check)
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
    ctx = ValidationContext(source, state_of, policy, rules, now, partitions, max_bytes, fetched)
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
