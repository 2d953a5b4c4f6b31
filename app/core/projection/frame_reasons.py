"""Why a frame is what it is: one vocabulary for the two frame planners.

Role: the names both transports give the choice between a delta and a full frame, each with
its one meaning. Two planners use them, each in its own order of checks (the first that
applies names the reason):

- the Kafka subscriber topics (``app.core.projection.frames``): per registered subscriber, with its
  cursor; a delta subscriber given a full frame is a counted fallback, by reason
  (``a2ui_projector_fallbacks_total``, ``FALLBACK_REASONS``);
- an SSE connection that asked for deltas
(``?a2uiDelta=1``, ``app.core.projection.sse_frames``): per
  connection, v1 surfaces only (``FULL_REASONS``).

A name both use means the same in both (``first``, ``catalog``, ``trust``, ``empty``,
``unverified``); what only one transport can see has its own name (``partial`` is part of
``binding`` on SSE, which also covers the gate a v1 surface is bound to). docs/projection.md
lists them; tests/core/test_frame_reasons.py ties each planner's returns, its docstring and
this table together.

May import: the standard library only.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DELTA", "DIGEST", "FALLBACK_REASONS", "FULL_REASONS", "KAFKA_ORDER", "MEANING"]

DELTA: Final = "delta"  # the frame is the change as an RFC 6902 patch
DIGEST: Final = "digest"  # a delta that also carries the surface's digest (Kafka only)

MEANING: Final[dict[str, str]] = {
    DELTA: "the change as a verified RFC 6902 patch over what the subscriber holds",
    DIGEST: "a delta that also carries the digest of the surface after it (every fullEvery-th)",
    "subscription": "the subscriber did not opt into deltas (full frames by default)",
    "first": "nothing is held for this surface yet: a subscriber starts from a full frame",
    "full-only": "the subscriber kept failing (MAX_RESYNCS resync requests): no resync loop",
    "resync": "the subscriber asked for a resync: exactly one full frame answers it",
    "deleted": "the surface was deleted, or is re-created after a deletion the subscriber holds",
    "trust": "its trust differs from what is held (a delta carries no trust marker)",
    "partial": "its partial flag differs: the frame that finalizes a surface is self-contained",
    "binding": "its nodeId or its partial flag differs (both live outside the v1 payload)",
    "catalog": "its catalog (or payload major) differs: a catalog change starts from a full",
    "secrets": "the run's SR-1 secrets changed since the subscriber's last frame",
    "not-in-sync": "what the subscriber holds is not the surface this change starts from",
    "empty": "the content did not change (a delta needs a non-empty patch)",
    "unverified": "no patch reproduces the new content exactly (a delta is never sent unchecked)",
    "invalid": "the patched payload fails the v1 catalog, or the event has no surfaceRef id",
    "other": "not a v1 surface event: it passes through as recorded (SSE)",
}

# The Kafka planner's checks, in order (app.core.projection.frames._reason); ``subscription`` is not
# a fallback (the subscriber asked for full frames).
KAFKA_ORDER: Final = (
    "subscription",
    "first",
    "full-only",
    "resync",
    "deleted",
    "trust",
    "partial",
    "catalog",
    "secrets",
    "not-in-sync",
    "empty",
    "unverified",
)
FALLBACK_REASONS: Final = KAFKA_ORDER[1:]
# The SSE planner's full-frame reasons, in order (app.core.projection.sse_frames.step).
FULL_REASONS: Final = ("first", "catalog", "trust", "binding", "empty", "unverified", "invalid")
