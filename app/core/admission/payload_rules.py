"""Wire-shape rules: the admission record, the AI envelope and the two ``ui.a2ui-surface``
payload branches (openwop-a2ui.md §1-§4), checked against our own schema documents.

Pure: imports the standard library, ``jsonschema_rs``, ``app.core.common.pointer``,
``app.core.admission.refusal``, ``app.core.admission.rules`` and the payload rules' own parts
only. The schema documents come in as arguments (``PayloadRules.from_documents``); nothing here
reads a file.

Hot path: every check is one compiled ``jsonschema_rs`` validity test. Only an invalid value pays
for the Python diagnosis, which names the excluded affordance and the security invariant it
protects (RFC 0209 §B; openwop-a2ui.md §15) so a producer can act on the refusal. Every path is
an RFC 6901 JSON Pointer into the admission record. No JSON input makes a check raise: the
walks are iterative or bounded, and every failure is a ``Violation`` (STYLE rule 3).

This module compiles the documents and diagnoses a refused v1 or v2 payload down to the part
at fault. Its parts, by what they hold: payload_rules_exclusions (the table of excluded
affordances, their invariants and reasons), payload_rules_affordances (the detectors of an
excluded affordance inside an admitted component), payload_rules_violations (the refusals and
their messages, from a jsonschema_rs error or an exclusion).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import jsonschema_rs

from app.core.admission.payload_rules_affordances import find_affordance
from app.core.admission.payload_rules_exclusions import ALLOWED_EVENT_NAMES, EXCLUDED_COMPONENTS
from app.core.admission.payload_rules_violations import (
    MAX_ECHO,
    PAYLOAD_PATH,
    branch_violation,
    branch_violation_from,
    component_kind,
    component_violation,
    excluded_violation,
    json_type,
    quoted,
    shape_violation,
    shape_violation_from,
    with_article,
)
from app.core.admission.refusal import Violation
from app.core.admission.rules import CATALOG_VERSION, refuse
from app.core.common.pointer import join

__all__ = [
    "REQUIRED_DOCUMENTS",
    "PayloadRules",
]

_V2_KINDS: Final = ("createSurface", "updateComponents", "updateDataModel", "deleteSurface")

REQUIRED_DOCUMENTS: Final = (
    "ai-envelope",
    "admission-record",
    "a2ui-surface-v1",
    "a2ui-surface-v2-profile",
)


# ---------------------------------------------------------------------------------------------
# Compiling the documents
# ---------------------------------------------------------------------------------------------


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
            return shape_violation(
                "",
                f"an admission record is an object {{runId, envelope}}, not {json_type(record)}",
            )
        return shape_violation_from(self._record, record, "")

    def check_envelope(self, envelope: Any) -> Violation | None:
        """The AI envelope's shape only; paths start at ``/envelope``."""
        if self._envelope.is_valid(envelope):
            return None
        if not isinstance(envelope, dict):
            return shape_violation(
                "/envelope", f"an AI envelope is an object, not {json_type(envelope)}"
            )
        return shape_violation_from(self._envelope, envelope, "/envelope")

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
            return branch_violation(
                PAYLOAD_PATH,
                f"a v1 payload is an object {{catalogVersion, surface}}, not {json_type(payload)}",
            )
        if _looks_v2(payload):
            return branch_violation(
                PAYLOAD_PATH,
                "this is a v2 payload (version/catalogId/messages) but "
                "schemaVersion selects the v1 branch",
                expected="v1",
                found="v2",
            )
        if "patch" in payload or "surfaceRef" in payload:  # RFC 0114 §16c item 10
            return branch_violation(
                PAYLOAD_PATH,
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
                PAYLOAD_PATH + "/catalogVersion",
                f"catalogVersion {quoted(version)} is not supported "
                f"(supported: {', '.join(self._catalog_versions)})",
                {
                    "rule": CATALOG_VERSION.id,
                    "catalogVersion": version[:MAX_ECHO],
                    "supported": list(self._catalog_versions),
                },
            )
        surface = payload.get("surface")
        components = surface.get("components") if isinstance(surface, dict) else None
        if isinstance(components, list) and not self._v1_defs["surface"].is_valid(surface):
            for index, component in enumerate(components):
                if not self._v1_defs["component"].is_valid(component):
                    return self._diagnose_v1_component(component, index)
        return branch_violation_from(self._v1, payload)

    def _diagnose_v1_component(self, component: Any, index: int) -> Violation:
        path = f"{PAYLOAD_PATH}/surface/components/{index}"
        if not isinstance(component, dict):
            return branch_violation(
                path, f"component {index} is {json_type(component)}, not an object"
            )
        name = component.get("component")
        if not isinstance(name, str) or name not in self._v1_components:
            return excluded_violation(
                path,
                "unknown-component",
                index,
                f"component {index} is {component_kind(name)}: not in the closed catalog "
                f"{'/'.join(self._catalog_versions)}",
            )
        cid = component.get("id")
        label = f"{name} {quoted(cid)}" if isinstance(cid, str) else f"{name} {index}"
        action = component.get("action")
        if name == "action.button" and isinstance(action, dict):
            extra = [key for key in action if key != "target"]
            if extra:  # a URL or endpoint beside the target breaks confinement (rule 2)
                return excluded_violation(
                    join(path, "action", extra[0]),
                    "action-target",
                    index,
                    f"{label} action has {quoted(extra[0])}: only a target is allowed",
                )
            target = action.get("target")
            if target not in ALLOWED_EVENT_NAMES:
                return excluded_violation(
                    join(path, "action", "target"),
                    "action-target",
                    index,
                    f"{label} action target {quoted(target)} is not resume or exchange",
                )
        return component_violation(
            self._v1_defs[self._v1_components[name]], component, path, label, index
        )

    # -- v2 diagnosis --------------------------------------------------------------------------

    def _diagnose_v2(self, payload: Any) -> Violation:
        if not isinstance(payload, dict):
            return branch_violation(
                PAYLOAD_PATH,
                "a v2 payload is an object {version, catalogId, surfaceId, "
                f"messages}}, not {json_type(payload)}",
            )
        if _looks_v1(payload):
            return branch_violation(
                PAYLOAD_PATH,
                "this is a v1 payload (catalogVersion/surface), not the v2 payload "
                "{version, catalogId, surfaceId, messages} it is checked as",
                expected="v2",
                found="v1",
            )
        catalog = payload.get("catalogId")
        if "catalogId" in payload and catalog != self._catalog_id:
            return self._foreign_catalog(PAYLOAD_PATH + "/catalogId", catalog)
        messages = payload.get("messages")
        if isinstance(messages, list) and len(messages) <= 64:
            for index, message in enumerate(messages):
                if not self._v2_defs["message"].is_valid(message):
                    return self._diagnose_message(
                        message, f"{PAYLOAD_PATH}/messages/{index}", index
                    )
        return branch_violation_from(self._v2, payload)

    def _foreign_catalog(self, path: str, catalog: Any) -> Violation:
        return excluded_violation(
            path,
            "foreign-catalog",
            None,
            f"catalogId {quoted(catalog)} is not the pinned basic catalog {self._catalog_id}",
        )

    def _diagnose_message(self, message: Any, path: str, index: int) -> Violation:
        if not isinstance(message, dict):
            return branch_violation(path, f"message {index} is {json_type(message)}, not an object")
        kinds = [key for key in message if key in _V2_KINDS]
        extra = [key for key in message if key != "version" and key not in _V2_KINDS]
        if extra:
            return excluded_violation(
                join(path, extra[0]),
                "extra-property",
                None,
                f"message {index} has property {quoted(extra[0])}: a message is "
                f"{{version}} plus one of {', '.join(_V2_KINDS)}",
            )
        if len(kinds) != 1:
            found = ", ".join(kinds) or "none"
            return branch_violation(
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
        return branch_violation_from(self._v2_defs[kind], message, path)

    def _diagnose_create(self, body: dict[str, Any], path: str) -> Violation | None:
        theme = body.get("theme")
        if isinstance(theme, dict) and "iconUrl" in theme:
            return excluded_violation(
                join(path, "theme", "iconUrl"),
                "iconUrl",
                None,
                "createSurface theme.iconUrl: excluded",
            )
        if "sendDataModel" in body:
            return excluded_violation(
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
            return branch_violation(
                path, f"component {index} is {json_type(component)}, not an object"
            )
        name = component.get("component")
        cid = component.get("id")
        ident: str | int = cid if isinstance(cid, str) else index
        who = f"component {quoted(cid)}" if isinstance(cid, str) else f"component {index}"
        if isinstance(name, str) and name in EXCLUDED_COMPONENTS:
            return excluded_violation(path, name, ident, f"{who} is {with_article(name)}: excluded")
        if not isinstance(name, str) or name not in self._v2_components:
            return excluded_violation(
                path,
                "unknown-component",
                ident,
                f"{who} is {component_kind(name)}: not in the closed catalog",
            )
        label = f"{name} {quoted(cid) if isinstance(cid, str) else index}"
        found = find_affordance(component, name, label, who)
        if found is not None:
            affordance, tokens, message = found
            return excluded_violation(join(path, *tokens), affordance, ident, message)
        return component_violation(
            self._v2_defs[self._v2_components[name]], component, path, f"{who} {name}", ident
        )


def _looks_v1(payload: dict[str, Any]) -> bool:
    return ("catalogVersion" in payload or "surface" in payload) and not (
        "messages" in payload or "version" in payload
    )


def _looks_v2(payload: dict[str, Any]) -> bool:
    return ("messages" in payload or "version" in payload or "catalogId" in payload) and not (
        "catalogVersion" in payload or "surface" in payload
    )
