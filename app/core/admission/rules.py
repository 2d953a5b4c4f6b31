"""The rule registry: every rule a refusal can name, once, with its code, its source and advice.

One home (STYLE rule 11): the ``rule`` of every ``Violation`` is the ``id`` of one entry here.
A refusal is built by ``refuse(RULE, path, message, details)``, which takes the stable code
from the entry; the only other way to name a rule is to carry it from an existing
``Violation`` (a step that moves its pointer or rewords its message).
tests/core/test_rules.py scans app/ for any other construction, so a rule named by a free
string fails the suite. The ids are on the wire (dead letters, ``details.rule`` of an HTTP
error, ``a2ui-stream check``): renaming one is a change a producer sees, said so in
docs/admission.md, whose rule list ``scripts/rules_doc.py`` writes from this table.

Each entry: ``id``; ``code``, the refusal code it refuses with (app.core.admission.refusal
``CODES``), and ``also``, the other codes it refuses with in some cases (none but
``interrupt-pending``); ``step``, where it is applied: a stage or a step of the admission order of
one record (app.core.admission.validator ``RULE_ORDER``, docs/admission.md "Rule order"), or,
outside it, ``action`` (an action checked at HTTP, app.core.http.actions) and ``write`` (the broker
would not take an outcome, app.core.admission.validator_batch); ``spec``, the section of the digest
it implements (openwop-a2ui.md, a2ui-v09.md) or "ours" for a rule of this host (most guard the
dead-letter path: bytes that never became an admission record, limits the spec leaves to the host);
``advice``, one line for the producer.

Pure: the standard library and app.core.admission.refusal only. Compiled with the admission core (it
is imported by compiled modules; scripts/compile_core.py). Building a refusal is the rare path:
nothing here runs when a record is admitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from app.core.admission.refusal import CODES, Violation

__all__ = [
    "ACTION_CONFINEMENT",
    "ACTION_SHAPE",
    "BRANCH",
    "CATALOG_EQUALITY",
    "CATALOG_VERSION",
    "CHILDREN_CYCLE",
    "CHILDREN_DEPTH",
    "COMMAND_GATEWAY",
    "COMPONENTS",
    "COMPONENT_BUTTON",
    "CONTEXT_PATH",
    "CORRELATION",
    "DATA_PATH",
    "DEPTH",
    "ENCODE",
    "ENVELOPE_SHAPE",
    "FLOOR",
    "FOLD",
    "FORK_SOURCE",
    "FORK_TARGET_FRESH",
    "HOST_COMMAND",
    "IDENTIFIER_SECRET",
    "INTERRUPT_PENDING",
    "KIND_CATALOG",
    "NUMBER_RANGE",
    "RECORD_BYTES",
    "RECORD_DUPLICATE_KEY",
    "RECORD_JSON",
    "RECORD_KEY",
    "RECORD_PARTITION",
    "RECORD_SHAPE",
    "RECORD_SIZE",
    "RECORD_UTF8",
    "RECORD_WRITE",
    "REDACTION_INVALID",
    "RULES",
    "RUN_EXISTS",
    "RUN_FRESH",
    "RUN_ID",
    "RUN_KEY",
    "RUN_LIVE",
    "STRICTNESS",
    "STRING_CHARS",
    "SURFACE_FINAL",
    "SURFACE_ID_EQUALITY",
    "SURFACE_LIVE",
    "SURFACE_UNCHANGED",
    "UNTRUSTED_BLOCKS_APPROVAL",
    "Rule",
    "refuse",
    "rule_of",
]


@dataclass(frozen=True, slots=True)
class Rule:
    """One registered rule (the module docstring says what each field means)."""

    id: str
    code: str
    step: str
    spec: str
    advice: str
    also: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for code in (self.code, *self.also):
            if code not in CODES:  # a programming error, caught when the module is imported
                raise ValueError(f"rule {self.id!r}: unregistered refusal code {code!r}")


_ALL: Final[list[Rule]] = []


def _rule(
    rule_id: str, code: str, step: str, spec: str, advice: str, also: tuple[str, ...] = ()
) -> Rule:
    rule = Rule(rule_id, code, step, spec, advice, also)
    if any(known.id == rule_id for known in _ALL):
        raise ValueError(f"rule {rule_id!r} is registered twice")
    _ALL.append(rule)
    return rule


# fmt: off
# --- intake: the record's bytes (app.core.admission.intake; the HTTP bodies the same way) ---------

RECORD_BYTES: Final = _rule(
    "record-bytes", "record_invalid", "intake", "ours",
    "publish an admission record as the value; a tombstone (no value) is not one",
)
RECORD_SIZE: Final = _rule(
    "record-size", "record_too_large", "intake", "ours",
    "keep the record under A2UI_STREAM_MAX_RECORD_BYTES: split the surface over envelopes",
)
RECORD_UTF8: Final = _rule(
    "record-utf8", "record_not_utf8", "intake", "ours",
    "encode the record as UTF-8 JSON",
)
RECORD_JSON: Final = _rule(
    "record-json", "record_not_json", "intake", "ours",
    "send exactly one JSON document per record, with nothing after it",
)
RECORD_DUPLICATE_KEY: Final = _rule(
    "record-duplicate-key", "record_not_json", "intake", "ours",
    "name each member of an object once: readers disagree on which duplicate wins",
)
NUMBER_RANGE: Final = _rule(
    "number-range", "record_limit_exceeded", "intake", "ours",
    "send integers within 64 bits (a larger number as a string)",
)
DEPTH: Final = _rule(
    "depth", "record_limit_exceeded", "intake, limits, encode", "ours",
    "nest at most A2UI_STREAM_MAX_DEPTH levels: flatten data-model values and action contexts",
)
RECORD_KEY: Final = _rule(
    "record-key", "record_key_mismatch", "intake", "ours",
    "publish each record with key = its runId (UTF-8)",
)

# --- the validator, around the decision (app.core.admission.validator ADMISSION) ------------------

RUN_ID: Final = _rule(
    "run-id", "validation_error", "run", "ours",
    "use a runId <tenant>/<id> (or one segment) of ASCII letters, digits and . _ ~ -",
)
RECORD_PARTITION: Final = _rule(
    "record-partition", "record_key_mismatch", "run", "ours",
    "publish with key = runId and the default partitioner, so a run stays on one partition",
)
RECORD_SHAPE: Final = _rule(
    "record-shape", "validation_error", "run", "ours",
    "send {runId, envelope} or {runId, command}, never both",
)
COMMAND_GATEWAY: Final = _rule(
    "command-gateway", "forbidden", "command", "ours",
    "issue host commands through the HTTP API; workers share one A2UI_STREAM_GATEWAY_KEY",
)
RUN_LIVE: Final = _rule(
    "run-live", "run_terminal", "envelope, command", "openwop-a2ui.md §5, §13",
    "a cancelled, completed or failed run takes nothing more: start a new run",
)
RECORD_WRITE: Final = _rule(
    "record-write", "record_unrecordable", "write", "ours",
    "the broker would not take the outcome (ours to fix): report it with the record",
)
ENCODE: Final = _rule(
    "encode", "record_unrecordable", "command", "ours",
    "a host command's events could not be encoded (ours to fix): report it",
)

# --- the decision (app.core.admission.decision_steps STEPS) ---------------------------------------

ENVELOPE_SHAPE: Final = _rule(
    "envelope-shape", "validation_error", "envelope-shape", "openwop-a2ui.md §2, §5",
    "send {runId, envelope} with an AI envelope as schemas/admission-record defines",
)
RUN_KEY: Final = _rule(
    "run-key", "record_key_mismatch", "envelope-shape", "ours",
    "key each admission record by its own runId",
)
KIND_CATALOG: Final = _rule(
    "kind-catalog", "unknown_envelope_kind", "kind-catalog", "openwop-a2ui.md §5 (1)",
    "emit a kind this host lists (ui.a2ui-surface) or a universal kind",
)
CORRELATION: Final = _rule(
    "correlation", "envelope_correlation_conflict", "correlation", "openwop-a2ui.md §2 (E2)",
    "use a fresh correlationId for an envelope of another type",
)
FLOOR: Final = _rule(
    "floor", "unknown_schema_version", "floor", "openwop-a2ui.md §5 (2)",
    "emit the schemaVersion the host advertises (its floor, A2UI_STREAM_FLOOR)",
)
STRICTNESS: Final = _rule(
    "strictness", "unknown_schema_version", "floor", "openwop-a2ui.md §5 (3)",
    "under strict, emit exactly the host's schemaVersion",
)
BRANCH: Final = _rule(
    "branch", "envelope_invalid", "branch", "openwop-a2ui.md §3, §4, §5 (4)",
    "make the payload match the one branch its schemaVersion selects (2: A2UI v0.9 profile)",
)
CATALOG_VERSION: Final = _rule(
    "catalog-version", "unknown_schema_version", "branch", "openwop-a2ui.md §3",
    "use a v1 catalogVersion this host supports (the message lists them)",
)
STRING_CHARS: Final = _rule(
    "string-chars", "record_limit_exceeded", "limits", "ours",
    "keep open strings under A2UI_STREAM_MAX_STRING_CHARS: send a reference, not the content",
)
COMPONENTS: Final = _rule(
    "components", "record_limit_exceeded", "limits", "ours",
    "send at most A2UI_STREAM_MAX_COMPONENTS components per envelope: split the surface",
)
CHILDREN_DEPTH: Final = _rule(
    "children-depth", "record_limit_exceeded", "limits", "ours",
    "keep children chains within A2UI_STREAM_MAX_CHILDREN_DEPTH: flatten the layout",
)
DATA_PATH: Final = _rule(
    "data-path", "envelope_invalid", "limits", "a2ui-v09.md §5 (updateDataModel)",
    'write updateDataModel paths as RFC 6901 pointers: "~" as "~0", "/" as "~1"',
)
IDENTIFIER_SECRET: Final = _rule(
    "identifier-secret", "envelope_invalid", "identifiers", "openwop-a2ui.md §14",
    "keep registered secrets out of identifiers: an id is recorded as sent, never redacted",
)
SURFACE_ID_EQUALITY: Final = _rule(
    "surface-id-equality", "envelope_invalid", "cross-field", "openwop-a2ui.md §4, §5 (5)",
    "address every message of an envelope to payload.surfaceId",
)
CATALOG_EQUALITY: Final = _rule(
    "catalog-equality", "envelope_invalid", "cross-field", "openwop-a2ui.md §4, §5 (5)",
    "give createSurface the payload's catalogId",
)
FOLD: Final = _rule(
    "fold", "envelope_invalid", "fold", "openwop-a2ui.md §6",
    "begin a surface with createSurface, create it once, and nothing after deleteSurface",
)
CHILDREN_CYCLE: Final = _rule(
    "children-cycle", "envelope_invalid", "limits, children", "ours",
    "make the children graph a tree, across the surface's envelopes too",
)
REDACTION_INVALID: Final = _rule(
    "redaction-invalid", "envelope_invalid", "redaction", "openwop-a2ui.md §14",
    "keep registered secrets out of text near its length limit (the marker must fit)",
)

# --- host commands (app.core.admission.host_commands COMMANDS), decided by the validator ----------

HOST_COMMAND: Final = _rule(
    "host-command", "validation_error", "command", "ours",
    "send a host command as schemas/host-command defines (the message names the member)",
)
RUN_FRESH: Final = _rule(
    "run-fresh", "run_state_conflict", "command", "ours",
    "create a run once: pick a new runId",
)
RUN_EXISTS: Final = _rule(
    "run-exists", "not_found", "command", "ours",
    "create the run before commanding it",
)
FORK_TARGET_FRESH: Final = _rule(
    "fork-target-fresh", "run_state_conflict", "command", "openwop-a2ui.md §9 (Fork)",
    "fork into a run that does not exist yet",
)
FORK_SOURCE: Final = _rule(
    "fork-source", "fork_point_invalid", "command", "openwop-a2ui.md §9 (Fork)",
    "fork at a sequence the source run recorded (details.lastSequence gives the range)",
)
INTERRUPT_PENDING: Final = _rule(
    "interrupt-pending", "not_found", "command", "openwop-a2ui.md §9 (Interrupt resolve)",
    "resolve a pending interrupt (404: none pending; 409: resolved concurrently, or run ended)",
    also=("interrupt_already_resolved",),
)
UNTRUSTED_BLOCKS_APPROVAL: Final = _rule(
    "untrusted-blocks-approval", "forbidden", "command, action", "openwop-a2ui.md §7",
    "an untrusted surface never drives an approval or action: emit a trusted surface",
)
ACTION_CONFINEMENT: Final = _rule(
    "action-confinement", "action_refused", "command, action", "openwop-a2ui.md §15",
    "name an action resume or exchange",
)
SURFACE_LIVE: Final = _rule(
    "surface-live", "not_found", "command, action", "openwop-a2ui.md §6",
    "act on a surface that exists and is not deleted",
)
SURFACE_FINAL: Final = _rule(
    "surface-final", "action_refused", "command, action", "openwop-a2ui.md §2 (E1), §6",
    "wait for the surface's final chunk before acting on it",
)
SURFACE_UNCHANGED: Final = _rule(
    "surface-unchanged", "run_state_conflict", "command", "ours",
    "the surface changed after the check: read it again and resubmit",
)

# --- actions checked against the materialized surface (app.core.http.actions, HTTP) ---------------

ACTION_SHAPE: Final = _rule(
    "action-shape", "validation_error", "action", "ours",
    "send {surfaceId, sourceComponentId, name, context}",
)
COMPONENT_BUTTON: Final = _rule(
    "component-button", "action_refused", "action", "openwop-a2ui.md §6 (Collected data)",
    "fire the action from a Button of the surface whose event name is the action's name",
)
CONTEXT_PATH: Final = _rule(
    "context-path", "action_refused", "action", "openwop-a2ui.md §6 (Collected data)",
    "submit exactly the Button's context, resolved against the surface's data model",
)

# fmt: on

# Every rule, by id, in the order above (the order of docs/admission.md's rule list).
RULES: Final[Mapping[str, Rule]] = MappingProxyType({rule.id: rule for rule in _ALL})


def rule_of(rule_id: str) -> Rule:
    """The registered rule ``rule_id`` (a KeyError for an unregistered one is a bug: every id
    on the wire came from this table)."""
    return RULES[rule_id]


def refuse(
    rule: Rule,
    path: str,
    message: str,
    details: Mapping[str, Any] | None = None,
    *,
    code: str | None = None,
) -> Violation:
    """The refusal ``rule`` makes at ``path`` (RFC 6901, into the admission record). ``code``
    picks one of the rule's ``also`` codes; left out, it is the rule's ``code``."""
    if code is None:
        code = rule.code
    elif code != rule.code and code not in rule.also:  # a programming error
        raise ValueError(f"rule {rule.id!r} does not refuse with {code!r}")
    return Violation(code, rule.id, path, message, {} if details is None else details)
