"""The run listing ``GET /runs`` (v2, RFC 0182; openwop-client's ``runs_list``): the query,
the order, the page and its cursor.

Role: pure. The shell gathers each owner's rows (every owner lists its own partitions) and
calls ``merge``; the rules are here:

- Order: newest first, by the broker timestamp of the run's last recorded event (the run
  store's summary), ties by runId, so the order is total and the same on every worker.
- Page: at most ``limit`` runs (``DEFAULT_LIMIT`` when absent, 1..``MAX_LIMIT``); a page that
  is not the last carries ``nextCursor``, absent on the last (run-list-response.schema.json).
- Cursor: keyset, not offset: it names the last row's key, and the next page is the rows
  after that key in the order. Every owner answers its own first ``limit`` rows after the key,
  so the merged first ``limit`` is the deployment's. A run that records an event between two
  pages moves to the front (its key is newer) and is not listed again on the later pages.
  The cursor also carries the filters it was minted under; a cursor that does not decode to
  this shape, or that came with other filters, is ``400 validation_error`` (the schema: a
  host MUST refuse a cursor it did not mint).
- Filters: ``status`` (a v2 RunStatus) and ``workflowId``, applied by each owner.
- Rows: only runs whose runId is v2 tenant-bound (``listable``). runs.md §List: every runId in
  the list is bound, and identity.md §5: "Ids in documents and bodies are bound, always". A
  run recorded under a v1 bare id or an opaque segment under 16 characters (the admission
  grammar, app.core.admission.identifiers, admits both) has no bound form, so the v2 listing leaves
  it out; it stays readable at ``GET /runs/{runId}`` and in the viewer.

May import: the standard library and app.core.http.errors.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from app.core.http.errors import HttpError, error

__all__ = [
    "DEFAULT_LIMIT",
    "FILTERS",
    "MAX_LIMIT",
    "RUN_STATUSES",
    "ListQuery",
    "Row",
    "listable",
    "merge",
    "mint_cursor",
    "parse_list_query",
    "rows_after",
]

DEFAULT_LIMIT = 50
MAX_LIMIT = 200  # advertised as v2 discovery's runList.maxPageSize (app.core.http.discovery)
# The exact-match filters ``parse_list_query`` reads, advertised as runList.filters (runs.md
# §List: a filter is honoured where the family names it).
FILTERS: tuple[str, ...] = ("workflowId", "status")
# v2 RunSnapshot.status (openapi RunStatus): a filter outside it is a client error.
RUN_STATUSES: frozenset[str] = frozenset(
    {
        "pending",
        "running",
        "paused",
        "waiting-approval",
        "waiting-input",
        "waiting-external",
        "completed",
        "failed",
        "cancelling",
        "cancelled",
    }
)
# identity.md §5: the tenant-bound id grammar (runId), the opaque segment host-minted.
_BOUND_RUN_ID = re.compile(r"(anon:)?[A-Za-z0-9._~-]{1,128}/[A-Za-z0-9._~-]{16,128}")
_CURSOR_VERSION = 1
_MAX_CURSOR = 2048  # run-list-response.schema.json nextCursor maxLength


def listable(run_id: str) -> bool:
    """Whether the v2 listing may show the run: its runId is tenant-bound (identity.md §5)."""
    return _BOUND_RUN_ID.fullmatch(run_id) is not None


class Row(NamedTuple):
    """One listed run: its order key and its snapshot document."""

    updated_ms: int
    run_id: str
    snapshot: dict[str, Any]

    @property
    def key(self) -> tuple[int, str]:
        """The row's place in the list: the most recently updated first, then by runId."""
        return (-self.updated_ms, self.run_id)


@dataclass(frozen=True, slots=True)
class ListQuery:
    """One page's query of the run list: its size, the cursor after which it starts, filters."""

    limit: int = DEFAULT_LIMIT
    after: tuple[int, str] | None = None  # (updated_ms, runId) of the previous page's last row
    workflow_id: str | None = None
    status: str | None = None


def _invalid(message: str, field: str) -> HttpError:
    return error("validation_error", message, {"field": field})


def parse_list_query(
    limit: str | None, cursor: str | None, workflow_id: str | None, status: str | None
) -> ListQuery | HttpError:
    """The query of ``GET /runs?limit=&cursor=&workflowId=&status=``, or the 400 to answer."""
    size = DEFAULT_LIMIT
    if limit is not None:
        if not limit.isascii() or not limit.isdigit() or not 1 <= int(limit) <= MAX_LIMIT:
            return _invalid(f"limit is an integer from 1 to {MAX_LIMIT}", "limit")
        size = int(limit)
    if status is not None and status not in RUN_STATUSES:
        return _invalid(f"status is one of {', '.join(sorted(RUN_STATUSES))}", "status")
    if workflow_id is not None and not 1 <= len(workflow_id) <= 256:
        return _invalid("workflowId is 1 to 256 characters", "workflowId")
    after = None
    if cursor is not None:
        decoded = _decode(cursor)
        if decoded is None or decoded[1] != (workflow_id, status):
            return _invalid(
                "not a cursor this host minted for these filters: pass nextCursor as it was "
                "given, with the same workflowId and status",
                "cursor",
            )
        after = decoded[0]
    return ListQuery(size, after, workflow_id, status)


def mint_cursor(last: Row, query: ListQuery) -> str:
    """The ``nextCursor`` after ``last`` under ``query``'s filters."""
    doc = [_CURSOR_VERSION, last.updated_ms, last.run_id, query.workflow_id, query.status]
    raw = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: str) -> tuple[tuple[int, str], tuple[str | None, str | None]] | None:
    if not 1 <= len(cursor) <= _MAX_CURSOR or not cursor.isascii():
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        doc = json.loads(raw)
    except (binascii.Error, ValueError):
        return None
    if not isinstance(doc, list) or len(doc) != 5 or doc[0] != _CURSOR_VERSION:
        return None
    _, updated, run_id, workflow, status = doc
    if type(updated) is not int or not isinstance(run_id, str) or not run_id:
        return None
    if not all(v is None or isinstance(v, str) for v in (workflow, status)):
        return None
    return (updated, run_id), (workflow, status)


def rows_after(keys: Iterable[tuple[int, str]], query: ListQuery) -> list[tuple[int, str]]:
    """The ``(updated_ms, runId)`` of the runs after the query's cursor, in listing order."""
    ordered = sorted(keys, key=lambda k: (-k[0], k[1]))
    if query.after is None:
        return ordered
    bound = (-query.after[0], query.after[1])
    return [k for k in ordered if (-k[0], k[1]) > bound]


def merge(pages: Iterable[tuple[list[Row], bool]], query: ListQuery) -> dict[str, Any]:
    """The RunListResponse from every owner's page (its first ``limit`` rows after the cursor,
    and whether it has more): the first ``limit`` of them all, and ``nextCursor`` when more
    remain anywhere."""
    rows: dict[str, Row] = {}
    more = False
    for owned, has_more in pages:
        more = more or has_more
        for row in owned:
            rows.setdefault(row.run_id, row)  # a partition answered twice (a handover): once
    ordered = sorted(rows.values(), key=lambda r: r.key)
    page = ordered[: query.limit]
    body: dict[str, Any] = {"runs": [r.snapshot for r in page]}
    if page and (more or len(ordered) > query.limit):
        body["nextCursor"] = mint_cursor(page[-1], query)
    return body
