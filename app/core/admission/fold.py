"""The surface fold: the guard that refuses an illegal message sequence, and the pure step
``apply(state, recorded_event) -> state`` that replay reduces over the run log.

The legal transitions are DATA (STYLE rule 1; openwop-a2ui.md §6):

    absent  --createSurface-->    live
    live    --updateComponents--> live
    live    --updateDataModel-->  live
    live    --deleteSurface-->    deleted
    deleted --createSurface-->    live

Anything else refuses the whole envelope (§6 (i)-(iii)). Only version-2 bodies
(``payload.version == "v0.9"``) join the fold, classified by the body as openwop-app does, so a
warn-admitted schemaVersion-1 envelope with a v0.9 body joins the fold and the taint too.

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Final

from app.core.admission.children import NO_CHILDREN, fold_children, touches_graph
from app.core.admission.policy import SURFACE_KIND
from app.core.admission.refusal import Violation
from app.core.admission.rules import FOLD, refuse
from app.core.runlog.events import RecordedEvent
from app.core.runlog.pmap import PMap
from app.core.runlog.run_lifecycle import apply_host_event
from app.core.runlog.run_state import (
    EMPTY,
    NO_NODES,
    Correlation,
    FoldStatus,
    Recorded,
    RunState,
    SurfaceState,
    V1Surface,
)

__all__ = [
    "MESSAGE_KINDS",
    "TRANSITIONS",
    "ILLEGAL",
    "message_kind",
    "kinds_of",
    "is_v2_body",
    "guard",
    "apply",
    "apply_with",
    "NOT_LOOKED_UP",
    # the fast paths and the references they shortcut (tests/core/test_fast_paths.py)
    "walk_kinds",
    "walk_kinds_memoized",
    "status_after",
    "status_after_memoized",
    "single_node_set",
    "single_node_set_shared",
    "correlation_entry",
]

MESSAGE_KINDS: Final[tuple[str, ...]] = (
    "createSurface",
    "updateComponents",
    "updateDataModel",
    "deleteSurface",
)

# openwop-a2ui.md §6 fold state machine: (status, message kind) -> next status.
TRANSITIONS: Final[Mapping[tuple[FoldStatus, str], FoldStatus]] = {
    ("absent", "createSurface"): "live",
    ("live", "updateComponents"): "live",
    ("live", "updateDataModel"): "live",
    ("live", "deleteSurface"): "deleted",
    ("deleted", "createSurface"): "live",
}

# Why a missing transition is illegal, by the status it was attempted in (§6 (i)-(iii)).
ILLEGAL: Final[Mapping[FoldStatus, str]] = {
    "absent": "§6 (i): the first envelope for a surface must begin with createSurface",
    "live": "§6 (ii): createSurface for a surface that is already live",
    "deleted": "§6 (iii): no message after deleteSurface until a new createSurface",
}


_KIND_SET: Final = frozenset(MESSAGE_KINDS)


def message_kind(message: Any) -> str | None:
    """The A2UI message kind of a ``{version, <kind>: {...}}`` message, if any (the first
    kind key; the v2 branch admits exactly one)."""
    if isinstance(message, dict):
        for key in message:
            if key in _KIND_SET:
                return str(key)
    return None


def is_v2_body(body: Any) -> bool:
    """§6: a body joins the fold iff it is an A2UI v0.9 payload."""
    return isinstance(body, dict) and body.get("version") == "v0.9"


def kinds_of(messages: Sequence[Any]) -> tuple[str, ...]:
    """The kind of each message, in order ("unknown" for a message that has none): the fast
    twin of ``message_kind`` applied to each (inlined)."""
    out = []
    for message in messages:
        # inlined message_kind: this runs on every admitted envelope
        if isinstance(message, dict):
            for key in message:
                if key in _KIND_SET:
                    out.append(key)
                    break
            else:
                out.append("unknown")
        else:
            out.append("unknown")
    return tuple(out)


def walk_kinds(status: FoldStatus, kinds: Sequence[str]) -> tuple[FoldStatus, int | None, str]:
    """Step ``status`` through ``kinds``; on the first illegal one return its index (and the
    status it met and its kind). The reference of ``walk_kinds_memoized``."""
    for index, kind in enumerate(kinds):
        nxt = TRANSITIONS.get((status, kind))
        if nxt is None:
            return status, index, kind
        status = nxt
    return status, None, ""


# Envelopes repeat a handful of message-kind sequences (create+update+data, update, data, ...),
# so the walks over the table are memoized per (status, kinds): one C-level lookup instead of a
# Python loop per message, twice per admitted envelope (the guard, then the fold). Bounded: an
# envelope has at most 64 messages and the cache at most 4096 sequences. The memoized twins
# take hashable ``kinds`` (a tuple) and answer what their references answer.
walk_kinds_memoized: Final = lru_cache(maxsize=4096)(walk_kinds)


def status_after(status: FoldStatus, kinds: tuple[str, ...]) -> FoldStatus:
    """The status after ``kinds``; an impossible step keeps the status (recorded events are
    never re-validated, §8). The reference of ``status_after_memoized``; on a legal sequence,
    the status ``walk_kinds`` ends in."""
    for kind in kinds:
        status = TRANSITIONS.get((status, kind), status)
    return status


status_after_memoized: Final = lru_cache(maxsize=4096)(status_after)


def guard(status: FoldStatus, surface_id: str, kinds: Sequence[str]) -> Violation | None:
    """Check one envelope's message ``kinds`` (in order, see ``kinds_of``) against a surface
    currently in ``status``. One illegal message refuses the whole envelope (§6)."""
    before = status
    walked = (
        walk_kinds_memoized(status, kinds) if type(kinds) is tuple else walk_kinds(status, kinds)
    )
    status, index, kind = walked
    if index is None:
        return None
    return refuse(
        FOLD,
        f"/envelope/payload/messages/{index}",
        (
            f"fold: message {index} ({kind}) on surface {surface_id!r}, which is {status}"
            + ("" if before == status else f" after the earlier messages (was {before})")
            + f": {ILLEGAL[status]}; the envelope is refused and nothing is recorded"
        ),
        {"rule": FOLD.id, "surfaceId": surface_id, "index": index, "status": status},
    )


NOT_LOOKED_UP: Final[Any] = object()  # apply_with: the caller did not look the entry up


def correlation_entry(
    old: Correlation | None, kind: str, rec: Recorded, partial: Any
) -> Correlation:
    """E2 (§2): what ``old`` (the correlationId's entry, if any) becomes when ``rec``, of type
    ``kind`` with the envelope's ``partial``, is recorded. The reference of ``apply_with``'s
    shortcut for a first, complete emission."""
    chunks: PMap[int, Recorded] = EMPTY if old is None else old.chunks
    final = True
    if partial is not None and isinstance(partial, dict):  # E1 chunk
        index = partial.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            chunks = chunks.set(index, rec)
        final = partial.get("isPartial") is not True
    complete = final or (old is not None and old.complete)
    entry = Correlation(kind, rec, complete, chunks)
    return entry


def single_node_set(node_id: str) -> frozenset[str]:
    """``{node_id}``, frozen: the reference of ``single_node_set_shared``."""
    return frozenset((node_id,))


# Most surfaces are bound to one nodeId: share one frozenset per id instead of building a set and
# a frozenset for every new surface (a frozenset is immutable, so sharing it is safe).
single_node_set_shared: Final = lru_cache(maxsize=4096)(single_node_set)


def _fold_surface(
    old: SurfaceState | None,
    kinds: tuple[str, ...],
    untrusted: bool,
    node_id: Any,
    partial: bool,
    rec: Recorded,
    children: Any,
) -> SurfaceState:
    if old is None:
        status: FoldStatus = "absent"
        node_ids, tainted = NO_NODES, untrusted
    else:
        status, node_ids, tainted = old.status, old.node_ids, untrusted or old.tainted
    status = status_after_memoized(status, kinds)
    if node_id is not None and node_id not in node_ids and isinstance(node_id, str):
        node_ids = node_ids | {node_id} if node_ids else single_node_set_shared(node_id)
    # tainted: RFC 0209 §C.12, sticky per (runId, surfaceId)
    folded = SurfaceState(status, tainted, node_ids, partial, rec, children)
    return folded


def apply(state: RunState, event: RecordedEvent) -> RunState:
    """Fold one recorded event into the run state: an admitted envelope (as ``decide`` emitted
    it) or a host event (run lifecycle, fork copy: the handlers of ``admission.host_commands``
    build them, with ``admission.host_commands_call.host_event``; ``runlog.run_lifecycle``
    folds their statuses), which only advances the sequence here."""
    recorded = event["payload"]
    if isinstance(recorded, dict) and "envelope" in recorded:
        return apply_with(state, event, None)
    sequence = event["sequence"]
    if sequence < state.next_sequence:
        return state
    lifecycle = apply_host_event(state.lifecycle, event)
    return RunState(
        state.run_id, sequence + 1, state.surfaces, state.correlations, state.v1_surface, lifecycle
    )


def apply_with(
    state: RunState,
    event: RecordedEvent,
    kinds: Sequence[str] | None,
    correlation: Any = NOT_LOOKED_UP,
    surface: Any = NOT_LOOKED_UP,
    children: Any = NOT_LOOKED_UP,
) -> RunState:
    """``apply``, reusing what the caller already computed for this event: the message
    ``kinds``, what ``state`` holds for the event's correlationId (``correlation``) and v2
    surfaceId (``surface``; ``None`` when absent), and the surface's children graph after the
    event (``children``, app.core.admission.children). ``decide`` computed them for E2, the guard
    and the cycle check; on a large run a second trie walk each is a measurable share of the
    decision. Given what ``state`` holds, it is the fast twin of ``apply``
    (tests/core/test_fast_paths.py)."""
    sequence = event["sequence"]
    rec = Recorded(sequence, event["eventId"])
    recorded = event["payload"]
    envelope = recorded["envelope"]
    untrusted = recorded["trust"] == "untrusted"
    partial = envelope.get("partial")
    is_partial = (
        partial is not None and isinstance(partial, dict) and partial.get("isPartial") is True
    )
    node_id = envelope.get("nodeId")
    kind = event["type"]
    correlations = state.correlations
    correlation_id = envelope["correlationId"]
    old = correlations.get(correlation_id) if correlation is NOT_LOOKED_UP else correlation
    if old is None and partial is None:  # the common case: the first, complete emission (§2)
        entry = Correlation(kind, rec, True, EMPTY)  # = correlation_entry(None, kind, rec, None)
    else:
        entry = correlation_entry(old, kind, rec, partial)
    correlations = correlations.set(correlation_id, entry)
    surfaces, v1 = state.surfaces, state.v1_surface
    body = envelope.get("payload")
    if kind == SURFACE_KIND and isinstance(body, dict) and body.get("version") == "v0.9":
        sid = body["surfaceId"]
        if kinds is None:
            kinds = kinds_of(body["messages"])
        elif type(kinds) is not tuple:
            kinds = tuple(kinds)
        if surface is NOT_LOOKED_UP:
            surface = surfaces.get(sid)
        if children is NOT_LOOKED_UP:
            children = NO_CHILDREN if surface is None else surface.children
            if touches_graph(kinds):
                children = fold_children(children, body["messages"], kinds, check=False)[0]
        folded = _fold_surface(surface, kinds, untrusted, node_id, is_partial, rec, children)
        surfaces = surfaces.set(sid, folded)
    elif kind == SURFACE_KIND:
        old_nodes = frozenset() if v1 is None else v1.node_ids
        nodes = old_nodes | {node_id} if isinstance(node_id, str) else old_nodes
        v1 = V1Surface(rec, untrusted or (v1 is not None and v1.tainted), nodes)
    nxt = sequence + 1 if sequence >= state.next_sequence else state.next_sequence
    return RunState(state.run_id, nxt, surfaces, correlations, v1, state.lifecycle)
