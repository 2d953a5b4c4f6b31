"""The envelope steps of the admission decision: the table ``STEPS`` and the checks it names.

``decide`` (app.core.admission.decision) walks ``STEPS`` in order (openwop-a2ui.md §5; the
order and the rules of each step: app.core.admission.decision's docstring) over one working
value, ``DecisionContext``: each check refuses (a ``Violation``), answers an E2 re-emission
(``Deduplicated``) or fills in what the later steps and the recorded event need and lets the
record go on (None). ``Rules`` is what the checks ask of the schemas.

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, Final, Protocol

from app.core.admission.children import NO_CHILDREN, fold_children, touches_graph
from app.core.admission.cross_field import kinds_and_cross_field
from app.core.admission.decision_outcomes import Deduplicated
from app.core.admission.fold import NOT_LOOKED_UP, guard
from app.core.admission.identifiers import secret_identifier
from app.core.admission.limits import Branch
from app.core.admission.limits_envelope import check_envelope, plainly_within
from app.core.admission.policy import SURFACE_KIND, UNIVERSAL_KINDS, HostPolicy
from app.core.admission.redaction import Secrets, prepare, redact, redact_text
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
from app.core.runlog.run_state import Recorded, RunState, initial_state

__all__ = ["STEPS", "DecisionContext", "Rules", "Step"]


class Rules(Protocol):
    """The schema checks ``decide`` needs (implemented by
    app.core.admission.payload_rules.PayloadRules)."""

    def check_record(self, record: Any) -> Violation | None:
        """The envelope-record schema's refusal, or None."""

    def check_v1(self, payload: Any) -> Violation | None:
        """The refusal of a version-1 payload (schemas, limits, policy), or None."""

    def check_v2(self, payload: Any) -> Violation | None:
        """The refusal of a version-2 payload (schemas, limits, policy), or None."""


_prepared: Final[Callable[[tuple[tuple[str, str], ...]], Secrets]] = lru_cache(maxsize=1024)(
    prepare
)


_NO_STATE: Final = RunState("")  # a sentinel: compared by identity only


class DecisionContext:
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


Step = Callable[[DecisionContext], "Violation | Deduplicated | None"]


def _envelope_shape(ctx: DecisionContext) -> Violation | Deduplicated | None:
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


def _kind_catalog(ctx: DecisionContext) -> Violation | Deduplicated | None:
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


def _correlation(ctx: DecisionContext) -> Violation | Deduplicated | None:
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


def _floor(ctx: DecisionContext) -> Violation | Deduplicated | None:
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


def _branch(ctx: DecisionContext) -> Violation | Deduplicated | None:
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


def _limits(ctx: DecisionContext) -> Violation | Deduplicated | None:
    # app.core.admission.limits_envelope: only the parts the branch schemas leave open (a
    # universal kind's payload is open entirely), and the children graph no schema can express
    # (docs/admission.md).
    limits = ctx.policy.limits
    if ctx.kinds is not None and plainly_within(ctx.envelope, ctx.kinds, limits):
        return None  # the usual v2 envelope, screened in one loop
    if ctx.kind != SURFACE_KIND:
        return check_envelope(ctx.envelope, "unchecked", None, limits)
    return check_envelope(ctx.envelope, "v2" if ctx.v2 else "v1", ctx.kinds, limits)


def _cross_field(ctx: DecisionContext) -> Violation | Deduplicated | None:
    # app.core.admission.cross_field, computed by the
    # branch step (None unless a v2 payload passed it)
    return ctx.cross


def _fold(ctx: DecisionContext) -> Violation | Deduplicated | None:
    if ctx.kinds is None:  # only a payload that passed the v2 branch joins the fold (§6)
        return None
    payload = ctx.envelope["payload"]
    surface_id = payload["surfaceId"]
    if ctx.secrets:
        found = ctx.state.surfaces.get(ctx.key(surface_id))
    else:
        found = ctx.surface = ctx.state.surfaces.get(surface_id)
    return guard("absent" if found is None else found.status, surface_id, ctx.kinds)


def _children(ctx: DecisionContext) -> Violation | Deduplicated | None:
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


def _identifiers(ctx: DecisionContext) -> Violation | Deduplicated | None:
    # app.core.admission.identifiers: a secret in an
    # identifier is refused, never redacted (issue 14)
    return secret_identifier(ctx.record, ctx.secrets) if ctx.secrets else None


def _redaction(ctx: DecisionContext) -> Violation | Deduplicated | None:
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
# check. One function applies it: ``decide`` (app.core.admission.decision). This is the
# envelope stage of the whole order of one record (app.core.admission.validator ``ADMISSION``),
# where docs/admission.md's rule order comes from.
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
