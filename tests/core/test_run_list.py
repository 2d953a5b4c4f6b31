"""GET /runs (RFC 0182): the query, the cursor and the merge of every owner's page."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.http.errors import HttpError
from app.core.http.run_list import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    ListQuery,
    Row,
    listable,
    merge,
    mint_cursor,
    parse_list_query,
    rows_after,
)


@pytest.mark.parametrize(
    ("run_id", "listed"),
    [
        ("local/0123456789abcdef0123456789abcdef", True),  # what POST /runs mints
        ("conf/run-0123456789ab", True),  # an opaque of 16
        ("anon:9f3c/run-0123456789ab", True),  # identity.md §5: anon: tenants
        ("conf/run-012345678", False),  # an opaque of 15
        ("demo-run", False),  # a v1 bare id
        ("fork-0123456789abcdef0123456789abcdef", False),  # a bare run's fork child
        ("a:b/run-0123456789abcdef", False),  # a colon in the tenant other than anon:
        ("local/" + "x" * 129, False),
        ("local/run-0123456789ab\n", False),
    ],
)
def test_the_v2_listing_lists_only_tenant_bound_runs(run_id: str, listed: bool) -> None:
    """runs.md §List, identity.md §5: every runId in a v2 document is tenant-bound."""
    assert listable(run_id) is listed


def _row(updated: int, run_id: str) -> Row:
    return Row(updated, run_id, {"runId": run_id})


@pytest.mark.parametrize(
    ("limit", "cursor", "workflow", "status", "field"),
    [
        ("0", None, None, None, "limit"),
        (str(MAX_LIMIT + 1), None, None, None, "limit"),
        ("-1", None, None, None, "limit"),
        ("ten", None, None, None, "limit"),
        ("١", None, None, None, "limit"),  # a non-ASCII digit
        (None, None, None, "done", "status"),
        (None, None, "", None, "workflowId"),
        (None, "not-a-cursor", None, None, "cursor"),
        (None, "", None, None, "cursor"),
        (None, "W10", None, None, "cursor"),  # base64 of [] : valid JSON, not our shape
    ],
)
def test_a_bad_query_is_400_validation_error_naming_the_field(
    limit: str | None, cursor: str | None, workflow: str | None, status: str | None, field: str
) -> None:
    refused = parse_list_query(limit, cursor, workflow, status)
    assert isinstance(refused, HttpError)
    assert (refused.status, refused.body["error"]) == (400, "validation_error")
    assert refused.body["details"]["field"] == field


def test_the_defaults_and_a_minted_cursor_round_trip() -> None:
    assert parse_list_query(None, None, None, None) == ListQuery(DEFAULT_LIMIT)
    query = ListQuery(5, None, "wf", "running")
    cursor = mint_cursor(_row(17, "acme/r-1"), query)
    assert parse_list_query("5", cursor, "wf", "running") == ListQuery(
        5, (17, "acme/r-1"), "wf", "running"
    )


def test_a_cursor_is_refused_with_other_filters() -> None:
    cursor = mint_cursor(_row(17, "r"), ListQuery(5, None, "wf", None))
    assert isinstance(parse_list_query(None, cursor, "other", None), HttpError)
    assert isinstance(parse_list_query(None, cursor, "wf", "running"), HttpError)


def test_rows_are_newest_first_ties_by_run_id_and_strictly_after_the_cursor() -> None:
    keys = [(5, "b"), (9, "z"), (5, "a"), (1, "c")]
    assert rows_after(keys, ListQuery()) == [(9, "z"), (5, "a"), (5, "b"), (1, "c")]
    assert rows_after(keys, ListQuery(after=(5, "a"))) == [(5, "b"), (1, "c")]


def test_the_last_page_has_no_next_cursor() -> None:
    body = merge([([_row(2, "a")], False), ([_row(1, "b")], False)], ListQuery(limit=2))
    assert body == {"runs": [{"runId": "a"}, {"runId": "b"}]}
    assert merge([([], False)], ListQuery()) == {"runs": []}


def test_a_run_answered_by_two_owners_is_listed_once() -> None:
    body = merge([([_row(2, "a")], False), ([_row(2, "a")], False)], ListQuery())
    assert body == {"runs": [{"runId": "a"}]}


@given(
    st.lists(
        st.tuples(st.integers(0, 20), st.integers(0, 2)), min_size=0, max_size=40, unique=False
    ),
    st.integers(1, 7),
)
def test_walking_the_cursor_lists_every_run_once_in_order(
    runs: list[tuple[int, int]], limit: int
) -> None:
    """The law: with the runs spread over three owners, each answering its own first
    ``limit`` rows after the cursor, walking nextCursor yields every run exactly once, newest
    first, in pages of at most ``limit``."""
    rows = [(_row(updated, f"r{i}"), owner) for i, (updated, owner) in enumerate(runs)]
    expected = [r.run_id for r, _ in sorted(rows, key=lambda ro: ro[0].key)]
    walked: list[str] = []
    cursor: str | None = None
    for _ in range(len(rows) + 2):
        query = parse_list_query(str(limit), cursor, None, None)
        assert isinstance(query, ListQuery)
        pages = []
        for owner in range(3):
            mine = {r.run_id: r for r, o in rows if o == owner}
            after = rows_after(((r.updated_ms, r.run_id) for r in mine.values()), query)
            pages.append(([mine[k[1]] for k in after[:limit]], len(after) > limit))
        body = merge(pages, query)
        assert len(body["runs"]) <= limit
        walked += [r["runId"] for r in body["runs"]]
        cursor = body.get("nextCursor")
        if cursor is None:
            break
    assert walked == expected
