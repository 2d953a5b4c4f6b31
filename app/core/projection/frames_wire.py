"""The subscriber frames' wire form (schemas/projection-frame.schema.json; docs/projection.md):
the full and delta frames as values, RFC 0114's frame inside a v1 delta, their bytes, the
surface digest a delta's ``digest`` carries and the tag of the SR-1 secrets a frame was
redacted with. ``app.core.projection.frames`` decides which frame each subscriber gets; this
module only says what a frame is.

- full: ``{kind:"full", runId, surfaceId, version, surfaceRef, sequence, catalogVersion (v1) |
  catalogId (v2), trust, renderable, actionsEnabled, partial, deleted, surface, resync?}``
  where ``surface`` is the materialized content (v1: the payload ``{catalogVersion, surface,
  reasoning?}``; v2: schemas/materialized-surface) and ``resync: true`` marks the answer to
  a resync request (``app.core.projection.frames.answer_resync``);
- delta: ``{kind:"delta", runId, surfaceId, surfaceRef, catalogVersion (v1 only),
  baseSequence, sequence, patch, digest?}``.
  ``{surfaceRef, catalogVersion, patch}`` is RFC 0114's frame (v1); ``patch`` is RFC 6902 over
  the content the subscriber holds (the surface at ``baseSequence``), rooted like the full
  frame's ``surface``, so a v1 leaf is ``/surface/components/1/text`` exactly as
  openwop-a2ui.md §16c expects. ``surfaceRef`` is the eventId of the NEW surface (what the
  conformance live leg filters on, §10 conflict 2); the base is named by ``baseSequence``
  (unique within the run's gap-free log).
  A delta carries NO status: it never changes the version, the catalog, the trust, the partial flag
  or the deletion (each is a full frame: the rules of app.core.projection.frames), so the subscriber
  keeps its base's values and derives ``renderable``; ``actionsEnabled`` follows from trust, partial
  and deletion, so it cannot change in a delta either. A delta can therefore never carry, nor drop,
  ``untrusted`` (RFC 0114; the SSE transport, app.core.projection.sse_frames, has the same ``trust``
  rule).
  ``digest`` (``surface_digest`` of the surface AFTER the patch) rides every
  ``full_every``-th delta in a row (RFC 0114 unresolved question 2): the subscriber compares
  it with the digest of what it now holds and asks for a resync on a mismatch, so silent drift
  (a client applier that differs from RFC 6902, an application that mutated the surface it was
  handed) costs a full frame only to the client that drifted.

May import: the standard library, orjson and app.core.* (pure).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from app.core.admission.redaction import Secrets
from app.core.projection.surfaces import Surface

__all__ = [
    "full_frame",
    "delta_frame",
    "encode_frame",
    "rfc0114_frame",
    "redaction_tag",
    "surface_digest",
    "DIGEST_PATTERN",
]

DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"  # schemas/projection-frame ``digest``


def redaction_tag(secrets: Secrets) -> str:
    """A short stable fingerprint of a set of prepared secrets ("" for none)."""
    if not secrets:
        return ""
    text = "\x00".join(f"{sid}\x01{value}" for value, sid, _ in secrets)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


_SORTED = orjson.OPT_SORT_KEYS


def surface_digest(content: Any) -> str:
    """The canonical digest of a surface's content, ``"sha256:" + hex``, the same for every
    JSON-equal value (``app.core.projection.patch_equal.json_equal``): orjson with sorted keys
    (objects are unordered), ``1`` and ``1.0`` or ``true`` and ``1`` written apart (they are
    different values), and ``-0.0`` written as ``0.0`` (an equal value: the diff never sends a sign
    change of zero, so both ends must agree on it). Floats are orjson's shortest round-trip
    form, so a value that went through a frame's bytes digests the same. Raises ``TypeError``
    (``orjson.JSONEncodeError``) for a value that is not JSON (the subscriber catches it)."""
    data = orjson.dumps(content, option=_SORTED)
    if b"-0.0" in data:  # rare (also in ``-0.05`` or a string): only then walk the value
        data = orjson.dumps(_unsigned_zeros(content), option=_SORTED)
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _unsigned_zeros(value: Any) -> Any:
    if type(value) is float:
        return 0.0 if value == 0.0 else value
    if isinstance(value, dict):
        return {k: _unsigned_zeros(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unsigned_zeros(v) for v in value]
    return value


def encode_frame(frame: Mapping[str, Any]) -> bytes:
    """A frame's bytes on a subscriber topic (JSON, UTF-8)."""
    return orjson.dumps(frame)


def _catalog_field(surface: Surface) -> str:
    return "catalogVersion" if surface.version == 1 else "catalogId"


def _status(surface: Surface) -> dict[str, Any]:
    return {
        "trust": surface.trust,
        "renderable": surface.renderable,
        "actionsEnabled": surface.actions_enabled,
        "partial": surface.partial,
        "deleted": surface.deleted,
    }


def full_frame(
    surface: Surface, content: Any | None = None, *, resync: bool = False
) -> dict[str, Any]:
    """The full frame for ``surface`` (``content`` overrides it, e.g. redacted). ``resync``
    marks the answer to a resync request: a subscriber that finds this frame invalid holds the
    surface invalid at its sequence instead of asking again (app.core.projection.subscriber)."""
    frame = {
        "kind": "full",
        "runId": surface.key.run_id,
        "surfaceId": surface.key.surface_id,
        "version": surface.version,
        "surfaceRef": surface.surface_ref,
        "sequence": surface.sequence,
        _catalog_field(surface): surface.catalog,
        **_status(surface),
        "surface": surface.content if content is None else content,
    }
    if resync:
        frame["resync"] = True
    return frame


def delta_frame(
    old: Surface, new: Surface, patch: list[dict[str, Any]], digest: str | None = None
) -> dict[str, Any]:
    """The delta frame turning ``old`` into ``new`` by ``patch`` (``digest``: the periodic
    check, ``surface_digest`` of the content after the patch)."""
    # Routing (runId, surfaceId), RFC 0114's frame (surfaceRef, v1 catalogVersion, patch) and
    # the chain (baseSequence, sequence: a gap is detected), nothing else. Everything a delta
    # cannot change is the base's: the version (``surfaceId`` "~v1" is the v1 surface), the
    # catalog (v1 repeats it only because RFC 0114 requires it), and the status (trust,
    # partial, deleted and so actionsEnabled): frames.choose sends a full frame when any differs.
    frame: dict[str, Any] = {
        "kind": "delta",
        "runId": new.key.run_id,
        "surfaceId": new.key.surface_id,
        "surfaceRef": new.surface_ref,
    }
    if new.version == 1:
        frame["catalogVersion"] = new.catalog
    frame["baseSequence"] = old.sequence
    frame["sequence"] = new.sequence
    frame["patch"] = patch
    if digest is not None:  # the periodic check: the subscriber compares what it holds
        frame["digest"] = digest
    return frame


def rfc0114_frame(frame: Mapping[str, Any]) -> dict[str, Any]:
    """The RFC 0114 frame ``{surfaceRef, catalogVersion, patch}`` inside a v1 delta frame."""
    return {
        "surfaceRef": frame["surfaceRef"],
        "catalogVersion": frame["catalogVersion"],
        "patch": frame["patch"],
    }
