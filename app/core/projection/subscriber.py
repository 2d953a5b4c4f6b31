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
  digest must be that one, else the surface has drifted from the projector's (an application
  mutated what it was handed, or a differing applier) although every sequence matched: it is not
  delivered, it goes stale and a resync brings one full frame (``"digest mismatch: drift"``).

Loop-proof resyncs (issue 14 item 2; docs/projection.md "When a surface stays invalid"): a
resync is a request/answer pair, and no pair may repeat without a state change, whatever the
log holds. ``SubscriberView.troubles`` keeps, per surface that failed since its last delivery,
the table the decision below reads (``Trouble``); the outcomes are values and the caller's
clock comes in as ``now`` (seconds, any monotonic clock):
- a surface that fails re-validation is reported ONCE per state (``InvalidSurface``: which
  surface, the rule, a JSON Pointer into the surface, the sequence), on the outcome's
  ``report``; a later failure of the same or an older sequence reports nothing;
- a full frame is the projector's authoritative surface at its sequence. When one fails
  re-validation and it answers a resync (the projector marks answers ``resync: true``) or this
  subscriber already asked since the surface was last delivered, asking again would bring the
  same frame: the surface is held ``invalid at sequence N`` (``HeldInvalid``) and no request
  is sent until a frame of a LATER sequence arrives (a change resumes normal handling). Only
  the first failing full frame of a surface, unmarked and unasked, asks once;
- every other failure asks (``ResyncNeeded``), but a repeated request for the same surface
  waits for an exponential backoff (``backoff_delay``: 1 s, 2 s, 4 s, ... capped at 60 s, reset
  by a delivery): until then the outcome is ``ResyncDeferred`` and the request waits in the
  view, where ``due_resyncs(view, now)`` hands it out when it is due (the shell calls it as its
  loop turns; ``next_resync_at`` says when). Without ``now`` (a caller with no clock) nothing
  is deferred: each failure asks at once, and the invalid hold above still applies;
- the other surfaces of the run are untouched by all of this: they keep being delivered.

May import: the standard library, orjson and app.core.* (pure).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

import orjson

from app.core.admission.refusal import Violation
from app.core.common.pointer import PointerError, join, parse
from app.core.projection.frames_wire import DIGEST_PATTERN, surface_digest
from app.core.projection.patch_apply import PatchError, apply_patch
from app.core.projection.surfaces import V1_SURFACE_ID
from app.core.runlog.pmap import PMap

__all__ = [
    "SurfaceChecks",
    "HeldSurface",
    "SubscriberView",
    "Trouble",
    "Delivered",
    "ResyncNeeded",
    "ResyncDeferred",
    "HeldInvalid",
    "InvalidSurface",
    "SurfaceProblem",
    "Received",
    "receive",
    "due_resyncs",
    "next_resync_at",
    "backoff_delay",
    "surface_problem",
    "validate_surface",
    "DRIFT",
    "RESYNC_BACKOFF_BASE",
    "RESYNC_BACKOFF_CAP",
]

_EMPTY: PMap[Any, Any] = PMap()
_V2_VERSION = "v0.9"
_MAX_COMPONENTS_PER_MESSAGE = 512  # the profile's updateComponents maxItems
_MAX_MESSAGES = 64  # the profile's messages maxItems
RESYNC_BACKOFF_BASE = 1.0  # seconds before a second resync request for the same surface
RESYNC_BACKOFF_CAP = 60.0  # the longest wait between two requests for one surface


class SurfaceChecks(Protocol):
    """What the subscriber needs from ``app.core.admission.payload_rules.PayloadRules``."""

    def check_v1(self, payload: Any) -> Violation | None:
        """The refusal of a version-1 surface payload, or None."""

    def check_v2(self, payload: Any) -> Violation | None:
        """The refusal of a version-2 surface payload, or None."""


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


class InvalidSurface(NamedTuple):
    """A report: the surface ``(run_id, surface_id)`` at ``sequence`` failed re-validation.
    ``rule`` names the rule (the profile's, as admission names it, or the invariant it
    protects); ``pointer`` is an RFC 6901 pointer into the surface (the full frame's
    ``surface``; ``""`` is the whole of it); ``frame`` is the kind that brought it."""

    run_id: str
    surface_id: str
    sequence: int | None
    frame: str  # "full" | "delta"
    rule: str
    pointer: str
    message: str

    def describe(self) -> str:
        """One line for a person: which surface, which rule at which pointer, which sequence."""
        where = self.pointer or "(the whole surface)"
        return (
            f"surface {self.run_id}/{self.surface_id} is invalid at sequence {self.sequence} "
            f"({self.frame} frame): rule {self.rule} at {where}: {self.message}"
        )


class ResyncNeeded(NamedTuple):
    """The frame could not be used: publish ``request(subscriber_id)`` NOW (the backoff allows
    it). ``run_id`` and ``surface_id`` are ``None`` when the frame did not even say which
    surface it was for. ``report`` is set the first time this state failed re-validation."""

    run_id: str | None
    surface_id: str | None
    reason: str
    sequence: int | None = None
    report: InvalidSurface | None = None

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


class ResyncDeferred(NamedTuple):
    """The frame could not be used and a resync is needed, but this surface asked recently:
    the request waits in the view until ``retry_at`` (``due_resyncs`` hands it out then, unless
    a delivery makes it unnecessary). Send nothing now."""

    run_id: str
    surface_id: str
    reason: str
    sequence: int | None
    retry_at: float
    report: InvalidSurface | None = None


class HeldInvalid(NamedTuple):
    """The projector's own full frame of this surface at ``sequence`` fails re-validation (or
    a frame of that state or an older one failed again): the surface is held invalid at
    ``sequence``, never rendered, and NOTHING is sent until a frame of a later sequence comes."""

    run_id: str
    surface_id: str
    sequence: int
    reason: str
    report: InvalidSurface | None = None


class Trouble(NamedTuple):
    """One surface's resync state since it was last delivered (``SubscriberView.troubles``)."""

    requests: int = 0  # resync requests sent for it since its last delivery
    next_at: float = 0.0  # the earliest time (the caller's clock) of the next request
    pending: ResyncNeeded | None = None  # a request the backoff holds back
    invalid_at: int | None = None  # its full frame at this sequence failed: ask no more
    reported: int | None = None  # the latest sequence reported (once per state)


_NO_TROUBLE = Trouble()
_EMPTY_TROUBLES: PMap[tuple[str, str], Trouble] = PMap()


class SubscriberView(NamedTuple):
    """Every surface this subscriber holds, by ``(runId, surfaceId)``, and the resync state of
    those that failed since their last delivery (``Trouble``; empty when all is well)."""

    surfaces: PMap[tuple[str, str], HeldSurface] = _EMPTY
    troubles: PMap[tuple[str, str], Trouble] = _EMPTY_TROUBLES

    def get(self, run_id: str, surface_id: str) -> HeldSurface | None:
        """The surface held for ``(run_id, surface_id)``, or None."""
        found: HeldSurface | None = self.surfaces.get((run_id, surface_id))
        return found

    def trouble(self, run_id: str, surface_id: str) -> Trouble | None:
        """Why the surface ``(run_id, surface_id)`` is not delivered, or None."""
        found: Trouble | None = self.troubles.get((run_id, surface_id))
        return found


class Delivered(NamedTuple):
    """A validated surface for the application (``kind``: the frame that produced it)."""

    surface: HeldSurface
    kind: str


Received = Delivered | ResyncNeeded | ResyncDeferred | HeldInvalid


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


def _stale(view: SubscriberView, held: HeldSurface | None) -> SubscriberView:
    if held is None or held.stale:
        return view
    key = (held.run_id, held.surface_id)
    return view._replace(surfaces=view.surfaces.set(key, held._replace(stale=True)))


# --- the resync decision -------------------------------------------------------------------------


def backoff_delay(requests: int) -> float:
    """Seconds to wait after the ``requests``-th resync request for one surface before the
    next: ``RESYNC_BACKOFF_BASE * 2 ** (requests - 1)``, at most ``RESYNC_BACKOFF_CAP``."""
    if requests < 1:
        return 0.0
    return float(min(RESYNC_BACKOFF_BASE * 2 ** min(requests - 1, 32), RESYNC_BACKOFF_CAP))


class _Failure(NamedTuple):
    kind: str | None  # "full", "delta", or None: not even a frame of a known shape
    sequence: int | None
    reason: str
    problem: SurfaceProblem | None = None  # set when the surface failed re-validation
    marked: bool = False  # the frame says it answers a resync request


def _with(view: SubscriberView, key: tuple[str, str], trouble: Trouble) -> SubscriberView:
    return view._replace(troubles=view.troubles.set(key, trouble))


def _asked(trouble: Trouble, now: float | None) -> Trouble:
    """``trouble`` after one more request was sent at ``now``."""
    requests = trouble.requests + 1
    next_at = 0.0 if now is None else now + backoff_delay(requests)
    return trouble._replace(requests=requests, next_at=next_at, pending=None)


def _refuse(
    view: SubscriberView, key: tuple[str, str], failure: _Failure, now: float | None
) -> tuple[SubscriberView, Received]:
    """The outcome of a frame that could not be used (module docstring, "Loop-proof")."""
    run_id, surface_id = key
    view = _stale(view, view.surfaces.get(key))
    trouble: Trouble = view.troubles.get(key, _NO_TROUBLE)
    sequence, floor = failure.sequence, trouble.invalid_at
    if floor is not None and (sequence is None or sequence <= floor):
        # the state held invalid, or an older one (a re-delivery): nothing new to say or ask
        return view, HeldInvalid(run_id, surface_id, floor, failure.reason)
    report = None
    problem = failure.problem
    if problem is not None and sequence is not None:
        if trouble.reported is None or sequence > trouble.reported:  # once per state
            kind = failure.kind or "full"
            report = InvalidSurface(
                run_id, surface_id, sequence, kind, problem.rule, problem.pointer, problem.reason
            )
            trouble = trouble._replace(reported=sequence)
        if failure.kind == "full" and (failure.marked or trouble.requests > 0):
            # the projector's own surface at this sequence, asked for (or as good as): asking
            # again brings the same frame, so hold it invalid until a later sequence comes
            held_invalid = trouble._replace(invalid_at=sequence, pending=None)
            outcome = HeldInvalid(run_id, surface_id, sequence, failure.reason, report)
            return _with(view, key, held_invalid), outcome
    need = ResyncNeeded(run_id, surface_id, failure.reason, sequence, report)
    if now is None or trouble.requests == 0 or now >= trouble.next_at:
        return _with(view, key, _asked(trouble, now)), need
    waiting = trouble._replace(pending=need._replace(report=None))  # the latest reason wins
    deferred = ResyncDeferred(run_id, surface_id, failure.reason, sequence, trouble.next_at, report)
    return _with(view, key, waiting), deferred


def due_resyncs(
    view: SubscriberView, now: float
) -> tuple[SubscriberView, tuple[ResyncNeeded, ...]]:
    """The requests the backoff held back that are due at ``now``, to publish now (each
    counts as sent: the next one for that surface waits longer)."""
    troubles, sends = view.troubles, []
    for key, trouble in view.troubles.items():
        if trouble.pending is not None and trouble.next_at <= now:
            sends.append(trouble.pending)
            troubles = troubles.set(key, _asked(trouble, now))
    if not sends:
        return view, ()
    return view._replace(troubles=troubles), tuple(sends)


def next_resync_at(view: SubscriberView) -> float | None:
    """When ``due_resyncs`` will next have something (the caller's clock), or ``None``."""
    times = [t.next_at for t in view.troubles.values() if t.pending is not None]
    return min(times) if times else None


def _delivered(view: SubscriberView, key: tuple[str, str], new: HeldSurface) -> SubscriberView:
    """A validated surface ends its trouble (the backoff and any invalid hold start over)."""
    troubles = view.troubles
    if key in troubles:  # rare: the map is empty while all is well
        troubles = PMap({k: t for k, t in troubles.items() if k != key})
    return SubscriberView(view.surfaces.set(key, new), troubles)


def _sequence_of(frame: Mapping[str, Any]) -> int | None:
    sequence = frame.get("sequence")
    return sequence if isinstance(sequence, int) and not isinstance(sequence, bool) else None


# --- the step ------------------------------------------------------------------------------------


def receive(  # noqa: C901 - the subscriber's one choke point (full or delta)
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
    run_id, surface_id = decoded.get("runId"), decoded.get("surfaceId")
    problem = _frame_problem(decoded)
    if problem is not None:
        if isinstance(run_id, str) and isinstance(surface_id, str):
            failure = _Failure(None, _sequence_of(decoded), problem)
            return _refuse(view, (run_id, surface_id), failure, now)
        return view, ResyncNeeded(None, None, problem)
    key = (str(run_id), str(surface_id))  # checked by _frame_problem
    run_id, surface_id = key
    held = view.get(run_id, surface_id)
    sequence, kind = decoded["sequence"], decoded["kind"]
    marked = kind == "full" and decoded.get("resync") is True

    def fail(reason: str, invalid: SurfaceProblem | None = None) -> tuple[SubscriberView, Received]:
        return _refuse(view, key, _Failure(kind, sequence, reason, invalid, marked), now)

    if kind == "full":
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
        invalid = surface_problem(version, content, catalog, surface_id, rules)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:  # a malformed shape
        invalid = SurfaceProblem(_SHAPE, "", f"surface invalid: {type(exc).__name__}")
    if invalid is not None:
        return fail(invalid.reason, invalid)
    if "digest" in decoded and kind == "delta" and decoded["digest"] != _digest(content):
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
    return _delivered(view, key, new), Delivered(new, kind)
