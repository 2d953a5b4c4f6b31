"""The admission decision: one admission record ``{runId, envelope}`` + the run's state + the
host policy -> ``Admitted`` | ``Refused`` | ``Deduplicated``. Outcomes are data (STYLE rule 2);
the shell records, dead-letters or acknowledges.

The rule order is the table ``STEPS`` (STYLE rule 1; each step with the rules it refuses by),
exactly openwop-a2ui.md §5 ("Step order in the v2 reference host" and the normative list):

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

May import: the standard library, orjson and app.core.* (pure). Time and ids come in as
arguments: ``now`` (RFC 3339) and optionally ``event_id``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar, Final, Protocol

import orjson

from app.core.admission.children import NO_CHILDREN, fold_children, touches_graph
from app.core.admission.cross_field import kinds_and_cross_field
from app.core.admission.fold import NOT_LOOKED_UP, apply_with, guard
from app.core.admission.identifiers import secret_identifier
from app.core.admission.limits import Branch
from app.core.admission.limits_envelope import check_envelope, plainly_within
from app.core.admission.policy import SURFACE_KIND, UNIVERSAL_KINDS, HostPolicy
from app.core.admission.redaction import Secrets, prepare, redact, redact_text, redact_violation
from app.core.admission.refusal import Violation
from app.core.admission.rules import (
    BRANCH,
    CATALOG_EQUALITY,
    CATALOG_VERSION,
    CHILDREN_CYCLE,
    CHILDREN_DEPTH,
    COMPONENTS,
    CORRELATION,
    DATA_PATH,
    DEPTH,
    ENVELOPE_SHAPE,
    FLOOR,
    FOLD,
    IDENTIFIER_SECRET,
    KIND_CATALOG,
    REDACTION_INVALID,
    RUN_KEY,
    STRICTNESS,
    STRING_CHARS,
    SURFACE_ID_EQUALITY,
    Rule,
    refuse,
)
from app.core.runlog.run_state import FrozenValue, Recorded, RunState, initial_state

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


class Rules(Protocol):
    """The schema checks ``decide`` needs (implemented by
    app.core.admission.payload_rules.PayloadRules)."""

    def check_record(self, record: Any) -> Violation | None:
        """The envelope-record schema's refusal, or None."""

    def check_v1(self, payload: Any) -> Violation | None:
        """The refusal of a version-1 payload (schemas, limits, policy), or None."""

    def check_v2(self, payload: Any) -> Violation | None:
        """The refusal of a version-2 payload (schemas, limits, policy), or None."""


class Admitted(FrozenValue):
    """Record ``event`` on the run log; ``state`` is the run state after it. ``drift`` is the
    emitted schemaVersion when warn admitted it below the floor (``envelope_schema_version_drift``
    to log), else None. Immutable like the other outcomes, and, like the run state's values,
    a plain class rather than a frozen dataclass: compiled, building one is a native call (about
    0.1 µs) where the dataclass's generated ``__init__`` took about 1 µs
    (app/core/runlog/run_state.py)."""

    __slots__ = ("event", "state", "drift")
    _fields: ClassVar[tuple[str, ...]] = ("event", "state", "drift")

    def __init__(self, event: dict[str, Any], state: RunState, drift: int | None = None) -> None:
        self.event: Final = event
        self.state: Final = state
        self.drift: Final = drift

    @property
    def sequence(self) -> int:
        """The run sequence ``event`` is recorded at."""
        return int(self.event["sequence"])


@dataclass(frozen=True, slots=True)
class Refused:
    """Dead-letter the record with ``violation``; the run state is unchanged, nothing recorded."""

    violation: Violation


@dataclass(frozen=True, slots=True)
class Deduplicated:
    """E2 re-emission: the correlationId was already recorded with the same type. Answer with
    the ORIGINAL outcome (``sequence``, ``event_id``) and record nothing."""

    sequence: int
    event_id: str
    correlation_id: str


Outcome = Admitted | Refused | Deduplicated


def _prefix_of(run_id: str) -> str:
    return "evt-" + hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


_event_id_prefix: Final[Callable[[str], str]] = lru_cache(maxsize=4096)(_prefix_of)


def event_id_for(run_id: str, sequence: int) -> str:
    """The deterministic eventId of the event at ``sequence`` in ``run_id``: matches the v2
    grammar ``^[A-Za-z0-9._~-]{16,128}$`` and is the same on replay. (``zfill`` rather than a
    ``:012d`` format: compiled, a format spec is two ``str.format`` calls.)"""
    return _event_id_prefix(run_id) + "-" + str(sequence).zfill(12)


_prepared: Final[Callable[[tuple[tuple[str, str], ...]], Secrets]] = lru_cache(maxsize=1024)(
    prepare
)


_NO_STATE: Final = RunState("")  # a sentinel: compared by identity only


class _Ctx:
    """The working values of one decision (local to one ``decide`` call)."""

    __slots__ = (
        "record",
        "state",
        "policy",
        "rules",
        "run_id",
        "envelope",
        "kind",
        "secrets",
        "selected",
        "drift",
        "v2",
        "kinds",
        "cross",
        "correlation",
        "surface",
        "redacted",
        "children",
    )

    def __init__(self, record: Any, state: RunState | None, policy: HostPolicy, rules: Rules):
        self.record = record
        # _NO_STATE until the record's runId is known (then initial_state, step 1)
        self.state: RunState = _NO_STATE if state is None else state
        self.policy = policy
        self.rules = rules
        self.run_id = ""
        self.envelope: dict[str, Any] = {}
        self.kind = ""
        self.secrets: Secrets = ()
        self.selected = 0
        self.drift: int | None = None
        self.v2 = False
        self.kinds: tuple[str, ...] | None = None
        # the cross-field verdict, found in the branch step's pass over the messages
        self.cross: Violation | None = None
        # what the state holds for the correlationId and surfaceId (E2 and the guard looked them
        # up; the fold reuses them when the keys are the recorded ones, i.e. without secrets)
        self.correlation: Any = NOT_LOOKED_UP
        self.surface: Any = NOT_LOOKED_UP
        # the envelope to record: SR-1 redacted by the redaction step (the SAME object when
        # nothing matched, so key order and bytes are as received)
        self.redacted: dict[str, Any] | None = None
        # the surface's children graph after this envelope (the children step;
        # app.core.admission.children)
        self.children: Any = NOT_LOOKED_UP

    def key(self, text: str) -> str:
        """A state key as it will appear in the recorded (SR-1 redacted) log."""
        return redact_text(text, self.secrets) if self.secrets else text


Step = Callable[[_Ctx], "Violation | Deduplicated | None"]


def _envelope_shape(ctx: _Ctx) -> Violation | Deduplicated | None:
    violation = ctx.rules.check_record(ctx.record)
    if violation is not None:
        return violation
    ctx.run_id = ctx.record["runId"]
    if ctx.state is _NO_STATE:
        ctx.state = initial_state(ctx.run_id)
    elif ctx.state.run_id != ctx.run_id:
        return refuse(
            RUN_KEY,
            "/runId",
            f"the record's runId {ctx.run_id!r} is not the run {ctx.state.run_id!r} it was "
            "keyed to; key each admission record by its runId",
            {"runId": ctx.run_id, "keyedRunId": ctx.state.run_id},
        )
    # The admission-record schema embeds the AI envelope schema (§2), so one check covers both.
    ctx.envelope = ctx.record["envelope"]
    ctx.kind = ctx.envelope["type"]
    if ctx.policy.secrets:  # most hosts register none: skip the lookup on the hot path
        lineage = ctx.state.lifecycle.lineage  # a fork inherits its ancestors' secrets
        ctx.secrets = _prepared(ctx.policy.secrets_for(ctx.run_id, lineage))
    return None


def _kind_catalog(ctx: _Ctx) -> Violation | Deduplicated | None:
    if ctx.policy.knows(ctx.kind):  # §5 (1); universal kinds are always known (§2)
        return None
    return refuse(
        KIND_CATALOG,
        "/envelope/type",
        f"envelope type {ctx.kind!r} is not in this host's catalog "
        f"{list(ctx.policy.kinds)!r} (universal kinds {sorted(UNIVERSAL_KINDS)!r} are always "
        "known); emit a supported kind",
        {"type": ctx.kind, "kinds": list(ctx.policy.kinds)},
    )


def _correlation(ctx: _Ctx) -> Violation | Deduplicated | None:
    cid = ctx.envelope["correlationId"]
    if ctx.secrets:
        cid = ctx.key(cid)
    entry = ctx.state.correlations.get(cid)
    if not ctx.secrets:
        ctx.correlation = entry
    if entry is None:
        return None
    if entry.type != ctx.kind:  # §2 E2
        return refuse(
            CORRELATION,
            "/envelope/correlationId",
            f"correlationId {cid!r} was already recorded in this run for type {entry.type!r}; "
            f"a {ctx.kind!r} envelope cannot reuse it: use a fresh correlationId",
            {"correlationId": cid, "recordedType": entry.type, "type": ctx.kind},
        )
    partial = ctx.envelope.get("partial")
    index = partial.get("index") if isinstance(partial, dict) else None
    hit: Recorded | None = entry.chunks.get(index) if isinstance(index, int) else None
    if hit is None and entry.complete:
        hit = entry.last
    if hit is None:
        return None  # E1: the next chunk of an emission that is still open
    return Deduplicated(hit.sequence, hit.event_id, cid)


def _floor(ctx: _Ctx) -> Violation | Deduplicated | None:
    emitted = ctx.envelope.get("schemaVersion", 0)
    if isinstance(emitted, float) and emitted < 2**53:  # JSON Schema "integer" admits 2.0
        emitted = int(emitted)  # record it as 2; a huge one stays a float (JSON-encodable)
    floor = ctx.policy.floor(ctx.kind)
    if emitted == floor:
        ctx.selected = emitted
        return None
    details = {"kind": ctx.kind, "schemaVersion": emitted, "floor": floor}
    if emitted > floor:  # §5 (2): whatever the strictness
        return refuse(
            FLOOR,
            "/envelope/schemaVersion",
            f"schemaVersion {emitted} of {ctx.kind!r} is above this host's version {floor}; "
            f"emit schemaVersion {floor}",
            details,
        )
    if ctx.policy.strictness == "strict":  # §5 (3)
        return refuse(
            STRICTNESS,
            "/envelope/schemaVersion",
            f"schemaVersion {emitted} of {ctx.kind!r} is below this host's version {floor} "
            f"and strictness is strict; emit schemaVersion {floor}",
            {**details, "strictness": "strict"},
        )
    ctx.drift = emitted  # warn: validate against the advertised version, log the drift
    ctx.selected = floor
    return None


def _branch(ctx: _Ctx) -> Violation | Deduplicated | None:
    if ctx.kind != SURFACE_KIND:
        return None  # universal kinds: recorded with their payload unchecked (docs/admission.md)
    payload = ctx.envelope["payload"]
    # §1 / RFC 0209 §A.1: exactly one branch, never the union.
    ctx.v2 = ctx.selected == 2
    violation = ctx.rules.check_v2(payload) if ctx.v2 else ctx.rules.check_v1(payload)
    if violation is None:
        if ctx.v2:
            # one pass over the messages for their kinds (the fold's input) and the
            # cross-field verdict, which the next step reports in its place in the order
            ctx.kinds, ctx.cross = kinds_and_cross_field(payload)
        return None
    branch = "payloadV2" if ctx.v2 else "payloadV1"
    details = {**violation.details, "branch": branch, "schemaVersion": ctx.selected}
    details.setdefault("rule", violation.rule)
    where = f"branch {branch}, selected by schemaVersion {ctx.selected}"
    if ctx.drift is not None:  # §5 (3) warn: below the floor, checked as the floor's version
        where = (
            f"branch {branch}: this host's floor is {ctx.selected} (A2UI_STREAM_FLOOR), so "
            f"schemaVersion {ctx.drift} is checked as a v{ctx.selected} payload; emit "
            f"schemaVersion {ctx.selected} with a v{ctx.selected} payload"
        )
        if ctx.drift == 1:
            where += (
                ", or run the host with A2UI_STREAM_FLOOR=1, which admits v1 payloads "
                "(and refuses schemaVersion 2)"
            )
    return Violation(
        violation.code, violation.rule, violation.path, f"{violation.message} [{where}]", details
    )


def _limits(ctx: _Ctx) -> Violation | Deduplicated | None:
    # app.core.admission.limits_envelope: only the parts the branch schemas leave open (a
    # universal kind's payload is open entirely), and the children graph no schema can express
    # (docs/admission.md).
    limits = ctx.policy.limits
    if ctx.kinds is not None and plainly_within(ctx.envelope, ctx.kinds, limits):
        return None  # the usual v2 envelope, screened in one loop
    if ctx.kind != SURFACE_KIND:
        return check_envelope(ctx.envelope, "unchecked", None, limits)
    return check_envelope(ctx.envelope, "v2" if ctx.v2 else "v1", ctx.kinds, limits)


def _cross_field(ctx: _Ctx) -> Violation | Deduplicated | None:
    # app.core.admission.cross_field, computed by the
    # branch step (None unless a v2 payload passed it)
    return ctx.cross


def _fold(ctx: _Ctx) -> Violation | Deduplicated | None:
    if ctx.kinds is None:  # only a payload that passed the v2 branch joins the fold (§6)
        return None
    payload = ctx.envelope["payload"]
    surface_id = payload["surfaceId"]
    if ctx.secrets:
        found = ctx.state.surfaces.get(ctx.key(surface_id))
    else:
        found = ctx.surface = ctx.state.surfaces.get(surface_id)
    return guard("absent" if found is None else found.status, surface_id, ctx.kinds)


def _children(ctx: _Ctx) -> Violation | Deduplicated | None:
    # app.core.admission.children: no cycle in the surface's children graph, across its envelopes
    kinds = ctx.kinds
    if kinds is None or not touches_graph(kinds):
        return None
    payload = ctx.envelope["payload"]
    surface = ctx.surface
    if surface is NOT_LOOKED_UP:
        surface = ctx.state.surfaces.get(ctx.key(payload["surfaceId"]))
    base = NO_CHILDREN if surface is None else surface.children
    ctx.children, violation = fold_children(base, payload["messages"], kinds)
    return violation


def _identifiers(ctx: _Ctx) -> Violation | Deduplicated | None:
    # app.core.admission.identifiers: a secret in an
    # identifier is refused, never redacted (issue 14)
    return secret_identifier(ctx.record, ctx.secrets) if ctx.secrets else None


def _redaction(ctx: _Ctx) -> Violation | Deduplicated | None:
    # §14 SR-1 over the whole envelope (every string leaf and key, reasoning included). The law
    # "every recorded event is valid under the profile it was admitted by" holds only if the
    # redacted envelope still passes: a marker longer than its secret can outgrow a maxLength.
    if not ctx.secrets:
        return None
    redacted = redact(ctx.envelope, ctx.secrets)
    ctx.redacted = redacted
    if redacted is ctx.envelope:
        return None
    violation = ctx.rules.check_record({"runId": ctx.run_id, "envelope": redacted})
    if violation is None and ctx.kind == SURFACE_KIND:
        payload = redacted["payload"]
        violation = ctx.rules.check_v2(payload) if ctx.v2 else ctx.rules.check_v1(payload)
    if violation is None:
        branch: Branch = "unchecked" if ctx.kind != SURFACE_KIND else "v2" if ctx.v2 else "v1"
        violation = check_envelope(redacted, branch, ctx.kinds, ctx.policy.limits)
    if violation is None:
        return None
    where = violation.path or "/"
    return refuse(
        REDACTION_INVALID,
        violation.path,
        f"SR-1 redaction would leave the record invalid at {where} ({violation.message}): a "
        "registered secret sits where its [REDACTED:<secretId>] marker does not fit (text "
        "near its length limit); send the record without the secret there",
        {"rule": REDACTION_INVALID.id, "cause": violation.rule},
    )


# The rule order (openwop-a2ui.md §5): each step's name, the rules it refuses by (within a
# step, which comes first depends on the record: the first violation its walk meets) and its
# check. One function applies it: ``decide``. This is the envelope stage of the whole order of
# one record (app.core.admission.validator ``ADMISSION``), where docs/admission.md's rule order
# comes from.
STEPS: Final[tuple[tuple[str, tuple[Rule, ...], Step], ...]] = (
    ("envelope-shape", (ENVELOPE_SHAPE, RUN_KEY), _envelope_shape),
    ("kind-catalog", (KIND_CATALOG,), _kind_catalog),
    ("correlation", (CORRELATION,), _correlation),
    ("floor", (FLOOR, STRICTNESS), _floor),
    ("branch", (BRANCH, CATALOG_VERSION), _branch),
    (
        "limits",
        (DEPTH, STRING_CHARS, COMPONENTS, CHILDREN_DEPTH, CHILDREN_CYCLE, DATA_PATH),
        _limits,
    ),
    ("identifiers", (IDENTIFIER_SECRET,), _identifiers),
    ("cross-field", (SURFACE_ID_EQUALITY, CATALOG_EQUALITY), _cross_field),
    ("fold", (FOLD,), _fold),
    ("children", (CHILDREN_CYCLE,), _children),
    ("redaction", (REDACTION_INVALID,), _redaction),
)


def _record(ctx: _Ctx, now: str, event_id: str | None) -> Admitted:
    envelope = ctx.envelope if ctx.redacted is None else ctx.redacted
    meta = envelope.get("meta")
    # §7 trust normalization: untrusted iff meta.contentTrust == "untrusted".
    untrusted = isinstance(meta, dict) and meta.get("contentTrust") == "untrusted"
    trust = "untrusted" if untrusted else "trusted"
    state = ctx.state
    sequence = state.next_sequence
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
    recorded: dict[str, Any] = {"envelope": envelope, "version": ctx.selected, "trust": trust}
    if ctx.drift is not None:
        recorded["driftFrom"] = ctx.drift
    event["payload"] = recorded
    # The new state comes from the event itself, so replay (reduce(apply, log)) equals it.
    return Admitted(
        event,
        apply_with(state, event, ctx.kinds, ctx.correlation, ctx.surface, ctx.children),
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
    ctx = _Ctx(record, state, policy, rules)
    for _name, _rules, step in STEPS:
        result = step(ctx)
        if result is None:
            continue
        if isinstance(result, Deduplicated):
            return result
        return Refused(redact_violation(result, ctx.secrets))
    return _record(ctx, now, event_id)
