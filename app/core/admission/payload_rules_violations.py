"""The payload rules' refusals: the ``Violation`` each wire-shape check returns, with a message
a producer can act on, built from the first jsonschema_rs error or from an excluded affordance.

Role: pure builders for app.core.admission.payload_rules and payload_rules_affordances. A shape
refusal is ``envelope-shape``, a branch refusal ``branch``; an excluded affordance names
itself, its invariant and its reason (app.core.admission.payload_rules_exclusions). Every path is
an RFC 6901 JSON Pointer into the admission record; no error value makes a builder raise.

May import: the standard library, ``jsonschema_rs``, ``app.core.common.pointer`` and
app.core.admission.decision (refusal, rules, payload_rules_exclusions).
"""

from __future__ import annotations

from typing import Any, Final

import jsonschema_rs

from app.core.admission.payload_rules_exclusions import EXCLUSIONS
from app.core.admission.refusal import Violation
from app.core.admission.rules import BRANCH, ENVELOPE_SHAPE, refuse
from app.core.common.pointer import join

__all__ = [
    "MAX_ECHO",
    "PAYLOAD_PATH",
    "branch_violation",
    "branch_violation_from",
    "component_kind",
    "component_violation",
    "describe_error",
    "excluded_violation",
    "first_error",
    "json_type",
    "quoted",
    "shape_violation",
    "shape_violation_from",
    "with_article",
]

PAYLOAD_PATH: Final = "/envelope/payload"
MAX_ECHO: Final = 80  # characters of a producer's value echoed back in a message


# ---------------------------------------------------------------------------------------------
# How a producer's value reads in a message
# ---------------------------------------------------------------------------------------------


def quoted(value: Any) -> str:
    """A short, quoted rendering of a producer's value for a message."""
    text = value if isinstance(value, str) else type(value).__name__
    if len(text) > MAX_ECHO:
        text = text[:MAX_ECHO] + "..."
    return '"' + text.replace('"', '\\"') + '"'


def with_article(name: str) -> str:
    """The name with its indefinite article (``an Image``, ``a Slider``)."""
    return ("an " if name[:1] in "AEIOU" else "a ") + name


def json_type(value: Any) -> str:
    """The JSON type of a value, as a message reads it (bool before int: bool is an int)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return "a string" if isinstance(value, str) else type(value).__name__


def component_kind(name: Any) -> str:
    """How a component discriminator reads in a message."""
    if isinstance(name, str):
        return quoted(name)
    return "untyped (no string `component`)"


def _truncate(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


# ---------------------------------------------------------------------------------------------
# The first jsonschema_rs error, described
# ---------------------------------------------------------------------------------------------


def first_error(validator: Any, instance: Any) -> Any | None:
    """The first jsonschema_rs error of ``instance``, or None (also when it cannot say)."""
    try:
        for error in validator.iter_errors(instance):
            return error
    except ValueError:
        # jsonschema_rs reports "Recursion limit reached" past ~255 levels (is_valid does
        # not). Intake refuses such records first (record_limit_exceeded, depth); a caller of
        # ``decide`` without intake gets the generic refusal instead of an exception.
        return None
    return None


def describe_error(error: Any, base: str, relative: bool = False) -> tuple[str, str]:
    """(path, message) for one jsonschema_rs error, with the offending property in the path.
    The message names the full path, or the path inside ``base`` when ``relative``."""
    tokens: list[str | int] = list(error.instance_path)
    kind = error.kind
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.Required):
        missing = kind.property
        return join(base, *tokens, missing), f'required property "{missing}" is missing'
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.AdditionalProperties):
        name = str(kind.unexpected[0])
        return join(base, *tokens, name), f'property "{name}" is not allowed (closed object)'
    path = join(base, *tokens)
    where = (join("", *tokens) if relative else path) or "/"
    return path, _truncate(f"{where}: {error.message}")


# ---------------------------------------------------------------------------------------------
# Violation builders
# ---------------------------------------------------------------------------------------------


def shape_violation(path: str, message: str) -> Violation:
    """An ``envelope-shape`` refusal (the record or the envelope is not its schema's shape)."""
    return refuse(ENVELOPE_SHAPE, path, message, {"rule": ENVELOPE_SHAPE.id})


def shape_violation_from(validator: Any, instance: Any, base: str) -> Violation:
    """The ``envelope-shape`` refusal of the first schema error under ``base``."""
    error = first_error(validator, instance)
    if error is None:  # is_valid and iter_errors disagree: report the whole value
        return shape_violation(base, "the record does not match its schema")
    path, message = describe_error(error, base)
    return shape_violation(path, message)


def branch_violation(path: str, message: str, **details: Any) -> Violation:
    """An ``branch`` refusal (the payload does not match its branch), with ``details``."""
    return refuse(BRANCH, path, message, {"rule": BRANCH.id, **details})


def branch_violation_from(validator: Any, instance: Any, base: str = PAYLOAD_PATH) -> Violation:
    """The ``branch`` refusal of the first schema error under ``base``."""
    error = first_error(validator, instance)
    if error is None:
        return branch_violation(base, "the payload does not match the branch schema")
    path, message = describe_error(error, base)
    return branch_violation(path, message)


def excluded_violation(
    path: str, affordance: str, component_id: str | int | None, message: str
) -> Violation:
    """The ``branch`` refusal of an excluded affordance: its name, the invariant it
    protects and the reason (``EXCLUSIONS``), and the component it is in."""
    exclusion = EXCLUSIONS[affordance]
    details: dict[str, Any] = {
        "rule": BRANCH.id,
        "affordance": affordance,
        "invariant": exclusion.invariant,
        "reason": exclusion.reason,
    }
    if component_id is not None:
        details["componentId"] = component_id
    return refuse(BRANCH, path, f"{message} ({exclusion.invariant})", details)


def component_violation(
    validator: Any, component: dict[str, Any], path: str, label: str, ident: str | int
) -> Violation:
    """The refusal of one component against its profile definition: an extra property is the
    ``extra-property`` exclusion, any other first error a branch refusal naming the component."""
    error = first_error(validator, component)
    if error is None:
        return branch_violation(path, f"{label} does not match the profile", componentId=ident)
    if isinstance(error.kind, jsonschema_rs.ValidationErrorKind.AdditionalProperties):
        name = str(error.kind.unexpected[0])
        return excluded_violation(
            join(path, *error.instance_path, name),
            "extra-property",
            ident,
            f"{label} has property {quoted(name)}: not in the profile",
        )
    sub_path, message = describe_error(error, path, relative=True)
    return branch_violation(sub_path, f"{label}: {message}", componentId=ident)
