"""The one-pass ``kinds_and_cross_field`` equals the two-pass definition it replaces."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.admission.cross_field import check_cross_field, kinds_and_cross_field
from app.core.admission.fold import kinds_of
from app.core.common.examples import BASIC_CATALOG

_KINDS = ("createSurface", "updateComponents", "updateDataModel", "deleteSurface")
_SIDS = st.sampled_from(["s", "t", "", 7, None])
_CATALOGS = st.sampled_from([BASIC_CATALOG, "https://example.com/other.json", None])


@st.composite
def _message(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from([None, "x", [], {"version": "v0.9"}]))
    kind = draw(st.sampled_from(_KINDS))
    body: dict[str, Any] = {}
    sid = draw(_SIDS)
    if sid is not None:
        body["surfaceId"] = sid
    if kind == "createSurface":
        catalog = draw(_CATALOGS)
        if catalog is not None:
            body["catalogId"] = catalog
    message: dict[str, Any] = {"version": "v0.9", kind: body}
    if draw(st.booleans()) and draw(st.integers(0, 4)) == 0:
        message[draw(st.sampled_from(_KINDS))] = {}  # two kinds in one message
    return message


@settings(max_examples=400, deadline=None)
@given(sid=_SIDS, catalog=_CATALOGS, messages=st.lists(_message(), min_size=1, max_size=6))
def test_one_pass_equals_kinds_then_cross_field(sid: Any, catalog: Any, messages: list) -> None:
    payload: dict[str, Any] = {"version": "v0.9", "messages": messages}
    if sid is not None:
        payload["surfaceId"] = sid
    if catalog is not None:
        payload["catalogId"] = catalog
    kinds, violation = kinds_and_cross_field(payload)
    assert kinds == kinds_of(messages)
    assert violation == check_cross_field(payload, kinds)
