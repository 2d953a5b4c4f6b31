"""The admission decision: one admission record ``{runId, envelope}`` + the run's state + the
host policy -> ``Admitted`` | ``Refused`` | ``Deduplicated``. Outcomes are data (STYLE rule 2);
the shell records, dead-letters or acknowledges.

The rule order is the table ``STEPS`` (STYLE rule 1; each step with the rules it refuses by;
it and its checks are app.core.admission.decision_steps'), exactly openwop-a2ui.md §5 ("Step
order in the v2 reference host" and the normative list):

  1. envelope-shape   the record and the AI envelope shape            -> validation_error
  2. kind-catalog     universal kinds or ``policy.kinds``              -> unknown_envelope_kind
  3. correlation      E2: same id + same type => the original outcome, recording nothing;
                      same id + other type         -> envelope_correlation_conflict
  4. floor            emitted > floor                                 -> unknown_schema_version
                      emitted < floor: strict                         -> unknown_schema_version
                                       warn => validate at the floor, flag the drift
  5. branch           exactly ONE branch: 2 => payloadV2, 0/1 => payloadV1 -> envelope_invalid
                      (an unknown v1 catalogVersion                   -> unknown_schema_version)
     limits           what the branch schemas leave open: depth, string length, component
                      count, children depth (app.core.admission.limits_envelope)
                                                                      -> record_limit_exceeded
                      a cycle in the children graph                   -> envelope_invalid
  6. cross-field      surface-id-equality, catalog-equality (v2)      -> envelope_invalid
  7. fold             the §6 guard across the run's log and the envelope -> envelope_invalid
     children         no cycle in a surface's children graph, across its envelopes
                      (app.core.admission.children)                             -> envelope_invalid
     identifiers      no registered secret in an identifier (app.core.admission.identifiers)
                                                                      -> envelope_invalid
  8. redaction        SR-1; the redacted record must still pass the shape, its branch and
                      the limits (a secret's marker can outgrow a maxLength) -> envelope_invalid
     then trust normalization, sticky taint, record (``fold.apply``).

A refusal records nothing and leaves the state untouched (§5 (7)). ``STEPS`` is the envelope
stage of the admission order of one record, from its bytes to its outcome:
app.core.admission.validator ``ADMISSION`` puts intake, the run's checks, and ``run_terminal`` (rule
``run-live``, the reference host's first step) before ``decide``, and ``encode_event`` after
it; a host command on an ended run is refused by app.core.admission.host_commands. The run state
carries the run's lifecycle (``RunState.lifecycle``, folded from its host events); ``decide``
itself does not read the status.

The outcomes are app.core.admission.decision_outcomes' and ``Rules`` is decision_steps': this
module names them too, beside ``decide``, which takes and returns them.

May import: the standard library, orjson and app.core.* (pure). Time and ids come in as
arguments: ``now`` (RFC 3339) and optionally ``event_id``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Final, cast

import orjson

from app.core.admission.decision_outcomes import Admitted, Deduplicated, Outcome, Refused
from app.core.admission.decision_steps import STEPS, DecisionContext, Rules
from app.core.admission.fold import apply_with
from app.core.admission.policy import HostPolicy
from app.core.admission.redaction import redact_violation
from app.core.admission.rules import DEPTH, refuse
from app.core.runlog.events import EnvelopePayload, RecordedEvent
from app.core.runlog.run_state import RunState

__all__ = [
    "Rules",
    "Admitted",
    "Refused",
    "Deduplicated",
    "Outcome",
    "STEPS",
    "RECORDED_EVENT_SCHEMA_VERSION",
    "event_id_for",
    "encode_event",
    "decide",
]

RECORDED_EVENT_SCHEMA_VERSION: Final = 1


def _prefix_of(run_id: str) -> str:
    return "evt-" + hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


_event_id_prefix: Final[Callable[[str], str]] = lru_cache(maxsize=4096)(_prefix_of)


def event_id_for(run_id: str, sequence: int) -> str:
    """The deterministic eventId of the event at ``sequence`` in ``run_id``: matches the v2
    grammar ``^[A-Za-z0-9._~-]{16,128}$`` and is the same on replay. (``zfill`` rather than a
    ``:012d`` format: compiled, a format spec is two ``str.format`` calls.)"""
    return _event_id_prefix(run_id) + "-" + str(sequence).zfill(12)


def _record(ctx: DecisionContext, now: str, event_id: str | None) -> Admitted:
    envelope = ctx.envelope if ctx.redacted is None else ctx.redacted
    meta = envelope.get("meta")
    # §7 trust normalization: untrusted iff meta.contentTrust == "untrusted".
    untrusted = isinstance(meta, dict) and meta.get("contentTrust") == "untrusted"
    trust = "untrusted" if untrusted else "trusted"
    state = ctx.state
    sequence = state.next_sequence
    # Built as a dict, then typed: its keys in the order the schema lists them (the payload
    # last), which is the recorded bytes' order.
    event: dict[str, Any] = {
        "eventId": event_id if event_id is not None else event_id_for(ctx.run_id, sequence),
        "runId": ctx.run_id,
        "sequence": sequence,
        "type": ctx.kind,
        "schemaVersion": RECORDED_EVENT_SCHEMA_VERSION,
        "timestamp": now,
    }
    if "nodeId" in envelope:
        event["nodeId"] = envelope["nodeId"]
    event["causationId"] = envelope["correlationId"]  # §2 E2 / §8
    event["contentTrust"] = trust
    recorded: EnvelopePayload = {"envelope": envelope, "version": ctx.selected, "trust": trust}
    if ctx.drift is not None:
        recorded["driftFrom"] = ctx.drift
    event["payload"] = recorded
    typed = cast(RecordedEvent, event)
    # The new state comes from the event itself, so replay (reduce(apply, log)) equals it.
    return Admitted(
        typed,
        apply_with(state, typed, ctx.kinds, ctx.correlation, ctx.surface, ctx.children),
        ctx.drift,
    )


def encode_event(admitted: Admitted) -> bytes | Refused:
    """The bytes to append to the run log for ``admitted``, or a refusal when the event cannot be
    encoded. The schemas leave two places unbounded in depth (``updateDataModel.value`` and
    array values in a Button's ``event.context``) and universal kinds are recorded unchecked,
    while orjson encodes at most 254 levels: such an envelope is refused with
    ``record_limit_exceeded`` instead of crashing the worker (STYLE rule 3). The shell must call
    this BEFORE it keeps ``admitted.state``, and keep the old state on a refusal. Encoding here
    rather than in ``decide`` keeps the serialization cost out of the decision (the shell pays
    it once either way); the key order of the envelope is preserved byte for byte."""
    try:
        return orjson.dumps(admitted.event)
    except orjson.JSONEncodeError as exc:
        return Refused(
            refuse(
                DEPTH,
                "/envelope",
                f"the envelope cannot be recorded ({exc}); JSON nested deeper than about 250 "
                "levels is refused: flatten updateDataModel values and action contexts",
                {"rule": DEPTH.id},
            )
        )


def decide(
    record: Any,
    state: RunState | None,
    policy: HostPolicy,
    rules: Rules,
    *,
    now: str,
    event_id: str | None = None,
) -> Outcome:
    """Decide one admission record.

    ``state`` is the run's current state, or None for a run with no recorded event yet (the
    initial state is then built from ``record.runId``). A record whose runId is not
    ``state.run_id`` is refused with ``record_key_mismatch``. ``now`` is the RFC 3339 timestamp
    the shell stamps on the recorded event; ``event_id`` overrides the deterministic id.
    Never raises on any JSON value as ``record`` (STYLE rule 3).
    """
    ctx = DecisionContext(record, state, policy, rules)
    for _name, _rules, step in STEPS:
        result = step(ctx)
        if result is None:
            continue
        if isinstance(result, Deduplicated):
            return result
        return Refused(redact_violation(result, ctx.secrets))
    return _record(ctx, now, event_id)
