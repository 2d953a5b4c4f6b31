"""Frame planning: which frame each subscriber gets for one surface change (issue 5 §2-§4).

``plan_frames(change, subscribers, secrets=...) -> Plan`` turns one ``SurfaceChange`` (from
``app.core.projection.surfaces.project``) into encoded frames, one per subscriber, and each
subscriber's new ``SubscriberCursor``. The shell writes ``Plan.sends`` to the subscriber topics,
stores ``Plan.cursors`` and counts ``Plan.fallbacks`` on /metrics. Nothing here does I/O.

Frames (their fields and what a delta may carry): ``app.core.projection.frames_wire``.

Rules (issue 5 §3), decided per subscriber in this order (the first that applies names the
reason, from the one vocabulary of both transports, ``app.core.projection.frame_reasons``; a delta
subscriber that gets a full frame is a counted fallback):
  subscription  the subscriber did not opt into deltas (RFC 0114: full by default)
  first         it holds nothing for this surface yet
  full-only     it kept failing (``MAX_RESYNCS`` resync requests): no resync loop
  resync        it asked for a resync: exactly one full frame answers it
  deleted       the surface was deleted (the frame says so, ``deleted: true``), or it is
                re-created after the deletion the subscriber holds
  trust         its trust differs from what the subscriber holds (taint is sticky, so this
                is the one frame that turns it ``untrusted``)
  partial       its partial flag differs (E1): the frame that finalizes a surface, and so
                may enable its actions, is always a full, self-contained frame
  catalog       its catalog (or payload major) differs: a catalog change starts from a full
  secrets       the run's SR-1 secrets changed since its last frame (its base was redacted
                differently)
  not-in-sync   what it holds is not the surface this change starts from
  empty         the content did not change (RFC 0114 frames need a non-empty patch)
  unverified    the delta did not reproduce the new surface exactly (never sent)
Otherwise it gets the delta; the ``full_every``-th delta in a row (counting from its last full
frame or digest check) is the same delta with ``digest`` (reason ``digest``).
The delta, the digest and the encodings are computed ONCE per change (lazily) and shared by every
subscriber; per subscriber only the choice above runs. SR-1 (``app.core.admission.redaction``) runs
over the full content and the patch values before fan-out (§14, RFC 0114).

May import: the standard library, orjson and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple, Protocol

from app.core.admission.redaction import Secrets, redact
from app.core.projection.frame_reasons import FALLBACK_REASONS
from app.core.projection.frames_wire import (
    delta_frame,
    encode_frame,
    full_frame,
    redaction_tag,
    surface_digest,
)
from app.core.projection.patch import verified_diff
from app.core.projection.surfaces import Surface, SurfaceChange, Trust

__all__ = [
    "MAX_RESYNCS",
    "DEFAULT_FULL_EVERY",
    "FALLBACK_REASONS",
    "Addressee",
    "Recipient",
    "SubscriberCursor",
    "Send",
    "Plan",
    "Prepared",
    "prepare",
    "choose",
    "plan_frames",
    "on_resync",
    "answer_resync",
    "catch_up",
]

MAX_RESYNCS = 3
DEFAULT_FULL_EVERY = 100  # deltas between digest checks (the registry's ``fullEvery``)


class Recipient(NamedTuple):
    """A subscriber as the planner needs it: what of its registry record
    (``app.core.projection.subscriptions.Subscription``,
    schemas/subscription) decides its frames."""

    subscriber_id: str
    delta: bool = False
    # every ``full_every``-th delta in a row carries a digest check (the registry's field keeps
    # its name ``fullEvery``: it was the period of a forced full frame; docs/projection.md)
    full_every: int = DEFAULT_FULL_EVERY


class Addressee(Protocol):
    """What the planner reads of a subscriber: a ``Recipient``, or a registration
    (``app.core.projection.subscriptions.Subscription``) as it is."""

    @property
    def subscriber_id(self) -> str:
        """Whose frame it is."""

    @property
    def delta(self) -> bool:
        """Whether it opted into deltas."""

    @property
    def full_every(self) -> int:
        """Every ``full_every``-th delta in a row carries a digest check."""


class SubscriberCursor(NamedTuple):
    """What one subscriber holds for one surface, as far as the projector knows: its identity
    and the status its last full frame gave it (a delta never changes the status)."""

    surface_ref: str
    sequence: int
    catalog: str
    version: int
    trust: Trust
    partial: bool
    deleted: bool
    deltas_since_check: int = 0  # deltas since its last full frame or digest check
    out_of_sync: bool = False  # a resync request arrived: the next frame is full
    resyncs: int = 0  # resync requests so far; at MAX_RESYNCS the subscriber gets full only
    redaction: str = ""  # redaction_tag of the secrets its last frame was redacted with


class Send(NamedTuple):
    """One frame for one subscriber."""

    subscriber_id: str
    kind: str  # "full" | "delta"
    reason: str  # "delta", "digest" (a delta with a digest check), or why a full frame was sent
    frame: bytes


class Plan(NamedTuple):
    """Frames to send for one change, the subscribers' new cursors, fallbacks by reason, and
    the change's projection warnings (for the shell's log)."""

    sends: tuple[Send, ...]
    cursors: dict[str, SubscriberCursor]
    fallbacks: dict[str, int]
    warnings: tuple[str, ...] = ()


class Prepared:
    """The shared, per-change work: redacted contents, the verified delta and the encodings,
    each computed at most once, on first use."""

    __slots__ = (
        "change",
        "secrets",
        "tag",
        "catalog",
        "version",
        "trust",
        "partial",
        "deleted",
        "base_ref",
        "base_sequence",
        "shared_reason",
        "_delta_reason",
        "_content",
        "_delta",
        "_full_bytes",
        "_delta_bytes",
        "_digest_bytes",
        "_cursors",
    )

    def __init__(self, change: SurfaceChange, secrets: Secrets = ()) -> None:
        self.change = change
        self.secrets = secrets
        self.tag = redaction_tag(secrets)
        new, old = change.new, change.old
        self.catalog, self.version = new.catalog, new.version
        self.trust, self.partial, self.deleted = new.trust, new.partial, new.deleted
        self.base_ref = None if old is None else old.surface_ref
        self.base_sequence = None if old is None else old.sequence
        # a full-frame reason that holds for every delta subscriber alike
        self.shared_reason = "deleted" if new.deleted else None
        self._delta_reason: str | None = None
        self._content: Any = _UNSET
        self._delta: Any = _UNSET
        self._full_bytes: bytes | None = None
        self._delta_bytes: bytes | None = None
        self._digest_bytes: bytes | None = None
        self._cursors: dict[tuple[int, int], SubscriberCursor] = {}

    def cursor(self, deltas: int, resyncs: int) -> SubscriberCursor:
        """A subscriber's cursor after this change (shared: most subscribers get the same)."""
        key = (deltas, resyncs)
        found = self._cursors.get(key)
        if found is None:
            new = self.change.new
            fields = (new.surface_ref, new.sequence, new.catalog, new.version)
            status = (new.trust, new.partial, new.deleted)
            found = _make(SubscriberCursor, (*fields, *status, deltas, False, resyncs, self.tag))
            self._cursors[key] = found
        return found

    @property
    def content(self) -> Any:
        """The new content after SR-1 (the same object when nothing is redacted)."""
        if self._content is _UNSET:
            self._content = redact(self.change.new.content, self.secrets)
        return self._content

    @property
    def delta(self) -> list[dict[str, Any]] | str:
        """The verified patch old -> new (over redacted contents), or why there is none:
        ``"first"`` (the change has no old surface), ``"empty"`` or ``"unverified"``."""
        if self._delta is _UNSET:
            old = self.change.old
            if old is None:
                self._delta = "first"
            else:
                base = redact(old.content, self.secrets)
                patch = verified_diff(base, self.content)
                if patch is None:
                    self._delta = "unverified"
                elif not patch:
                    self._delta = "empty"
                else:  # belt and braces: SR-1 walks patch values (RFC 0114)
                    self._delta = redact(patch, self.secrets)
        result: list[dict[str, Any]] | str = self._delta
        return result

    @property
    def delta_reason(self) -> str:
        """``"delta"``, or why this change has no delta (``Prepared.delta``'s reasons)."""
        if self._delta_reason is None:
            delta = self.delta
            self._delta_reason = delta if isinstance(delta, str) else "delta"
        return self._delta_reason

    def full_bytes(self) -> bytes:
        """The full frame of the change, encoded once and kept."""
        if self._full_bytes is None:
            self._full_bytes = encode_frame(full_frame(self.change.new, self.content))
        return self._full_bytes

    def delta_bytes(self) -> bytes:
        """The delta frame of the change (without ``digest``), encoded once and kept."""
        if self._delta_bytes is None:
            self._delta_bytes = self._encode_delta(None)
        return self._delta_bytes

    def digest_bytes(self) -> bytes:
        """The delta frame with ``digest``: the digest of the new content after SR-1, which
        is exactly what a subscriber in sync holds once it has applied the patch."""
        if self._digest_bytes is None:
            self._digest_bytes = self._encode_delta(surface_digest(self.content))
        return self._digest_bytes

    def _encode_delta(self, digest: str | None) -> bytes:
        patch = self.delta
        old = self.change.old
        if isinstance(patch, str) or old is None:
            raise ValueError("no delta for this change")  # a bug: choose() said delta
        return encode_frame(delta_frame(old, self.change.new, patch, digest))


_UNSET: Any = object()


def prepare(change: SurfaceChange, secrets: Secrets = ()) -> Prepared:
    """The shared work for one change (see ``Prepared``)."""
    return Prepared(change, secrets)


def _reason(prepared: Prepared, sub: Addressee, cursor: SubscriberCursor | None) -> str:
    """``"delta"`` or the reason this subscriber gets a full frame (module docstring order)."""
    if not sub.delta:
        return "subscription"
    if cursor is None:
        return "first"
    if cursor.resyncs >= MAX_RESYNCS:
        return "full-only"
    if cursor.out_of_sync:
        return "resync"
    shared = prepared.shared_reason  # the checks that do not depend on the subscriber
    if shared is not None:
        return shared
    # A delta carries no status, so any change of it is a full frame: a delta can then never
    # carry or drop ``untrusted``, nor enable actions (RFC 0114; E1; RFC 0209 §C.12).
    if cursor.deleted:
        return "deleted"  # a re-create after the deletion the subscriber holds
    if cursor.trust != prepared.trust:
        return "trust"
    if cursor.partial != prepared.partial:
        return "partial"
    if cursor.catalog != prepared.catalog or cursor.version != prepared.version:
        return "catalog"
    if cursor.redaction != prepared.tag:
        return "secrets"
    if cursor.sequence != prepared.base_sequence or cursor.surface_ref != prepared.base_ref:
        return "not-in-sync"
    return prepared.delta_reason


def choose(
    prepared: Prepared, sub: Addressee, cursor: SubscriberCursor | None
) -> tuple[Send, SubscriberCursor]:
    """The frame for one subscriber and its cursor after it."""
    reason = _reason(prepared, sub, cursor)
    resyncs = 0 if cursor is None else cursor.resyncs
    if reason == "delta":
        sent = 1 if cursor is None else cursor.deltas_since_check + 1
        if sent >= sub.full_every:  # the periodic check: this delta carries the digest
            send: Send = _make(
                Send, (sub.subscriber_id, "delta", "digest", prepared.digest_bytes())
            )
            return send, prepared.cursor(0, resyncs)
        send = _make(Send, (sub.subscriber_id, "delta", reason, prepared.delta_bytes()))
        return send, prepared.cursor(sent, resyncs)
    send = _make(Send, (sub.subscriber_id, "full", reason, prepared.full_bytes()))
    return send, prepared.cursor(0, resyncs)


# ``tuple.__new__(NamedTupleClass, fields)`` builds the same value without the generated
# ``__new__`` frame (as app.core.admission.fold does): fan-out builds two values per subscriber.
_make: Any = tuple.__new__


def plan_frames(
    change: SurfaceChange,
    subscribers: Iterable[tuple[Addressee, SubscriberCursor | None]],
    *,
    secrets: Secrets = (),
) -> Plan:
    """Frames for every subscriber of the change's run (the shell filters by ``runs``).

    The choice depends on the subscriber only through ``delta``, ``full_every`` and the cursor
    it holds, and subscribers in step share one cursor object (``Prepared.cursor``): so it is
    made once per distinct (cursor, delta, full_every) and shared (measured: the rules per
    subscriber were most of a 1,000-subscriber fan-out's plan)."""
    prepared = Prepared(change, secrets)
    sends: list[Send] = []
    cursors: dict[str, SubscriberCursor] = {}
    fallbacks: dict[str, int] = {}
    # (id of the cursor, delta, full_every) -> (kind, reason, frame, cursor after, the cursor:
    # held so that its id is not reused by another one during this call)
    decided: dict[tuple[int, bool, int], tuple[str, str, bytes, SubscriberCursor, object]] = {}
    for sub, cursor in subscribers:
        memo = (id(cursor), sub.delta, sub.full_every)
        found = decided.get(memo)
        if found is None:
            send, after = choose(prepared, sub, cursor)
            found = decided[memo] = (send.kind, send.reason, send.frame, after, cursor)
        kind, reason, frame, after, _ = found
        sends.append(_make(Send, (sub.subscriber_id, kind, reason, frame)))
        cursors[sub.subscriber_id] = after
        if sub.delta and kind == "full":
            fallbacks[reason] = fallbacks.get(reason, 0) + 1
    return Plan(tuple(sends), cursors, fallbacks, change.warnings)


def on_resync(cursor: SubscriberCursor | None) -> SubscriberCursor | None:
    """A resync request arrived for this cursor: its next frame is full (exactly one), and the
    request is counted; at ``MAX_RESYNCS`` the subscriber gets full frames only (no loop).
    ``None`` (nothing delivered yet) stays ``None``: its next frame is full anyway."""
    if cursor is None:
        return None
    return cursor._replace(out_of_sync=True, resyncs=cursor.resyncs + 1)


def answer_resync(
    surface: Surface,
    sub: Recipient,
    cursor: SubscriberCursor | None,
    *,
    secrets: Secrets = (),
) -> tuple[Send, SubscriberCursor]:
    """Issue 5 §4: answer a resync request at once with exactly one full frame of the surface
    as it is now, marked ``resync: true`` (so a subscriber that still cannot use it holds it
    invalid rather than asking again: no request/answer pair repeats without a change); the
    request is counted in the cursor (``MAX_RESYNCS`` => full frames only)."""
    content = redact(surface.content, secrets)
    frame = encode_frame(full_frame(surface, content, resync=True))
    send = Send(sub.subscriber_id, "full", "resync", frame)
    resyncs = 1 if cursor is None else cursor.resyncs + 1
    after = SubscriberCursor(
        surface.surface_ref,
        surface.sequence,
        surface.catalog,
        surface.version,
        surface.trust,
        surface.partial,
        surface.deleted,
        0,
        False,
        resyncs,
        redaction_tag(secrets),
    )
    return send, after


def catch_up(
    surfaces: Iterable[Surface], sub: Recipient, *, secrets: Secrets = ()
) -> tuple[tuple[Send, SubscriberCursor], ...]:
    """A subscriber that registers after its runs' surfaces exist: one full frame per surface
    as it is now (RFC 0114: the host MUST be able to materialize the full surface for any
    subscriber at any time), with the cursor each starts from. Deleted surfaces are skipped."""
    out = []
    tag = redaction_tag(secrets)
    for surface in surfaces:
        if surface.deleted:
            continue
        frame = encode_frame(full_frame(surface, redact(surface.content, secrets)))
        send: Send = _make(Send, (sub.subscriber_id, "full", "first", frame))
        fields = (surface.surface_ref, surface.sequence, surface.catalog, surface.version)
        status = (surface.trust, surface.partial, surface.deleted)
        cursor = SubscriberCursor(*fields, *status, 0, False, 0, tag)
        out.append((send, cursor))
    return tuple(out)
