"""The pure half of the subscriber client (issue 5 §5): apply frames, re-validate, fail closed.

``receive(view, frame, rules) -> (view, Delivered | ResyncNeeded)`` takes one frame (bytes from
the subscriber topic, or an already-decoded dict) and the ``SubscriberView`` of the surfaces held
so far. The shell (the CLI's ``subscribe``, or a user's service) consumes the topic, calls this,
hands ``Delivered.surface`` to the application and publishes a resync request
(``ResyncNeeded.request(subscriber_id)``, schemas/resync-request) for the other outcome.

Fail-closed rules (RFC 0114 "on ANY failure ... store-without-render"; openwop-a2ui.md §10):
- a full frame's surface and every post-patch surface are RE-VALIDATED before anything is handed
  out: v1 against the closed v1 catalog (``PayloadRules.check_v1``), v2 against the profile's
  component definitions (the components wrapped in synthetic ``createSurface`` +
  ``updateComponents`` messages, ``PayloadRules.check_v2``), plus the container shape of
  schemas/materialized-surface and the frame's own identity and catalog fields;
- a delta applies only to exactly the surface it names as its base (``baseSequence``, unique
  in the run's gap-free log): anything else is a sequence gap;
- patches are applied by the strict applier (``app.core.patch.apply_patch``): a bad path, a
  missing node, ``test`` or a malformed op fails;
- on any failure the last good surface is kept but marked ``stale`` (not renderable, no
  actions), later deltas for it are refused until a full frame arrives, and ``ResyncNeeded``
  says why. An unvalidated surface is never returned;
- trust is monotone per surface (RFC 0143, RFC 0209 §C.12): once a frame said ``untrusted``,
  the held surface stays untrusted whatever a later frame says;
- the status (version, catalog, trust, partial, deleted, actionsEnabled) comes from full frames
  only. A delta carries none of it (app.core.frames sends a full frame whenever it changes):
  the patched surface keeps its base's status, and a delta that names any status member, or
  applies to a deleted surface, is refused, so a delta can neither set nor drop
  ``untrusted``;
- the periodic digest check (every ``fullEvery``-th delta carries ``digest``, the
  ``app.core.frames.surface_digest`` of the surface after the patch): the result's digest must
  be that one, else the surface has drifted from the projector's (an application mutated what
  it was handed, or a differing applier) although every sequence matched: it is not delivered,
  it goes stale and a resync brings one full frame (``"digest mismatch: drift"``).

May import: the standard library, orjson and app.core.* (pure).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

import orjson

from app.core.frames import DIGEST_PATTERN, surface_digest
from app.core.patch import PatchError, apply_patch
from app.core.pmap import PMap
from app.core.refusal import Violation
from app.core.surfaces import V1_SURFACE_ID

__all__ = [
    "Rules",
    "HeldSurface",
    "SubscriberView",
    "Delivered",
    "ResyncNeeded",
    "receive",
    "validate_surface",
    "DRIFT",
]

_EMPTY: PMap[Any, Any] = PMap()
_V2_VERSION = "v0.9"
_MAX_COMPONENTS_PER_MESSAGE = 512  # the profile's updateComponents maxItems
_MAX_MESSAGES = 64  # the profile's messages maxItems


class Rules(Protocol):
    """What the subscriber needs from ``app.core.payload_rules.PayloadRules``."""

    def check_v1(self, payload: Any) -> Violation | None: ...

    def check_v2(self, payload: Any) -> Violation | None: ...


class HeldSurface(NamedTuple):
    """A surface as this subscriber holds it: validated content plus the frame's status."""

    run_id: str
    surface_id: str
    version: int
    surface_ref: str
    sequence: int
    catalog: str
    content: Any
    trust: str
    partial: bool
    deleted: bool
    actions_enabled: bool
    stale: bool = False  # a later frame failed: keep for store-without-render, never render

    @property
    def renderable(self) -> bool:
        """Render only a fresh, live surface; v2 needs ``root`` (§6 render-needs-root)."""
        if self.stale or self.deleted:
            return False
        return self.version == 1 or "root" in self.content["components"]


class SubscriberView(NamedTuple):
    """Every surface this subscriber holds, by ``(runId, surfaceId)``."""

    surfaces: PMap[tuple[str, str], HeldSurface] = _EMPTY

    def get(self, run_id: str, surface_id: str) -> HeldSurface | None:
        found: HeldSurface | None = self.surfaces.get((run_id, surface_id))
        return found


class Delivered(NamedTuple):
    """A validated surface for the application (``kind``: the frame that produced it)."""

    surface: HeldSurface
    kind: str


class ResyncNeeded(NamedTuple):
    """The frame could not be used; ask the projector for a full frame. ``run_id`` and
    ``surface_id`` are ``None`` when the frame did not even say which surface it was for."""

    run_id: str | None
    surface_id: str | None
    reason: str
    sequence: int | None = None

    def request(self, subscriber_id: str) -> dict[str, Any] | None:
        """The resync-request record (schemas/resync-request), or ``None`` without a surface."""
        if not self.run_id or not self.surface_id:
            return None
        return {
            "subscriberId": subscriber_id,
            "runId": self.run_id,
            "surfaceId": self.surface_id,
            "reason": self.reason[:1024],
            "sequence": self.sequence,
        }


Outcome = Delivered | ResyncNeeded


# --- validation ----------------------------------------------------------------------------------


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


def _v2_shape(content: Any) -> str | None:
    if not isinstance(content, dict):
        return "a v2 surface is an object"
    expected = {"surfaceId", "catalogId", "theme", "components", "dataModel"}
    if set(content) != expected:
        return f"a v2 surface has exactly {sorted(expected)} (materialized-surface schema)"
    if not isinstance(content["surfaceId"], str) or not isinstance(content["catalogId"], str):
        return "surfaceId and catalogId are strings"
    if not isinstance(content["theme"], dict) or not isinstance(content["components"], dict):
        return "theme and components are objects"
    for cid, component in content["components"].items():
        if not isinstance(component, dict) or component.get("id") != cid:
            return f"component {cid[:80]!r} is not an object with that id"
    return None


def validate_surface(
    version: int, content: Any, catalog: str, surface_id: str, rules: Rules
) -> str | None:
    """Why ``content`` must not be rendered, or ``None`` when it is a valid surface of its
    version (v1: the closed catalog; v2: the profile) under the frame's catalog/identity."""
    if version == 1:
        violation = rules.check_v1(content)
        if violation is not None:
            return f"v1 surface invalid: {violation.message}"
        if content.get("catalogVersion") != catalog:
            return "catalogVersion differs from the frame's"
        return None
    if version != 2:
        return f"unknown surface version {version!r}"
    problem = _v2_shape(content)
    if problem is not None:
        return f"v2 surface invalid: {problem}"
    if content["surfaceId"] != surface_id or content["catalogId"] != catalog:
        return "surfaceId or catalogId differs from the frame's"
    for payload in _v2_payloads(content):
        violation = rules.check_v2(payload)
        if violation is not None:
            return f"v2 surface invalid: {violation.message}"
    return None


# --- frames --------------------------------------------------------------------------------------

_COMMON = (("runId", str), ("surfaceId", str), ("surfaceRef", str), ("sequence", int))
_FULL = (
    ("version", int),
    ("trust", str),
    ("partial", bool),
    ("actionsEnabled", bool),
    ("deleted", bool),
)
# A delta's members, closed (schemas/projection-frame): a delta naming any status member
# (trust, partial, actionsEnabled, deleted, renderable, version, catalogId) is refused.
_DELTA_MEMBERS = frozenset(
    {"kind", "runId", "surfaceId", "surfaceRef", "catalogVersion", "baseSequence", "sequence"}
    | {"patch", "digest"}
)
_DIGEST = re.compile(DIGEST_PATTERN)  # used with fullmatch: no trailing newline either
DRIFT = "digest mismatch: drift"


def _decode(frame: bytes | Mapping[str, Any]) -> Any:
    if isinstance(frame, bytes | bytearray | memoryview):
        try:
            return orjson.loads(frame)
        except orjson.JSONDecodeError:
            return None
    return frame


def _frame_problem(frame: Mapping[str, Any]) -> str | None:
    kind = frame.get("kind")
    if kind not in ("full", "delta"):
        return f"unknown frame kind {str(kind)[:40]!r}"
    for name, typ in _COMMON + _FULL if kind == "full" else _COMMON:
        value = frame.get(name)
        if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
            return f"frame field {name!r} is missing or not {typ.__name__}"
    if kind == "full":
        if frame["trust"] not in ("trusted", "untrusted"):
            return "frame trust is neither trusted nor untrusted"
        if (frame["version"] == 1) != (frame["surfaceId"] == V1_SURFACE_ID):
            return f"version 1 is exactly the surface {V1_SURFACE_ID!r}"
        field = "catalogVersion" if frame["version"] == 1 else "catalogId"
        if not isinstance(frame.get(field), str):
            return f"frame field {field!r} is missing"
        return None if "surface" in frame else "a full frame carries the surface"
    extra = set(frame) - _DELTA_MEMBERS
    if extra:  # a status change is a full frame (app.core.frames): never taken from a delta
        return f"a delta frame carries no {sorted(extra)[0][:40]!r} (status comes in full frames)"
    if "catalogVersion" in frame and not isinstance(frame["catalogVersion"], str):
        return "frame field 'catalogVersion' is not str"
    if "digest" in frame:
        digest = frame["digest"]
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            return f"frame field 'digest' does not match {DIGEST_PATTERN}"
    base = frame.get("baseSequence")
    if not isinstance(base, int) or isinstance(base, bool):
        return "a delta frame names its base (baseSequence)"
    patch = frame.get("patch")
    if not isinstance(patch, list) or not patch:
        return "a delta frame carries a non-empty patch"
    for op in patch:  # RFC 0114 frame schema: closed ops, never test
        if not isinstance(op, dict) or not set(op) <= {"op", "path", "from", "value"}:
            return "a patch operation has members outside op/path/from/value"
    return None


def _digest(content: Any) -> str | None:
    try:
        return surface_digest(content)
    except (TypeError, RecursionError):  # not JSON (orjson.JSONEncodeError is a TypeError)
        return None


def _stale(view: SubscriberView, held: HeldSurface | None) -> SubscriberView:
    if held is None or held.stale:
        return view
    key = (held.run_id, held.surface_id)
    return SubscriberView(view.surfaces.set(key, held._replace(stale=True)))


def receive(
    view: SubscriberView, frame: bytes | Mapping[str, Any], rules: Rules
) -> tuple[SubscriberView, Outcome]:
    """Apply one frame. Never raises on any input; never returns an unvalidated surface."""
    decoded = _decode(frame)
    if not isinstance(decoded, dict):
        return view, ResyncNeeded(None, None, "frame is not a JSON object")
    run_id, surface_id = decoded.get("runId"), decoded.get("surfaceId")
    problem = _frame_problem(decoded)
    if problem is not None:
        if isinstance(run_id, str) and isinstance(surface_id, str):
            held = view.get(run_id, surface_id)
            return _stale(view, held), ResyncNeeded(run_id, surface_id, problem)
        return view, ResyncNeeded(None, None, problem)
    run_id, surface_id = str(run_id), str(surface_id)  # checked by _frame_problem
    held = view.get(run_id, surface_id)
    sequence = decoded["sequence"]

    def fail(reason: str) -> tuple[SubscriberView, Outcome]:
        return _stale(view, held), ResyncNeeded(run_id, surface_id, reason, sequence)

    if decoded["kind"] == "full":
        version, content = decoded["version"], decoded["surface"]
        catalog = decoded["catalogVersion" if version == 1 else "catalogId"]
        trust = "untrusted" if decoded["trust"] == "untrusted" else "trusted"
        if held is not None and held.trust == "untrusted":
            trust = "untrusted"  # monotone: no frame launders a tainted surface
        partial, deleted = decoded["partial"], decoded["deleted"]
        actions = decoded["actionsEnabled"] and trust == "trusted" and not partial and not deleted
    else:
        if held is None:
            return fail("delta without a base: no surface held")
        if held.stale:
            return fail("delta on a stale surface: awaiting a full frame")
        if held.deleted:
            return fail("delta on a deleted surface: a re-create comes as a full frame")
        if decoded["baseSequence"] != held.sequence:
            return fail(
                f"sequence gap: holds sequence {held.sequence}, the delta is based on "
                f"{decoded['baseSequence']}"
            )
        # the base's version, catalog and status, exactly (a change of any is a full frame)
        version, catalog, trust = held.version, held.catalog, held.trust
        partial, deleted, actions = held.partial, held.deleted, held.actions_enabled
        # RFC 0114: a v1 frame's catalogVersion MUST equal its base's; a v2 delta carries none
        if decoded.get("catalogVersion") != (catalog if version == 1 else None):
            return fail("a delta cannot change the catalog (RFC 0114)")
        try:
            content = apply_patch(held.content, decoded["patch"])
        except (PatchError, RecursionError) as exc:
            return fail(f"patch does not apply: {str(exc)[:300]}")
    try:
        invalid = validate_surface(version, content, catalog, surface_id, rules)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:  # a malformed shape
        invalid = f"surface invalid: {type(exc).__name__}"
    if invalid is not None:
        return fail(invalid)
    if "digest" in decoded and decoded["kind"] == "delta" and decoded["digest"] != _digest(content):
        return fail(DRIFT)  # what it holds is not the projector's surface: one full frame
    new = HeldSurface(
        run_id,
        surface_id,
        version,
        decoded["surfaceRef"],
        sequence,
        catalog,
        content,
        trust,
        partial,
        deleted,
        actions,
    )
    surfaces = view.surfaces.set((run_id, surface_id), new)
    return SubscriberView(surfaces), Delivered(new, decoded["kind"])
