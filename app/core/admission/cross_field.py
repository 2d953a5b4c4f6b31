"""The two v2 cross-field rules a schema cannot express (openwop-a2ui.md §4; ext README
§Cross-field rules; RFC 0209 §A.2), refused with ``envelope_invalid``:

- ``surface-id-equality``: every message body's ``surfaceId`` equals ``payload.surfaceId``;
- ``catalog-equality``: a ``createSurface.catalogId`` equals ``payload.catalogId``.

Messages are checked in order, (a) then (b) for each; the first violation is reported with
``details {rule, index}`` as the v2 reference host does. Runs only on a payload that already
passed the v2 branch.

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from app.core.admission.fold import MESSAGE_KINDS
from app.core.admission.refusal import Violation
from app.core.admission.rules import CATALOG_EQUALITY, SURFACE_ID_EQUALITY, Rule, refuse

__all__ = ["check_cross_field", "kinds_and_cross_field"]

_KIND_SET: Final = frozenset(MESSAGE_KINDS)


def _violation(rule: Rule, index: int, pointer: str, message: str, **extra: Any) -> Violation:
    return refuse(rule, pointer, message, {"rule": rule.id, "index": index, **extra})


def _surface_mismatch(index: int, kind: str, body: Mapping[str, Any], surface_id: Any) -> Violation:
    return _violation(
        SURFACE_ID_EQUALITY,
        index,
        f"/envelope/payload/messages/{index}/{kind}/surfaceId",
        f"surface-id-equality: message {index} ({kind}) targets surface "
        f"{body.get('surfaceId')!r} but the payload's surfaceId is {surface_id!r}; "
        "every message of one envelope must address payload.surfaceId",
        surfaceId=surface_id,
    )


def _catalog_mismatch(index: int, kind: str, body: Mapping[str, Any], catalog_id: Any) -> Violation:
    return _violation(
        CATALOG_EQUALITY,
        index,
        f"/envelope/payload/messages/{index}/{kind}/catalogId",
        f"catalog-equality: createSurface (message {index}) names catalog "
        f"{body.get('catalogId')!r} but the payload's catalogId is {catalog_id!r}",
        catalogId=catalog_id,
    )


def check_cross_field(payload: Mapping[str, Any], kinds: Sequence[str]) -> Violation | None:
    """The first cross-field violation of a v2 ``payload`` whose messages have ``kinds``
    (``app.core.admission.fold.kinds_of``), or None."""
    surface_id = payload.get("surfaceId")
    catalog_id = payload.get("catalogId")
    for index, (message, kind) in enumerate(zip(payload.get("messages", ()), kinds, strict=False)):
        if kind == "unknown":
            continue
        body = message[kind]
        if not isinstance(body, dict):
            continue
        if body.get("surfaceId") != surface_id:
            return _surface_mismatch(index, kind, body, surface_id)
        if kind == "createSurface" and body.get("catalogId") != catalog_id:
            return _catalog_mismatch(index, kind, body, catalog_id)
    return None


def kinds_and_cross_field(payload: Mapping[str, Any]) -> tuple[tuple[str, ...], Violation | None]:
    """``(kinds_of(payload["messages"]), check_cross_field(payload, kinds))`` in ONE pass over the
    messages: the admission decision needs both for every admitted v2 envelope, and a second
    Python loop over the messages is a measurable share of its budget (docs/admission.md)."""
    surface_id = payload.get("surfaceId")
    catalog_id = payload.get("catalogId")
    kinds: list[str] = []
    found: Violation | None = None
    for message in payload["messages"]:
        kind = "unknown"
        if isinstance(message, dict):  # as fold.kinds_of: the first key that is a kind
            for key in message:
                if key in _KIND_SET:
                    kind = key
                    break
        kinds.append(kind)
        if found is not None or kind == "unknown":
            continue
        body = message[kind]
        if not isinstance(body, dict):
            continue
        if body.get("surfaceId") != surface_id:
            found = _surface_mismatch(len(kinds) - 1, kind, body, surface_id)
        elif kind == "createSurface" and body.get("catalogId") != catalog_id:
            found = _catalog_mismatch(len(kinds) - 1, kind, body, catalog_id)
    return tuple(kinds), found
