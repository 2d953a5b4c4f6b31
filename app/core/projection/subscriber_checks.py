"""The subscriber's re-validation of a surface before it is handed out (issue 5 §5; RFC 0114
"on ANY failure ... store-without-render"): v1 against the closed v1 catalog
(``PayloadRules.check_v1``), v2 against the profile's component definitions (the components
wrapped in synthetic ``createSurface`` + ``updateComponents`` messages,
``PayloadRules.check_v2``), plus the container shape of schemas/materialized-surface and the
frame's own identity and catalog fields. A refusal names its rule and an RFC 6901 pointer into
the surface (``SurfaceProblem``).

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from app.core.admission.refusal import Violation
from app.core.common.pointer import PointerError, join, parse

__all__ = [
    "SurfaceChecks",
    "SurfaceProblem",
    "surface_problem",
    "validate_surface",
    "revalidate",
]

_V2_VERSION = "v0.9"
_MAX_COMPONENTS_PER_MESSAGE = 512  # the profile's updateComponents maxItems
_MAX_MESSAGES = 64  # the profile's messages maxItems


class SurfaceChecks(Protocol):
    """What the subscriber needs from ``app.core.admission.payload_rules.PayloadRules``."""

    def check_v1(self, payload: Any) -> Violation | None:
        """The refusal of a version-1 surface payload, or None."""

    def check_v2(self, payload: Any) -> Violation | None:
        """The refusal of a version-2 surface payload, or None."""


def _v2_payloads(content: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The materialized v2 surface as synthetic profile payloads (createSurface + chunks of
    updateComponents), so ``check_v2`` runs the profile's own component definitions."""
    sid, catalog = content["surfaceId"], content["catalogId"]
    create: dict[str, Any] = {"surfaceId": sid, "catalogId": catalog}
    if content["theme"]:
        create["theme"] = content["theme"]
    messages: list[dict[str, Any]] = [{"version": _V2_VERSION, "createSurface": create}]
    components = list(content["components"].values())
    for start in range(0, len(components), _MAX_COMPONENTS_PER_MESSAGE):
        chunk = components[start : start + _MAX_COMPONENTS_PER_MESSAGE]
        messages.append(
            {"version": _V2_VERSION, "updateComponents": {"surfaceId": sid, "components": chunk}}
        )
    return [
        {
            "version": _V2_VERSION,
            "catalogId": catalog,
            "surfaceId": sid,
            "messages": messages[start : start + _MAX_MESSAGES],
        }
        for start in range(0, len(messages), _MAX_MESSAGES)
    ]


_SHAPE = "materialized-surface"  # the container shape (schemas/materialized-surface)
_IDENTITY = "frame-identity"  # the surface is the one the frame names, under its catalog
_PAYLOAD_PREFIX = ["envelope", "payload"]  # a Violation's path is into an admission record


class SurfaceProblem(NamedTuple):
    """Why a surface must not be rendered: the ``rule`` that refused it, an RFC 6901
    ``pointer`` into the surface, and the ``reason`` (the text a resync request carries)."""

    rule: str
    pointer: str
    reason: str


def _v2_shape(content: Any) -> tuple[str, str] | None:
    """``(pointer, message)`` when ``content`` is not the materialized-surface container."""
    if not isinstance(content, dict):
        return "", "a v2 surface is an object"
    expected = {"surfaceId", "catalogId", "theme", "components", "dataModel"}
    if set(content) != expected:
        return "", f"a v2 surface has exactly {sorted(expected)} (materialized-surface schema)"
    for name in ("surfaceId", "catalogId"):
        if not isinstance(content[name], str):
            return join("", name), "surfaceId and catalogId are strings"
    for name in ("theme", "components"):
        if not isinstance(content[name], dict):
            return join("", name), "theme and components are objects"
    for cid, component in content["components"].items():
        if not isinstance(component, dict) or component.get("id") != cid:
            return join(
                "", "components", cid
            ), f"component {cid[:80]!r} is not an object with that id"
    return None


def _rule(violation: Violation) -> str:
    """The rule a report names: the invariant the profile protects when it says, else the
    rule as admission names it (``branch``: the payload does not match its version's schema)."""
    invariant = violation.details.get("invariant")
    return invariant if isinstance(invariant, str) else violation.rule


def _tokens(path: str) -> list[str]:
    try:
        tokens = parse(path)
    except PointerError:
        return []
    return tokens[2:] if tokens[:2] == _PAYLOAD_PREFIX else []


def _v2_pointer(path: str, payload: int, ids: list[str]) -> str:
    """The pointer into the materialized v2 surface for a violation's ``path`` into synthetic
    payload number ``payload`` (message 0 is createSurface, then chunks of components)."""
    tokens = _tokens(path)
    if tokens[:1] in (["surfaceId"], ["catalogId"]):
        return join("", tokens[0])
    if len(tokens) < 2 or tokens[0] != "messages" or not tokens[1].isdigit():
        return ""
    message, inner = payload * _MAX_MESSAGES + int(tokens[1]), tokens[2:]
    if message == 0:
        return join("", *inner[1:]) if inner[:1] == ["createSurface"] else ""
    if len(inner) < 3 or inner[:2] != ["updateComponents", "components"]:
        return join("", "components")
    if not inner[2].isdigit():
        return join("", "components")
    index = (message - 1) * _MAX_COMPONENTS_PER_MESSAGE + int(inner[2])
    if index >= len(ids):
        return join("", "components")
    return join("", "components", ids[index], *inner[3:])


def surface_problem(
    version: int, content: Any, catalog: str, surface_id: str, rules: SurfaceChecks
) -> SurfaceProblem | None:
    """Why ``content`` must not be rendered (rule, pointer into it, reason), or ``None`` when it
    is a valid surface of its version (v1: the closed catalog; v2: the profile) under the
    frame's catalog and identity."""
    if version == 1:
        violation = rules.check_v1(content)
        if violation is not None:
            where = join("", *_tokens(violation.path))
            return SurfaceProblem(
                _rule(violation), where, f"v1 surface invalid: {violation.message}"
            )
        if content.get("catalogVersion") != catalog:
            return SurfaceProblem(
                _IDENTITY, "/catalogVersion", "catalogVersion differs from the frame's"
            )
        return None
    if version != 2:
        return SurfaceProblem(_IDENTITY, "", f"unknown surface version {version!r}")
    shape = _v2_shape(content)
    if shape is not None:
        return SurfaceProblem(_SHAPE, shape[0], f"v2 surface invalid: {shape[1]}")
    if content["surfaceId"] != surface_id or content["catalogId"] != catalog:
        where = "/surfaceId" if content["surfaceId"] != surface_id else "/catalogId"
        return SurfaceProblem(_IDENTITY, where, "surfaceId or catalogId differs from the frame's")
    ids = list(content["components"])
    for index, payload in enumerate(_v2_payloads(content)):
        violation = rules.check_v2(payload)
        if violation is not None:
            where = _v2_pointer(violation.path, index, ids)
            return SurfaceProblem(
                _rule(violation), where, f"v2 surface invalid: {violation.message}"
            )
    return None


def validate_surface(
    version: int, content: Any, catalog: str, surface_id: str, rules: SurfaceChecks
) -> str | None:
    """Why ``content`` must not be rendered, or ``None`` (``surface_problem``'s reason)."""
    problem = surface_problem(version, content, catalog, surface_id, rules)
    return None if problem is None else problem.reason


def revalidate(
    version: int, content: Any, catalog: str, surface_id: str, rules: SurfaceChecks
) -> SurfaceProblem | None:
    """``surface_problem`` for a surface about to be handed out, never raising: a content
    whose malformed shape makes a check raise is refused under the materialized-surface rule."""
    try:
        return surface_problem(version, content, catalog, surface_id, rules)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:  # a malformed shape
        return SurfaceProblem(_SHAPE, "", f"surface invalid: {type(exc).__name__}")
