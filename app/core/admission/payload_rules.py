"""Wire-shape rules: the admission record, the AI envelope and the two ``ui.a2ui-surface``
payload branches (openwop-a2ui.md §1-§4), checked against our own schema documents.

Pure: imports the standard library, ``jsonschema_rs``, ``app.core.common.pointer``,
``app.core.admission.refusal`` and ``app.core.admission.rules`` only. The schema documents come in
as arguments (``PayloadRules.from_documents``); nothing here reads a file.

Hot path: every check is one compiled ``jsonschema_rs`` validity test. Only an invalid value pays
for the Python diagnosis, which names the excluded affordance and the security invariant it
protects (RFC 0209 §B; openwop-a2ui.md §15) so a producer can act on the refusal. Every path is
an RFC 6901 JSON Pointer into the admission record. No JSON input makes a check raise: the
walks are iterative or bounded, and every failure is a ``Violation`` (STYLE rule 3).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import jsonschema_rs

from app.core.admission.refusal import Violation
from app.core.admission.rules import BRANCH, CATALOG_VERSION, ENVELOPE_SHAPE, refuse
from app.core.common.pointer import join

__all__ = [
    "EXCLUSIONS",
    "REQUIRED_DOCUMENTS",
    "Exclusion",
    "PayloadRules",
]

# ---------------------------------------------------------------------------------------------
# The rules as data (STYLE rule 1): every excluded affordance, the invariant it protects and why.
# openwop-a2ui.md §4 "Excluded by the profile" and §15; RFC 0209 §B.
# ---------------------------------------------------------------------------------------------

NO_CODE_EXEC: Final = "a2ui-surface-no-code-exec"
ACTION_CONFINEMENT: Final = "a2ui-action-confinement"
NO_NETWORK_EGRESS: Final = "a2ui-surface-no-network-egress"
NO_SECRET_INPUT: Final = "a2ui-surface-no-secret-input"


@dataclass(frozen=True, slots=True)
class Exclusion:
    """One affordance the profile refuses: the invariant it protects and the reason, in words."""

    invariant: str
    reason: str


EXCLUSIONS: Final[Mapping[str, Exclusion]] = {
    # Components that fetch from the network (RFC 0209 §B.3).
    "Image": Exclusion(NO_NETWORK_EGRESS, "it loads a remote URL"),
    "Video": Exclusion(NO_NETWORK_EGRESS, "it loads a remote URL"),
    "AudioPlayer": Exclusion(NO_NETWORK_EGRESS, "it loads a remote URL"),
    "Icon": Exclusion(NO_NETWORK_EGRESS, "deferred by the profile (named or svgPath icons)"),
    # Basic-catalog components outside the closed profile (RFC 0209 §B.2).
    "List": Exclusion(NO_CODE_EXEC, "not in the OpenWOP profile of the basic catalog"),
    "Tabs": Exclusion(NO_CODE_EXEC, "not in the OpenWOP profile of the basic catalog"),
    "Modal": Exclusion(NO_CODE_EXEC, "not in the OpenWOP profile of the basic catalog"),
    "Slider": Exclusion(NO_CODE_EXEC, "not in the OpenWOP profile of the basic catalog"),
    # Affordances inside otherwise admitted components and messages.
    "functionCall": Exclusion(ACTION_CONFINEMENT, "a client function is not resume/exchange"),
    "event-name": Exclusion(ACTION_CONFINEMENT, "an action reaches only resume or exchange"),
    "obscured": Exclusion(NO_SECRET_INPUT, "a surface must not solicit a secret"),
    "iconUrl": Exclusion(NO_NETWORK_EGRESS, "the renderer would fetch it"),
    "sendDataModel": Exclusion(ACTION_CONFINEMENT, "only event.context is ever submitted"),
    "template": Exclusion(NO_CODE_EXEC, "data-model templates generate components from data"),
    "function-value": Exclusion(NO_CODE_EXEC, "only checks[].condition may call `required`"),
    "nested-call": Exclusion(NO_CODE_EXEC, "`required` takes a binding, never a call"),
    "foreign-catalog": Exclusion(NO_CODE_EXEC, "only the pinned basic catalog renders"),
    "unknown-component": Exclusion(NO_CODE_EXEC, "the catalog is closed and fails closed"),
    "extra-property": Exclusion(NO_CODE_EXEC, "components and messages are closed objects"),
    "action-target": Exclusion(ACTION_CONFINEMENT, "an action reaches only resume or exchange"),
}

# Basic-catalog component names that are excluded outright (a subset of the keys above).
_EXCLUDED_COMPONENTS: Final = frozenset(
    {"Image", "Video", "AudioPlayer", "Icon", "List", "Tabs", "Modal", "Slider"}
)
_ALLOWED_EVENT_NAMES: Final = ("resume", "exchange")  # RFC 0209 §B.3; v1 action.target too
_V2_KINDS: Final = ("createSurface", "updateComponents", "updateDataModel", "deleteSurface")

REQUIRED_DOCUMENTS: Final = (
    "ai-envelope",
    "admission-record",
    "a2ui-surface-v1",
    "a2ui-surface-v2-profile",
)
_PAYLOAD: Final = "/envelope/payload"
_MAX_DEPTH: Final = 64  # bound for the FunctionCall scan (the profile's values are shallow)
_MAX_NODES: Final = 100_000
_MAX_ECHO: Final = 80  # characters of a producer's value echoed back in a message


# ---------------------------------------------------------------------------------------------
# Small pure helpers
# ---------------------------------------------------------------------------------------------


def _echo(value: Any) -> str:
    """A short, quoted rendering of a producer's value for a message."""
    text = value if isinstance(value, str) else type(value).__name__
    if len(text) > _MAX_ECHO:
        text = text[:_MAX_ECHO] + "..."
    return '"' + text.replace('"', '\\"') + '"'


def _a(name: str) -> str:
    return ("an " if name[:1] in "AEIOU" else "a ") + name


def _type_name(value: Any) -> str:
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


def _kind_of(name: Any) -> str:
    """How a component discriminator reads in a message."""
    if isinstance(name, str):
        return _echo(name)
    return "untyped (no string `component`)"


def _truncate(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _compile(document: Mapping[str, Any], registry: Any = None) -> Any:
    return jsonschema_rs.Draft202012Validator(
        dict(document), validate_formats=True, registry=registry
    )


def _def_validators(document: Mapping[str, Any]) -> dict[str, Any]:
    """A compiled validator for each ``$defs`` entry, for dispatching the diagnosis."""
    defs = document.get("$defs", {})
    return {name: _compile({"$ref": f"#/$defs/{name}", "$defs": defs}) for name in defs}


def _component_names(document: Mapping[str, Any]) -> dict[str, str]:
    """``component`` discriminator value -> ``$defs`` name, read from the document's anyOf."""
    defs = document["$defs"]
    names: dict[str, str] = {}
    for branch in defs["component"]["anyOf"]:
        def_name = branch["$ref"].rsplit("/", 1)[-1]
        names[defs[def_name]["properties"]["component"]["const"]] = def_name
    return names


def _first_error(validator: Any, instance: Any) -> Any | None:
    try:
        for error in validator.iter_errors(instance):
            return error
    except ValueError:
        # jsonschema_rs reports "Recursion limit reached" past ~255 levels (is_valid does
        # not). Intake refuses such records first (record_limit_exceeded, depth); a caller of
        # ``decide`` without intake gets the generic refusal instead of an exception.
        return None
    return None


def _describe(error: Any, base: str, relative: bool = False) -> tuple[str, str]:
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
# The public API
# ---------------------------------------------------------------------------------------------


class PayloadRules:
    """Compiled wire-shape rules. Build once with ``from_documents``; every check returns
    ``None`` (valid) or the first ``Violation``."""

    __slots__ = (
        "_record",
        "_envelope",
        "_v1",
        "_v2",
        "_v1_defs",
        "_v2_defs",
        "_v1_components",
        "_v2_components",
        "_catalog_id",
        "_catalog_versions",
    )

    def __init__(self, documents: Mapping[str, Mapping[str, Any]]) -> None:
        envelope_doc = documents["ai-envelope"]
        registry = jsonschema_rs.Registry([(envelope_doc["$id"], dict(envelope_doc))])
        self._record = _compile(documents["admission-record"], registry)
        self._envelope = _compile(envelope_doc)
        self._v1 = _compile(documents["a2ui-surface-v1"])
        self._v2 = _compile(documents["a2ui-surface-v2-profile"])
        self._v1_defs = _def_validators(documents["a2ui-surface-v1"])
        self._v2_defs = _def_validators(documents["a2ui-surface-v2-profile"])
        self._v1_components = _component_names(documents["a2ui-surface-v1"])
        self._v2_components = _component_names(documents["a2ui-surface-v2-profile"])
        self._catalog_id: str = documents["a2ui-surface-v2-profile"]["$defs"]["catalogId"]["const"]
        versions = documents["a2ui-surface-v1"]["properties"]["catalogVersion"]["enum"]
        self._catalog_versions: tuple[str, ...] = tuple(versions)

    @classmethod
    def from_documents(cls, documents: Mapping[str, Mapping[str, Any]]) -> PayloadRules:
        """Compile the rules from schema documents keyed by file stem (``schemas/<stem>.schema.
        json``). Raises ``ValueError`` if a required document is missing (an operator error)."""
        missing = [name for name in REQUIRED_DOCUMENTS if name not in documents]
        if missing:
            raise ValueError(f"schema documents missing: {', '.join(missing)}")
        return cls(documents)

    # -- shape ---------------------------------------------------------------------------------

    def check_record(self, record: Any) -> Violation | None:
        """The admission record ``{runId, envelope}`` and the envelope's shape (openwop-a2ui.md
        §2, §13) => ``validation_error`` / ``envelope-shape``."""
        if self._record.is_valid(record):
            return None
        if not isinstance(record, dict):
            return _shape(
                "",
                f"an admission record is an object {{runId, envelope}}, not {_type_name(record)}",
            )
        return _shape_from(self._record, record, "")

    def check_envelope(self, envelope: Any) -> Violation | None:
        """The AI envelope's shape only; paths start at ``/envelope``."""
        if self._envelope.is_valid(envelope):
            return None
        if not isinstance(envelope, dict):
            return _shape("/envelope", f"an AI envelope is an object, not {_type_name(envelope)}")
        return _shape_from(self._envelope, envelope, "/envelope")

    # -- v1 branch (RFC 0102) ------------------------------------------------------------------

    def check_v1(self, payload: Any) -> Violation | None:
        """The version-1 payload branch (openwop-a2ui.md §3). An unknown ``catalogVersion`` =>
        ``unknown_schema_version``; any other failure => ``envelope_invalid``."""
        if self._v1.is_valid(payload):
            return None
        return self._diagnose_v1(payload)

    # -- v2 branch (RFC 0209 profile) ----------------------------------------------------------

    def check_v2(self, payload: Any) -> Violation | None:
        """The version-2 profile branch (openwop-a2ui.md §4) => ``envelope_invalid``."""
        if self._v2.is_valid(payload):
            return None
        return self._diagnose_v2(payload)

    # -- v1 diagnosis --------------------------------------------------------------------------

    def _diagnose_v1(self, payload: Any) -> Violation:
        if not isinstance(payload, dict):
            return _branch(
                _PAYLOAD,
                f"a v1 payload is an object {{catalogVersion, surface}}, not {_type_name(payload)}",
            )
        if _looks_v2(payload):
            return _branch(
                _PAYLOAD,
                "this is a v2 payload (version/catalogId/messages) but "
                "schemaVersion selects the v1 branch",
                expected="v1",
                found="v2",
            )
        if "patch" in payload or "surfaceRef" in payload:  # RFC 0114 §16c item 10
            return _branch(
                _PAYLOAD,
                "this is an RFC 0114 delta frame {surfaceRef, "
                "catalogVersion, patch}, not a full v1 payload {catalogVersion, "
                "surface}",
                expected="v1",
                found="delta-frame",
            )
        version = payload.get("catalogVersion")
        if isinstance(version, str) and version not in self._catalog_versions:
            # ai-envelope.md §"A2UI surfaces": the enum IS the supported set; refuse, never guess.
            return refuse(
                CATALOG_VERSION,
                _PAYLOAD + "/catalogVersion",
                f"catalogVersion {_echo(version)} is not supported "
                f"(supported: {', '.join(self._catalog_versions)})",
                {
                    "rule": CATALOG_VERSION.id,
                    "catalogVersion": version[:_MAX_ECHO],
                    "supported": list(self._catalog_versions),
                },
            )
        surface = payload.get("surface")
        components = surface.get("components") if isinstance(surface, dict) else None
        if isinstance(components, list) and not self._v1_defs["surface"].is_valid(surface):
            for index, component in enumerate(components):
                if not self._v1_defs["component"].is_valid(component):
                    return self._diagnose_v1_component(component, index)
        return _branch_from(self._v1, payload)

    def _diagnose_v1_component(self, component: Any, index: int) -> Violation:
        path = f"{_PAYLOAD}/surface/components/{index}"
        if not isinstance(component, dict):
            return _branch(path, f"component {index} is {_type_name(component)}, not an object")
        name = component.get("component")
        if not isinstance(name, str) or name not in self._v1_components:
            return _excluded(
                path,
                "unknown-component",
                index,
                f"component {index} is {_kind_of(name)}: not in the closed catalog "
                f"{'/'.join(self._catalog_versions)}",
            )
        cid = component.get("id")
        label = f"{name} {_echo(cid)}" if isinstance(cid, str) else f"{name} {index}"
        action = component.get("action")
        if name == "action.button" and isinstance(action, dict):
            extra = [key for key in action if key != "target"]
            if extra:  # a URL or endpoint beside the target breaks confinement (rule 2)
                return _excluded(
                    join(path, "action", extra[0]),
                    "action-target",
                    index,
                    f"{label} action has {_echo(extra[0])}: only a target is allowed",
                )
            target = action.get("target")
            if target not in _ALLOWED_EVENT_NAMES:
                return _excluded(
                    join(path, "action", "target"),
                    "action-target",
                    index,
                    f"{label} action target {_echo(target)} is not resume or exchange",
                )
        return _component_error(
            self._v1_defs[self._v1_components[name]], component, path, label, index
        )

    # -- v2 diagnosis --------------------------------------------------------------------------

    def _diagnose_v2(self, payload: Any) -> Violation:
        if not isinstance(payload, dict):
            return _branch(
                _PAYLOAD,
                "a v2 payload is an object {version, catalogId, surfaceId, "
                f"messages}}, not {_type_name(payload)}",
            )
        if _looks_v1(payload):
            return _branch(
                _PAYLOAD,
                "this is a v1 payload (catalogVersion/surface), not the v2 payload "
                "{version, catalogId, surfaceId, messages} it is checked as",
                expected="v2",
                found="v1",
            )
        catalog = payload.get("catalogId")
        if "catalogId" in payload and catalog != self._catalog_id:
            return self._foreign_catalog(_PAYLOAD + "/catalogId", catalog)
        messages = payload.get("messages")
        if isinstance(messages, list) and len(messages) <= 64:
            for index, message in enumerate(messages):
                if not self._v2_defs["message"].is_valid(message):
                    return self._diagnose_message(message, f"{_PAYLOAD}/messages/{index}", index)
        return _branch_from(self._v2, payload)

    def _foreign_catalog(self, path: str, catalog: Any) -> Violation:
        return _excluded(
            path,
            "foreign-catalog",
            None,
            f"catalogId {_echo(catalog)} is not the pinned basic catalog {self._catalog_id}",
        )

    def _diagnose_message(self, message: Any, path: str, index: int) -> Violation:
        if not isinstance(message, dict):
            return _branch(path, f"message {index} is {_type_name(message)}, not an object")
        kinds = [key for key in message if key in _V2_KINDS]
        extra = [key for key in message if key != "version" and key not in _V2_KINDS]
        if extra:
            return _excluded(
                join(path, extra[0]),
                "extra-property",
                None,
                f"message {index} has property {_echo(extra[0])}: a message is "
                f"{{version}} plus one of {', '.join(_V2_KINDS)}",
            )
        if len(kinds) != 1:
            found = ", ".join(kinds) or "none"
            return _branch(
                path,
                f"message {index} must carry exactly one of "
                f"{', '.join(_V2_KINDS)} (found: {found})",
            )
        kind = kinds[0]
        body = message[kind]
        body_path = join(path, kind)
        if kind == "createSurface" and isinstance(body, dict):
            found_violation = self._diagnose_create(body, body_path)
            if found_violation is not None:
                return found_violation
        if kind == "updateComponents" and isinstance(body, dict):
            found_violation = self._diagnose_components(body.get("components"), body_path)
            if found_violation is not None:
                return found_violation
        return _branch_from(self._v2_defs[kind], message, path)

    def _diagnose_create(self, body: dict[str, Any], path: str) -> Violation | None:
        theme = body.get("theme")
        if isinstance(theme, dict) and "iconUrl" in theme:
            return _excluded(
                join(path, "theme", "iconUrl"),
                "iconUrl",
                None,
                "createSurface theme.iconUrl: excluded",
            )
        if "sendDataModel" in body:
            return _excluded(
                join(path, "sendDataModel"),
                "sendDataModel",
                None,
                "createSurface sendDataModel: excluded",
            )
        if "catalogId" in body and body["catalogId"] != self._catalog_id:
            return self._foreign_catalog(join(path, "catalogId"), body["catalogId"])
        return None

    def _diagnose_components(self, components: Any, path: str) -> Violation | None:
        if not isinstance(components, list) or len(components) > 512:
            return None  # the generic message names the type or maxItems
        for index, component in enumerate(components):
            if not self._v2_defs["component"].is_valid(component):
                return self._diagnose_component(component, join(path, "components", index), index)
        return None

    def _diagnose_component(self, component: Any, path: str, index: int) -> Violation:
        if not isinstance(component, dict):
            return _branch(path, f"component {index} is {_type_name(component)}, not an object")
        name = component.get("component")
        cid = component.get("id")
        ident: str | int = cid if isinstance(cid, str) else index
        who = f"component {_echo(cid)}" if isinstance(cid, str) else f"component {index}"
        if isinstance(name, str) and name in _EXCLUDED_COMPONENTS:
            return _excluded(path, name, ident, f"{who} is {_a(name)}: excluded")
        if not isinstance(name, str) or name not in self._v2_components:
            return _excluded(
                path,
                "unknown-component",
                ident,
                f"{who} is {_kind_of(name)}: not in the closed catalog",
            )
        label = f"{name} {_echo(cid) if isinstance(cid, str) else index}"
        found = _affordance(component, name, label, who)
        if found is not None:
            affordance, tokens, message = found
            return _excluded(join(path, *tokens), affordance, ident, message)
        return _component_error(
            self._v2_defs[self._v2_components[name]], component, path, f"{who} {name}", ident
        )


# ---------------------------------------------------------------------------------------------
# Affordance detectors: each returns (affordance, path tokens, message) for the first exclusion.
# ---------------------------------------------------------------------------------------------

_Found = tuple[str, tuple[str | int, ...], str]


def _affordance(component: dict[str, Any], name: str, label: str, who: str) -> _Found | None:
    action = component.get("action")
    if name == "Button" and isinstance(action, dict):
        if "functionCall" in action:  # RFC 0209 §B.3: openUrl and every client function
            call = action["functionCall"]
            call_name = call.get("call") if isinstance(call, dict) else call
            return (
                "functionCall",
                ("action", "functionCall"),
                f"{who} Button action uses functionCall {_echo(call_name)}: excluded",
            )
        event = action.get("event")
        event_name = event.get("name", "resume") if isinstance(event, dict) else "resume"
        if event_name not in _ALLOWED_EVENT_NAMES:
            return (
                "event-name",
                ("action", "event", "name"),
                f"{label} event name {_echo(event_name)} is not resume or exchange",
            )
    if name == "TextField" and component.get("variant") == "obscured":
        return ("obscured", ("variant",), f'{label} variant "obscured": excluded')
    if name in ("Row", "Column") and isinstance(component.get("children"), dict):
        return (
            "template",
            ("children",),
            f"{label} children is a data-model template {{componentId, path}}: excluded",
        )
    return _function_value(component, label)


def _function_value(component: dict[str, Any], label: str) -> _Found | None:
    """The first FunctionCall-shaped value (an object with ``call``, or with ``functionCall``)
    anywhere in the component, array items at any depth included (web_core evaluates them:
    docs/admission.md decision 11), except the one the profile admits: ``checks[i].condition``
    calling ``required`` over a binding."""
    for tokens, node in _walk(component):
        if not isinstance(node, dict):
            continue
        if "call" in node:
            call = node["call"]
        elif "functionCall" in node:
            wrapped = node["functionCall"]
            call = wrapped.get("call") if isinstance(wrapped, dict) else wrapped
            return (
                "function-value",
                tokens,
                f"{label} {'/'.join(str(t) for t in tokens)} is a functionCall "
                f"{_echo(call)}: excluded",
            )
        else:
            continue
        where = "/".join(str(t) for t in tokens)
        if _is_condition(tokens):
            if call != "required":
                return (
                    "function-value",
                    tokens,
                    f'{label} check condition calls {_echo(call)}: only "required" is admitted',
                )
            continue
        if len(tokens) > 3 and _is_condition(tokens[:3]):
            return (
                "nested-call",
                tokens,
                f"{label} check {tokens[1]} nests a call {_echo(call)} inside required: excluded",
            )
        return (
            "function-value",
            tokens,
            f"{label} {where} is a FunctionCall {_echo(call)}: excluded",
        )
    return None


def _is_condition(tokens: tuple[str | int, ...]) -> bool:
    return len(tokens) == 3 and tokens[0] == "checks" and tokens[2] == "condition"


def _walk(root: Any) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """Pre-order (path, value) pairs, iterative and bounded in depth and size."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), root)]
    seen = 0
    while stack and seen < _MAX_NODES:
        tokens, node = stack.pop()
        seen += 1
        yield tokens, node
        if len(tokens) >= _MAX_DEPTH:
            continue
        if isinstance(node, dict):
            stack.extend(((*tokens, k), v) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend(((*tokens, i), v) for i, v in reversed(list(enumerate(node))))


def _looks_v1(payload: dict[str, Any]) -> bool:
    return ("catalogVersion" in payload or "surface" in payload) and not (
        "messages" in payload or "version" in payload
    )


def _looks_v2(payload: dict[str, Any]) -> bool:
    return ("messages" in payload or "version" in payload or "catalogId" in payload) and not (
        "catalogVersion" in payload or "surface" in payload
    )


# ---------------------------------------------------------------------------------------------
# Violation builders
# ---------------------------------------------------------------------------------------------


def _shape(path: str, message: str) -> Violation:
    return refuse(ENVELOPE_SHAPE, path, message, {"rule": ENVELOPE_SHAPE.id})


def _shape_from(validator: Any, instance: Any, base: str) -> Violation:
    error = _first_error(validator, instance)
    if error is None:  # is_valid and iter_errors disagree: report the whole value
        return _shape(base, "the record does not match its schema")
    path, message = _describe(error, base)
    return _shape(path, message)


def _branch(path: str, message: str, **details: Any) -> Violation:
    return refuse(BRANCH, path, message, {"rule": BRANCH.id, **details})


def _branch_from(validator: Any, instance: Any, base: str = _PAYLOAD) -> Violation:
    error = _first_error(validator, instance)
    if error is None:
        return _branch(base, "the payload does not match the branch schema")
    path, message = _describe(error, base)
    return _branch(path, message)


def _excluded(
    path: str, affordance: str, component_id: str | int | None, message: str
) -> Violation:
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


def _component_error(
    validator: Any, component: dict[str, Any], path: str, label: str, ident: str | int
) -> Violation:
    error = _first_error(validator, component)
    if error is None:
        return _branch(path, f"{label} does not match the profile", componentId=ident)
    if isinstance(error.kind, jsonschema_rs.ValidationErrorKind.AdditionalProperties):
        name = str(error.kind.unexpected[0])
        return _excluded(
            join(path, *error.instance_path, name),
            "extra-property",
            ident,
            f"{label} has property {_echo(name)}: not in the profile",
        )
    sub_path, message = _describe(error, path, relative=True)
    return _branch(sub_path, f"{label}: {message}", componentId=ident)
