"""The run listing over HTTP: ``GET /runs`` (RFC 0182; ?limit, ?cursor, ?workflowId,
?status), gathered from every partition's owner (issue 15 item 2, issue 18; docs/http.md).

Shell module. ``RunListing`` (one per ``HttpApi``) answers one page of the deployment's runs:
this worker's rows of the partitions it owns and has read, and every other owner's, asked once
each through ``app.shell.http.forward`` (``owner_page``/``read_owner_page`` are the wire form
of that answer). The decisions (the query, the order, the merge) are ``app.core.http.run_list``'s.
Imports the core, ``app.shell.http.responses``, ``app.shell.http.run_reads.run_doc``;
``app.shell.http.api`` for its type only.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from aiohttp import web

from app.core.http.errors import HttpError
from app.core.http.principals import Principal, may, tenant_of
from app.core.http.run_list import ListQuery, Row, listable, merge, parse_list_query, rows_after
from app.core.http.snapshot import DEFAULT_TENANT
from app.core.runlog.ownership import FORWARDED_HEADER
from app.shell.http.responses import Call, error_response, json_response, unavailable
from app.shell.http.run_reads import run_doc

if TYPE_CHECKING:
    from app.shell.http.api import HttpApi

__all__ = ["RunListing", "owner_page", "read_owner_page"]


class RunListing:
    """The ``GET /runs`` handler of one ``HttpApi``."""

    def __init__(self, api: HttpApi) -> None:
        self.api = api

    async def list_runs(self, request: web.Request, call: Call) -> web.StreamResponse:
        """One page of the deployment's runs (app.core.http.run_list: newest first, keyset cursor)
        that the caller may read (issue 18: the ``read`` right, the rows of its tenants only;
        the dispatcher checked the right). Each owner lists the partitions it owns and has
        read; this worker asks every other owner once, with the caller's Authorization (a forwarded
        listing answers its own rows only), and answers only when the answers cover every
        partition: while one has no ready owner or its owner does not answer (a rebalance),
        503 with Retry-After after A2UI_STREAM_HTTP_WAIT_SECONDS, never a partial page."""
        api = self.api
        q = request.query
        query = parse_list_query(
            q.get("limit"), q.get("cursor"), q.get("workflowId"), q.get("status")
        )
        if isinstance(query, HttpError):
            return error_response(query)
        if FORWARDED_HEADER in request.headers:
            served = api.ownership.owned & api.index.ready_partitions
            rows, more = self._local_page(query, served, call.principal)
            return json_response(200, owner_page(rows, more, served))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + api.wait_seconds
        while True:
            gathered = await self._gather_pages(request, query, call.principal)
            if gathered is not None:
                return json_response(200, merge(gathered, query))
            remaining = deadline - loop.time()
            if remaining <= 0:
                return unavailable(
                    "the run listing could not read every partition (a partition has no ready "
                    "owner, or its owner did not answer)"
                )
            await api.ownership.changed(min(remaining, 0.05))

    async def _gather_pages(
        self, request: web.Request, query: ListQuery, principal: Principal
    ) -> list[tuple[list[Row], bool]] | None:
        """This worker's page and every other owner's, or None when together they do not
        cover every partition of the log. Each owner is asked with the caller's
        Authorization and lists only the tenants that caller may read (issue 18)."""
        api = self.api
        served = api.ownership.owned & api.index.ready_partitions
        pages = [self._local_page(query, served, principal)]
        covered = set(served)
        headers = api.forwarder.headers_of(request)
        origins = sorted(set(api.ownership.owner_urls().values()))
        answers = await asyncio.gather(
            *(api.forwarder.get_json(o, request.rel_url.raw_path_qs, headers) for o in origins)
        )
        for answer in answers:
            page = read_owner_page(answer)
            if page is not None:
                pages.append((page[0], page[1]))
                covered |= page[2]
        if not api.index.partitions or not covered >= set(range(api.index.partitions)):
            return None
        return pages

    def _local_page(
        self, query: ListQuery, served: set[int], principal: Principal
    ) -> tuple[list[Row], bool]:
        """The first ``query.limit`` rows of the partitions in ``served`` after the cursor
        that ``principal`` may read (issue 18: a run of another tenant is not listed, as if it
        did not exist) and whose runId is v2 tenant-bound (``listable``), and whether more
        follow. Filters on the tenant and the stored
        summary's status first (no run is loaded for them), then on the snapshot (workflowId
        is in the run's first events)."""
        index = self.api.index
        keys = {
            (s.updated_ms, s.run_id)
            for s in index.summaries()
            if s.partition in served
            and listable(s.run_id)
            and (query.status is None or s.status == query.status)
            and may(principal, "read", tenant_of(s.run_id, DEFAULT_TENANT))
        }
        rows: list[Row] = []
        for updated, run_id in rows_after(keys, query):
            run = index.get(run_id)
            if run is None:
                continue
            doc = run_doc(run, major=2)
            if query.workflow_id is not None and doc["workflowId"] != query.workflow_id:
                continue
            if query.status is not None and doc["status"] != query.status:
                continue
            if len(rows) == query.limit:
                return rows, True
            rows.append(Row(updated, run_id, doc))
        return rows, False


def owner_page(rows: list[Row], more: bool, served: set[int]) -> dict[str, Any]:
    """A forwarded listing's answer: this owner's rows with their order keys, whether it has
    more, and the partitions it listed (the gathering worker checks that all are covered)."""
    return {
        "rows": [[r.updated_ms, r.run_id, r.snapshot] for r in rows],
        "more": more,
        "partitions": sorted(served),
    }


def read_owner_page(answer: Any) -> tuple[list[Row], bool, set[int]] | None:
    """Another owner's ``owner_page``, or None when it did not answer one."""
    if not isinstance(answer, dict):
        return None
    rows, more, partitions = answer.get("rows"), answer.get("more"), answer.get("partitions")
    if not isinstance(rows, list) or not isinstance(more, bool) or not isinstance(partitions, list):
        return None
    read: list[Row] = []
    for row in rows:
        if not (isinstance(row, list) and len(row) == 3 and type(row[0]) is int):
            return None
        if not isinstance(row[1], str) or not isinstance(row[2], dict):
            return None
        read.append(Row(row[0], row[1], row[2]))
    if not all(type(p) is int for p in partitions):
        return None
    return read, more, set(partitions)
