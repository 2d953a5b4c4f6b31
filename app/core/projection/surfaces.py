"""Materialization: the full content of every surface, folded from the per-run log (issue 5 §2).

``project(state, event) -> (state, changes)`` folds ONE recorded event (schemas/recorded-event,
as ``app.core.admission.decision.decide`` emitted it) into the materialized surfaces of its run, and
says which surface it changed, from what to what. Replay is ``reduce`` over the log, exactly like
``app.core.admission.fold.apply`` on the admission side; nothing here reads a clock or does I/O.

Identity:
- v2: ``SurfaceKey(runId, surfaceId)`` (openwop-a2ui.md §6).
- v1: the run's ONE v1 surface (docs/admission.md decision 4: the last admitted version-0/1
  payload, RFC 0114), ``SurfaceKey(runId, V1_SURFACE_ID)``. ``"~v1"`` can never collide with a
  v2 surfaceId (the profile's pattern ``^[A-Za-z0-9_.:-]+$`` has no ``~``). Its ``surface_ref``
  is the eventId of the last v1 payload (the RFC 0114 ``surfaceRef``).

The materialized content (``Surface.content``: the document full frames carry and deltas patch):
- v1: the v1 payload as recorded, ``{catalogVersion, surface, reasoning?}`` (RFC 0114: the
  recorded envelope is always the full surface; patch paths like ``/surface/components/1/text``
  are rooted here, openwop-a2ui.md §16c);
- v2: ``{surfaceId, catalogId, theme, components: {<id>: component}, dataModel}``
  (schemas/materialized-surface.schema.json). Components are an OBJECT keyed by id, so a delta
  path (``/components/name/label``) stays stable under upserts.

The v2 fold is web_core parity (a2ui-v09.md §5/§8; docs/admission.md decision 6), made explicit:
- ``createSurface`` starts ``{components: {}, dataModel: {}}`` with its catalogId and theme;
- ``updateComponents`` upserts by id, replacing the component wholesale (the last duplicate in a
  message wins);
- ``updateDataModel``: path absent, ``""`` or ``"/"`` is the whole model; ``value`` present sets it
  (``null`` is stored), creating missing or null intermediates (``[]`` when the next segment is all
  digits, else ``{}``); ``value`` absent removes (an object key is deleted, an array element
  becomes ``null`` keeping the length, the root becomes ``{}``; removing a missing path is a no-op);
- ``deleteSurface`` ends it: ``deleted``, components and data model emptied; a later
  ``createSurface`` starts afresh (taint stays, §7).
Decisions where web_core throws or is silent (the log holds only admitted envelopes, so the
projector must never crash on one): data-model paths are RFC 6901 JSON Pointers (``~1`` -> ``/``,
``~0`` -> ``~``; empty tokens are the key ``""``), a primitive in the way, a non-numeric segment on
an array (``-`` included), an index more than ``MAX_INDEX_GAP`` past the end, or a value that
would nest the model deeper than a frame can be encoded (``MAX_FRAME_DEPTH``) leave the data
model UNCHANGED for that message and add a ``projection_warning`` to the change. An index past the
end within the gap pads with ``null`` (web_core's sparse array serializes so).

Values: ``Surface``, ``SurfaceChange`` and ``Projection`` are immutable; the JSON content is
shared between states (structural sharing: an update copies only what it changes) and must be
treated as read-only by every caller.

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from app.core.admission.fold import is_v2_body
from app.core.admission.policy import SURFACE_KIND
from app.core.common.pointer import unescape
from app.core.runlog.events import RecordedEvent
from app.core.runlog.pmap import PMap
from app.core.runlog.run_state import FoldStatus

__all__ = [
    "V1_SURFACE_ID",
    "MAX_INDEX_GAP",
    "MAX_FRAME_DEPTH",
    "Trust",
    "SurfaceKey",
    "Surface",
    "SurfaceChange",
    "Projection",
    "project",
    "replay",
    "parse_data_path",
]

V1_SURFACE_ID = "~v1"
MAX_INDEX_GAP = 1024  # a data-model index further past the end than this is refused (memory)
# A frame must stay encodable: orjson writes at most 254 nested levels; a full v2 frame puts
# the data model 3 levels down (frame -> surface -> dataModel), then one level per path token.
MAX_FRAME_DEPTH = 250
_FRAME_PREFIX = 3

Trust = Literal["trusted", "untrusted"]
_EMPTY: PMap[Any, Any] = PMap()
_MISSING: Any = object()


class SurfaceKey(NamedTuple):
    """A surface's identity: ``(runId, surfaceId)``, or ``(runId, V1_SURFACE_ID)`` for v1."""

    run_id: str
    surface_id: str


class Surface(NamedTuple):
    """One materialized surface after the event ``surface_ref`` (sequence ``sequence``)."""

    key: SurfaceKey
    version: int  # 1 (v1 payload) or 2 (A2UI v0.9 fold)
    content: Any  # the patch base: the v1 payload, or the v2 materialized surface
    catalog: str  # v1 catalogVersion, v2 catalogId
    trust: Trust  # RFC 0209 §C.12 / RFC 0143: sticky, never raised again
    partial: bool  # E1: the last envelope touching it was a non-final chunk
    status: FoldStatus  # §6: v1 is always "live"; "absent" only if the log began without create
    sequence: int
    surface_ref: str  # eventId of the last event that changed it

    @property
    def deleted(self) -> bool:
        """v2 ``deleteSurface`` ended it (§6); a frame says so."""
        return self.status == "deleted"

    @property
    def renderable(self) -> bool:
        """§6 render-needs-root: v2 renders iff ``root`` is among the components (after the
        fold a map holds at most one); a v1 surface is always a complete tree."""
        if self.version == 1:
            return True
        return not self.deleted and "root" in self.content["components"]

    @property
    def actions_enabled(self) -> bool:
        """E1 + §7: actions only on a finalized, trusted, live surface."""
        return not self.partial and self.trust == "trusted" and not self.deleted


class SurfaceChange(NamedTuple):
    """What one event did to one surface. ``old`` is ``None`` the first time the surface is
    seen; ``warnings`` are ``projection_warning`` texts (a message the fold could not apply)."""

    key: SurfaceKey
    old: Surface | None
    new: Surface
    warnings: tuple[str, ...] = ()


class Projection(NamedTuple):
    """Every materialized surface, and the next sequence expected per run (so a re-delivered
    event is recognized and ignored: at-least-once reads stay idempotent)."""

    surfaces: PMap[SurfaceKey, Surface] = _EMPTY
    heads: PMap[str, int] = _EMPTY

    def surfaces_of(self, run_id: str) -> tuple[Surface, ...]:
        """The surfaces of run ``run_id``."""
        return tuple(s for k, s in self.surfaces.items() if k.run_id == run_id)


# --- the step ------------------------------------------------------------------------------------


def project(
    state: Projection, event: RecordedEvent
) -> tuple[Projection, tuple[SurfaceChange, ...]]:
    """Fold one recorded event into ``state``. Events of other kinds (universal kinds) and
    re-delivered events (sequence below the run's head) change nothing. Never raises on an
    event the admission decision produced."""
    run_id = event["runId"]
    sequence = event["sequence"]
    head = state.heads.get(run_id, 0)
    if sequence < head:
        return state, ()
    heads = state.heads.set(run_id, sequence + 1)
    payload = event["payload"]
    envelope = payload.get("envelope")  # absent on host events (run lifecycle, fork marker)
    body = envelope.get("payload") if isinstance(envelope, dict) else None
    if event["type"] != SURFACE_KIND or not isinstance(body, dict) or envelope is None:
        return Projection(state.surfaces, heads), ()
    untrusted = payload.get("trust") == "untrusted" or event.get("contentTrust") == "untrusted"
    partial_info = envelope.get("partial")
    partial = isinstance(partial_info, dict) and partial_info.get("isPartial") is True
    ref = event["eventId"]
    if is_v2_body(body):
        key = SurfaceKey(run_id, body.get("surfaceId", ""))
        old = state.surfaces.get(key)
        new, warnings = _fold_v2(key, old, body, untrusted, partial, sequence, ref)
    else:
        key = SurfaceKey(run_id, V1_SURFACE_ID)
        old = state.surfaces.get(key)
        catalog = body.get("catalogVersion")
        trust: Trust = "untrusted" if untrusted or _tainted(old) else "trusted"
        new = Surface(key, 1, body, str(catalog), trust, partial, "live", sequence, ref)
        warnings = ()
    change = SurfaceChange(key, old, new, warnings)
    return Projection(state.surfaces.set(key, new), heads), (change,)


def replay(events: Any, state: Projection | None = None) -> Projection:
    """``reduce(project, events)``: the projection of a log (or of a fork's prefix)."""
    current = Projection() if state is None else state
    for event in events:
        current, _ = project(current, event)
    return current


def _tainted(surface: Surface | None) -> bool:
    return surface is not None and surface.trust == "untrusted"


# --- the v2 fold ---------------------------------------------------------------------------------


def _fresh(surface_id: str, catalog: str, theme: Any) -> dict[str, Any]:
    return {
        "surfaceId": surface_id,
        "catalogId": catalog,
        "theme": theme if isinstance(theme, dict) else {},
        "components": {},
        "dataModel": {},
    }


def _fold_v2(
    key: SurfaceKey,
    old: Surface | None,
    body: dict[str, Any],
    untrusted: bool,
    partial: bool,
    sequence: int,
    ref: str,
) -> tuple[Surface, tuple[str, ...]]:
    warnings: list[str] = []
    catalog = str(body.get("catalogId", old.catalog if old else ""))
    if old is None:
        content: dict[str, Any] = _fresh(key.surface_id, catalog, None)
        status: FoldStatus = "absent"
    else:
        content, status = old.content, old.status
    messages = body.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else ()):
        kind, inner = _split(message)
        if kind == "createSurface":
            if status == "live":  # §6 (ii): impossible in an admitted log; keep the live surface
                warnings.append(f"message {index}: createSurface on a live surface; ignored")
                continue
            catalog = str(inner.get("catalogId", catalog))
            content = _fresh(key.surface_id, catalog, inner.get("theme"))
            status = "live"
        elif status != "live":  # §6 (i)/(iii): impossible in an admitted log
            warnings.append(f"message {index}: {kind} on a surface that is not live; ignored")
        elif kind == "updateComponents":
            content = _upsert(content, inner.get("components"), index, warnings)
        elif kind == "updateDataModel":
            content = _update_data(content, inner, index, warnings)
        elif kind == "deleteSurface":
            content = {**content, "components": {}, "dataModel": {}}
            status = "deleted"
        else:
            warnings.append(f"message {index}: not an A2UI v0.9 message; ignored")
    trust: Trust = "untrusted" if untrusted or _tainted(old) else "trusted"
    new = Surface(key, 2, content, catalog, trust, partial, status, sequence, ref)
    return new, tuple(warnings)


def _split(message: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(message, dict):
        for kind in ("createSurface", "updateComponents", "updateDataModel", "deleteSurface"):
            inner = message.get(kind)
            if isinstance(inner, dict):
                return kind, inner
    return "unknown", {}


def _upsert(
    content: dict[str, Any], components: Any, index: int, warnings: list[str]
) -> dict[str, Any]:
    """a2ui-v09.md §5 updateComponents: upsert by id, the whole component replaced."""
    merged = dict(content["components"])
    for position, component in enumerate(components if isinstance(components, list) else ()):
        cid = component.get("id") if isinstance(component, dict) else None
        if not isinstance(cid, str):
            warnings.append(f"message {index}: component {position} has no id; ignored")
            continue
        merged[cid] = component
    return {**content, "components": merged}


# --- updateDataModel -----------------------------------------------------------------------------


def parse_data_path(path: Any) -> list[str]:
    """An ``updateDataModel`` path as tokens: absent, ``""`` and ``"/"`` are the root (a2ui-v09
    §5); otherwise an RFC 6901 pointer (``~1`` -> ``/``, ``~0`` -> ``~``), read leniently: no
    leading ``/`` needed, and a ``~`` followed by anything else is kept as it is."""
    if path is None or path in ("", "/"):
        return []
    text = str(path)
    tokens = (text[1:] if text.startswith("/") else text).split("/")
    return [unescape(t) for t in tokens]


def _update_data(
    content: dict[str, Any], inner: dict[str, Any], index: int, warnings: list[str]
) -> dict[str, Any]:
    path = inner.get("path")
    tokens = parse_data_path(path)
    has_value = "value" in inner
    model = content["dataModel"]
    if not tokens:
        return {**content, "dataModel": inner["value"] if has_value else {}}
    if has_value and _too_deep(inner["value"], MAX_FRAME_DEPTH - _FRAME_PREFIX - len(tokens)):
        result: Any = (
            f"the value would nest deeper than {MAX_FRAME_DEPTH} levels in a frame (orjson's limit)"
        )
    else:
        result = _set(model, tokens, inner["value"]) if has_value else _remove(model, tokens)
    if isinstance(result, str):
        warnings.append(
            f"message {index}: updateDataModel path {str(path)[:120]!r}: {result}; "
            "the data model is unchanged for this message"
        )
        return content
    return content if result is model else {**content, "dataModel": result}


def _too_deep(value: Any, budget: int) -> bool:
    """Whether ``value`` nests more than ``budget`` containers deep (iterative)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > budget:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return False


def _digits(token: str) -> bool:
    return token.isdigit() and token.isascii()


def _set(node: Any, tokens: list[str], value: Any) -> Any:
    """A copy of ``node`` with ``value`` at ``tokens`` (copying only the path), or a reason."""
    token, rest = tokens[0], tokens[1:]
    if isinstance(node, dict):
        child = node.get(token, _MISSING)
        if rest:
            if child is _MISSING or child is None:  # web_core creates missing/null intermediates
                child = [] if _digits(rest[0]) else {}
            result = _set(child, rest, value)
            if isinstance(result, str):
                return result
            value = result
        copy = dict(node)
        copy[token] = value
        return copy
    if isinstance(node, list):
        if not _digits(token):
            return f"segment {token[:40]!r} is not an index into an array"
        position = int(token)
        if position - len(node) > MAX_INDEX_GAP:
            return f"index {position} is more than {MAX_INDEX_GAP} past the end of an array"
        if rest:
            child = node[position] if position < len(node) else None
            if child is None:
                child = [] if _digits(rest[0]) else {}
            result = _set(child, rest, value)
            if isinstance(result, str):
                return result
            value = result
        items = list(node)
        if position >= len(items):
            items.extend([None] * (position - len(items)))
            items.append(value)
        else:
            items[position] = value
        return items
    return f"segment {token[:40]!r} is inside a primitive ({_json_type(node)})"


def _remove(node: Any, tokens: list[str]) -> Any:
    """A copy of ``node`` without ``tokens`` (an array element becomes null, length kept), the
    same ``node`` when there is nothing to remove, or a reason."""
    token, rest = tokens[0], tokens[1:]
    if isinstance(node, dict):
        if token not in node:
            return node
        if not rest:
            copy = dict(node)
            del copy[token]
            return copy
        result = _remove(node[token], rest)
        if isinstance(result, str):
            return result
        return node if result is node[token] else {**node, token: result}
    if isinstance(node, list):
        if not _digits(token):
            return f"segment {token[:40]!r} is not an index into an array"
        position = int(token)
        if position >= len(node):
            return node
        items = list(node)
        if not rest:
            items[position] = None
            return items
        result = _remove(node[position], rest)
        if isinstance(result, str):
            return result
        if result is node[position]:
            return node
        items[position] = result
        return items
    if node is None:
        return node  # nothing there: a no-op
    return f"segment {token[:40]!r} is inside a primitive ({_json_type(node)})"


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string" if isinstance(value, str) else type(value).__name__
