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
- patches are applied by the strict applier (``app.core.projection.patch_apply.apply_patch``): a bad
  path, a missing node, ``test`` or a malformed op fails;
- on any failure the last good surface is kept but marked ``stale`` (not renderable, no
  actions), later deltas for it are refused until a full frame arrives, and ``ResyncNeeded``
  says why. An unvalidated surface is never returned;
- trust is monotone per surface (RFC 0143, RFC 0209 §C.12): once a frame said ``untrusted``,
  the held surface stays untrusted whatever a later frame says;
- the status (version, catalog, trust, partial, deleted, actionsEnabled) comes from full frames
  only. A delta carries none of it (app.core.projection.frames sends a full frame whenever it
  changes): the patched surface keeps its base's status, and a delta that names any status member,
  or applies to a deleted surface, is refused, so a delta can neither set nor drop
  ``untrusted``;
- the periodic digest check (every ``fullEvery``-th delta carries ``digest``, the
  ``app.core.projection.frames_wire.surface_digest`` of the surface after the patch): the result's
  digest must be that one, else the surface has drifted from the projector's (an application mutated
  what it was handed, or a differing applier) although every sequence matched: it is not delivered,
  it goes stale and a resync brings one full frame (``"digest mismatch: drift"``).

Loop-proof resyncs (issue 14 item 2; docs/projection.md "When a surface stays invalid"): no
request/answer pair repeats without a state change; the rules are
``app.core.projection.subscriber_resync``'s. The surface's re-validation is
``app.core.projection.subscriber_checks``; the view and the outcomes are
``app.core.projection.subscriber_view``.

May import: the standard library, orjson and app.core.* (pure).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

import orjson

from app.core.projection.frames_wire import DIGEST_PATTERN, surface_digest
from app.core.projection.patch_apply import PatchError, apply_patch
from app.core.projection.subscriber_checks import SurfaceChecks, SurfaceProblem, revalidate
from app.core.projection.subscriber_resync import FrameFailure, deliver, refuse
from app.core.projection.subscriber_view import (
    Delivered,
    HeldSurface,
    Received,
    ResyncNeeded,
    SubscriberView,
)
from app.core.projection.surfaces import V1_SURFACE_ID

__all__ = [
    "receive",
    "DRIFT",
]

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


def _frame_problem(frame: Mapping[str, Any]) -> str | None:  # noqa: C901 - the frame schema's checks in order, one return per rule
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
    if (
        extra
    ):  # a status change is a full frame (app.core.projection.frames): never taken from a delta
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


def _sequence_of(frame: Mapping[str, Any]) -> int | None:
    sequence = frame.get("sequence")
    return sequence if isinstance(sequence, int) and not isinstance(sequence, bool) else None


# --- the step ------------------------------------------------------------------------------------


class _Candidate(NamedTuple):
    """The surface a usable frame would deliver, before its re-validation."""

    version: int
    catalog: str
    content: Any
    trust: str
    partial: bool
    deleted: bool
    actions: bool


def receive(
    view: SubscriberView,
    frame: bytes | Mapping[str, Any],
    rules: SurfaceChecks,
    now: float | None = None,
) -> tuple[SubscriberView, Received]:
    """Apply one frame at ``now`` (the caller's clock, for the resync backoff; ``None``: no
    backoff). Never raises on any input; never returns an unvalidated surface."""
    decoded = _decode(frame)
    if not isinstance(decoded, dict):
        return view, ResyncNeeded(None, None, "frame is not a JSON object")
    problem = _frame_problem(decoded)
    if problem is not None:
        return _malformed(view, decoded, problem, now)
    key = (str(decoded.get("runId")), str(decoded.get("surfaceId")))  # checked by _frame_problem
    run_id, surface_id = key
    held = view.get(run_id, surface_id)
    sequence, kind = decoded["sequence"], decoded["kind"]
    marked = kind == "full" and decoded.get("resync") is True

    def fail(reason: str, invalid: SurfaceProblem | None = None) -> tuple[SubscriberView, Received]:
        return refuse(view, key, FrameFailure(kind, sequence, reason, invalid, marked), now)

    found = _from_full(decoded, held) if kind == "full" else _from_delta(decoded, held)
    if isinstance(found, str):
        return fail(found)
    invalid = revalidate(found.version, found.content, found.catalog, surface_id, rules)
    if invalid is not None:
        return fail(invalid.reason, invalid)
    if "digest" in decoded and kind == "delta" and decoded["digest"] != _digest(found.content):
        return fail(DRIFT)  # what it holds is not the projector's surface: one full frame
    new = HeldSurface(
        run_id,
        surface_id,
        found.version,
        decoded["surfaceRef"],
        sequence,
        found.catalog,
        found.content,
        found.trust,
        found.partial,
        found.deleted,
        found.actions,
    )
    return deliver(view, key, new), Delivered(new, kind)


def _malformed(
    view: SubscriberView, decoded: Mapping[str, Any], problem: str, now: float | None
) -> tuple[SubscriberView, Received]:
    """A frame that is not a frame of the schema: refused for the surface it names, if any."""
    run_id, surface_id = decoded.get("runId"), decoded.get("surfaceId")
    if isinstance(run_id, str) and isinstance(surface_id, str):
        failure = FrameFailure(None, _sequence_of(decoded), problem)
        return refuse(view, (run_id, surface_id), failure, now)
    return view, ResyncNeeded(None, None, problem)


def _from_full(decoded: Mapping[str, Any], held: HeldSurface | None) -> _Candidate:
    """The surface a full frame brings: its own status, except that trust is monotone."""
    version = decoded["version"]
    catalog = decoded["catalogVersion" if version == 1 else "catalogId"]
    trust = "untrusted" if decoded["trust"] == "untrusted" else "trusted"
    if held is not None and held.trust == "untrusted":
        trust = "untrusted"  # monotone: no frame launders a tainted surface
    partial, deleted = decoded["partial"], decoded["deleted"]
    actions = decoded["actionsEnabled"] and trust == "trusted" and not partial and not deleted
    return _Candidate(version, catalog, decoded["surface"], trust, partial, deleted, actions)


def _from_delta(decoded: Mapping[str, Any], held: HeldSurface | None) -> _Candidate | str:
    """The surface a delta brings (its base patched, with the base's status), or why none."""
    if held is None:
        return "delta without a base: no surface held"
    if held.stale:
        return "delta on a stale surface: awaiting a full frame"
    if held.deleted:
        return "delta on a deleted surface: a re-create comes as a full frame"
    if decoded["baseSequence"] != held.sequence:
        return (
            f"sequence gap: holds sequence {held.sequence}, the delta is based on "
            f"{decoded['baseSequence']}"
        )
    # the base's version, catalog and status, exactly (a change of any is a full frame)
    version, catalog = held.version, held.catalog
    # RFC 0114: a v1 frame's catalogVersion MUST equal its base's; a v2 delta carries none
    if decoded.get("catalogVersion") != (catalog if version == 1 else None):
        return "a delta cannot change the catalog (RFC 0114)"
    try:
        content = apply_patch(held.content, decoded["patch"])
    except (PatchError, RecursionError) as exc:
        return f"patch does not apply: {str(exc)[:300]}"
    status = (held.trust, held.partial, held.deleted, held.actions_enabled)
    return _Candidate(version, catalog, content, *status)
