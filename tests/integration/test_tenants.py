"""Tenant-scoped tokens on real workers (issue 18 items 2, 3 and 5; docs/http.md, "Tenant-scoped
tokens"): the cross-tenant matrix over every run route of the route table, the no existence
oracle, the listings filtered to the caller's tenants, and /metrics without run ids.

Two workers of one deployment with a tokens file: ``a-all`` (tenant ``alpha``, every right),
``a-no-<right>`` (``alpha``, every right but one, for each right in turn), ``b-all``
(``beta``, every right) and ``l-all`` (``local``, where POST /runs creates, every right: the
one-tenant credential the suite's v2-run-list legs run with), beside the plain
``A2UI_STREAM_HTTP_TOKENS`` one (every tenant, every right). The matrix iterates
``app.core.http.routes.ROUTES``, so a new run route is covered without an edit here."""

from __future__ import annotations

import asyncio
import hashlib
import json
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.core.http.principals import RIGHTS
from app.core.http.routes import ROUTES, Route
from app.core.http.wire_ids import project_run_id
from app.devtools.fault_kit import WorkerProcess, apply_topics
from app.shell.cli.broker import Broker
from app.shell.settings import Settings, load_settings
from tests.core.test_http_snapshot import RUN_ID, TENANT_ID, V2_PROPERTIES, V2_REQUIRED, WORKFLOW_ID
from tests.integration.http_kit import (
    TOKEN,
    Builder,
    Http,
    Reply,
    create_msg,
    run_on,
    runs_path,
    send_raw,
    v2,
    wait_http,
)

pytestmark = [pytest.mark.broker, pytest.mark.slow]

PARTITIONS = 3
SEAM_V2 = "/conformance/seams/sample/a2ui/emit-surface"
TOKENS = {name: f"{name}-{uuid.uuid4().hex}" for name in ("a-all", "b-all", "l-all")} | {
    f"a-no-{right}": f"a-no-{right}-{uuid.uuid4().hex}" for right in RIGHTS
}
# every run route of the table (the path's runId is authorized before anything reads the run)
RUN_ROUTES = [r for r in ROUTES if r.scope == "run"]


def _tokens_file(path: Path) -> Path:
    def entry(name: str, tenant: str, rights: tuple[str, ...]) -> dict[str, object]:
        digest = hashlib.sha256(TOKENS[name].encode()).hexdigest()
        return {"name": name, "token_sha256": digest, "tenants": [tenant], "rights": list(rights)}

    principals = [entry("a-all", "alpha", RIGHTS), entry("b-all", "beta", RIGHTS)]
    principals.append(entry("l-all", "local", RIGHTS))
    principals += [
        entry(f"a-no-{right}", "alpha", tuple(r for r in RIGHTS if r != right)) for right in RIGHTS
    ]
    path.write_text(json.dumps({"principals": principals}))
    return path


def _settings() -> Settings:
    unique = uuid.uuid4().hex[:8]
    return replace(
        load_settings({}),
        topic_prefix=f"ht{unique}.",
        app_id=f"a2ui-http-tenants-{unique}",
        partitions=PARTITIONS,
        fast_groups=True,
    )


@pytest.fixture(scope="module")
def workers(broker: Broker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """The base URLs of two workers of one deployment, seams on, with the tokens file."""
    tmp = tmp_path_factory.mktemp("tenants")
    settings = _settings()
    asyncio.run(apply_topics(broker, settings))
    env = {
        "A2UI_STREAM_HTTP_TOKENS": TOKEN,
        "A2UI_STREAM_HTTP_TOKENS_FILE": str(_tokens_file(tmp / "tokens.json")),
        "A2UI_STREAM_SEAMS": "1",
        "A2UI_STREAM_FLOOR": "2",
    }
    procs = [WorkerProcess(broker, settings, f"t{i}", tmp, env) for i in range(2)]
    for proc in procs:
        proc.start()
    try:
        yield [wait_http(proc).base for proc in procs]
    finally:
        for proc in procs:
            proc.stop()


def _as(base: str, name: str) -> Http:
    return Http(base, token=TOKENS[name])


def _record(http: Http, run: str) -> None:
    b = Builder()
    envelope = b.envelope(v2(b.sid("t"), [create_msg()]))
    reply = http.post(runs_path(run, "/envelopes"), envelope)
    assert reply.status == 201, reply.raw


def _path(route: Route, run: str) -> str:
    return route.path.replace("{runId}", project_run_id(run)).replace("{nodeId}", "gate")


def _call(base: str, token: str, route: Route, run: str, **headers: str) -> Reply:
    """The route on ``run`` with ``token``; a POST sends ``{}`` (nothing reads it when the
    caller is refused: the refusal comes before the body)."""
    method = route.methods[0]
    sent = {"Authorization": f"Bearer {token}", **headers}
    body = None
    if method == "POST":
        sent["Content-Type"] = "application/json"
        body = b"{}"
    return send_raw(base, method, _path(route, run), body, sent)


def _shape(reply: Reply) -> tuple[int, dict[str, str], bytes]:
    """Everything the caller sees but the Date: status, headers, body bytes."""
    headers = {k.lower(): v for k, v in reply.headers.items() if k.lower() != "date"}
    return reply.status, headers, reply.raw


@pytest.fixture(scope="module")
def runs(workers: list[str]) -> dict[str, object]:
    """Runs of alpha and beta on every partition, and the never-recorded 404 of one beta run
    taken from each worker BEFORE that run was recorded (the reference of "an unknown run")."""
    b_all = _as(workers[0], "b-all")
    beta = run_on({0}, PARTITIONS, tenant="beta")
    get_run = next(r for r in ROUTES if r.name == "get_run")
    # the same client as every comparison (urllib would add Connection: close to the answer)
    before = {base: _shape(_call(base, TOKENS["b-all"], get_run, beta)) for base in workers}
    assert all(status == 404 for status, _, _ in before.values()), before
    alpha_runs = [run_on({p}, PARTITIONS, tenant="alpha") for p in range(PARTITIONS)]
    beta_runs = [beta] + [run_on({p}, PARTITIONS, tenant="beta") for p in range(1, PARTITIONS)]
    for run in alpha_runs:
        _record(_as(workers[0], "a-all"), run)
    for run in beta_runs:
        _record(b_all, run)
    return {"alpha": alpha_runs, "beta": beta_runs, "before": before}


def test_the_matrix_covers_every_run_route_of_the_table() -> None:
    served_by_name = {r.name for r in RUN_ROUTES}
    assert {r.name for r in ROUTES if "{runId}" in r.path} == served_by_name
    assert {r.right for r in RUN_ROUTES} == {"read", "emit", "approve", "act"}


@pytest.mark.parametrize("route", RUN_ROUTES, ids=lambda r: r.name)
def test_a_foreign_run_answers_exactly_as_a_never_recorded_one(
    workers: list[str], runs: dict, route: Route
) -> None:
    """Token A (every right) on a run of B that exists answers, on every run route and through
    either worker (owner or not), byte for byte what a never-recorded run answers (the 404 B's
    own token got for that run before it was recorded): status, headers but the Date, body.
    No cursor and no body is read first: a bad Last-Event-ID and an empty body change nothing."""
    beta = runs["beta"][0]
    for base in workers:
        got = _call(base, TOKENS["a-all"], route, beta, **{"Last-Event-ID": "not-a-cursor"})
        assert _shape(got) == runs["before"][base], (base, got.raw)


@pytest.mark.parametrize("route", RUN_ROUTES, ids=lambda r: r.name)
def test_no_existence_oracle_a_recorded_and_a_never_recorded_run_of_b_answer_alike(
    workers: list[str], runs: dict, route: Route
) -> None:
    """For token A, a run of B that exists and a runId of B never recorded answer the same
    (but for the runId the message names); so does a token no principal holds (401)."""
    recorded, never = runs["beta"][1], f"beta/run-{uuid.uuid4().hex}"
    for base in workers:
        for token in (TOKENS["a-all"], TOKENS["a-no-read"], "no-such-token"):
            one = _shape(_call(base, token, route, recorded))
            other = _shape(_call(base, token, route, never))
            assert one[0] in (401, 404), one
            assert one[:2] == other[:2]
            assert one[2] == other[2].replace(never.encode(), recorded.encode())


@pytest.mark.parametrize("route", RUN_ROUTES, ids=lambda r: r.name)
def test_a_missing_right_is_403_on_the_callers_own_run(
    workers: list[str], runs: dict, route: Route
) -> None:
    """Token A without the route's right: 403 forbidden on A's run, the same as on a runId of
    A never recorded; B's token on A's run answers as an unknown run."""
    alpha, never = runs["alpha"][0], f"alpha/run-{uuid.uuid4().hex}"
    lacking = TOKENS[f"a-no-{route.right}"]
    for base in workers:
        got = _call(base, lacking, route, alpha)
        assert (got.status, got.body["error"]) == (403, "forbidden"), got.raw
        assert route.right in got.body["message"] and alpha not in got.raw.decode()
        assert _shape(got) == _shape(_call(base, lacking, route, never))
        foreign = _call(base, TOKENS["b-all"], route, alpha)
        assert (foreign.status, foreign.body["error"]) == (404, "not_found"), foreign.raw


def test_a_token_with_the_right_reads_its_own_run(workers: list[str], runs: dict) -> None:
    for base in workers:
        for name in [f"a-no-{r}" for r in RIGHTS if r != "read"]:
            for run in runs["alpha"]:
                assert _as(base, name).get(runs_path(run)).status == 200


def test_the_listing_and_the_viewer_index_show_only_the_callers_tenants(
    workers: list[str], runs: dict
) -> None:
    """GET /runs and /ui/api/runs through either worker (each gathers the other owner's
    rows, asked with the caller's Authorization): A sees every alpha run and nothing of beta;
    B the reverse; the plain token both; a token without read is 403."""
    alpha, beta = set(runs["alpha"]), set(runs["beta"])
    for base in workers:
        for name, mine in (("a-all", alpha), ("b-all", beta), ("a-no-emit", alpha)):
            listed = _as(base, name).get("/runs?limit=200")
            assert listed.status == 200, listed.raw
            assert {r["runId"] for r in listed.body["runs"]} == mine
            index = _as(base, name).get("/ui/api/runs")
            assert index.status == 200, index.raw
            assert {r["runId"] for r in index.body["runs"]} == mine
            assert index.body["total"] == len(mine)
        everything = Http(base).get("/runs?limit=200")
        assert {r["runId"] for r in everything.body["runs"]} >= alpha | beta
        for path in ("/runs", "/ui/api/runs"):
            refused = _as(base, "a-no-read").get(path)
            assert (refused.status, refused.body["error"]) == (403, "forbidden"), refused.raw


# -- the suite's v2-run-list (RFC 0182; runs.md §List), leg by leg --------------------------------

NOOP = "conformance-noop"
MAX_PAGES, TAIL_PAGES = 50, 2  # the suite's walk: conformance/src/lib/run-list-walk.ts


def _page_problems(page: object, size: int) -> list[str]:
    """Why a page is not a run-list-response.schema.json document (closed {runs, nextCursor?},
    each run a closed v2 RunSnapshot with a tenant-bound runId: the rules pinned in
    tests/core/test_http_snapshot.py), or longer than ``size``; empty when it is both."""
    if not isinstance(page, dict) or not isinstance(page.get("runs"), list):
        return [f"not {{runs: [...]}}: {page!r:.200}"]
    problems = [f"root key {k!r}" for k in set(page) - {"runs", "nextCursor"}]
    cursor = page.get("nextCursor", "x")
    if not isinstance(cursor, str) or not 1 <= len(cursor) <= 2048:
        problems.append(f"nextCursor {cursor!r}")
    if len(page["runs"]) > size:
        problems.append(f"{len(page['runs'])} runs on a page of at most {size}")
    for run in page["runs"]:
        keys = set(run) if isinstance(run, dict) else set()
        if not V2_REQUIRED <= keys <= V2_PROPERTIES:
            problems.append(f"snapshot keys {sorted(keys)}")
            continue
        if not RUN_ID.fullmatch(run["runId"]):
            problems.append(f"runId {run['runId']!r} is not tenant-bound (ids.schema.json)")
        if not WORKFLOW_ID.fullmatch(run["workflowId"]):
            problems.append(f"workflowId {run['workflowId']!r}")
        if not TENANT_ID.fullmatch(run["owner"]["tenant"]):
            problems.append(f"owner.tenant {run['owner']['tenant']!r}")
    return problems


def _walk(
    http: Http, query: dict[str, str], size: int, want: set[str]
) -> tuple[list[str], list[dict]]:
    """The suite's walk: pages of ``size`` from the first, until every wanted runId was seen,
    then ``TAIL_PAGES`` more (a minted cursor is followed) or the last page."""
    ids: list[str] = []
    pages: list[dict] = []
    cursor, tail = None, None
    for _ in range(MAX_PAGES + TAIL_PAGES):
        params = {**query, "limit": str(size)} | ({} if cursor is None else {"cursor": cursor})
        reply = http.get("/runs?" + urllib.parse.urlencode(params))
        assert reply.status == 200, reply.raw[:300]
        pages.append(reply.body)
        ids += [r["runId"] for r in reply.body["runs"]]
        if tail is None and want <= set(ids):
            tail = TAIL_PAGES
        elif tail is not None:
            tail -= 1
        cursor = reply.body.get("nextCursor")
        if cursor is None or tail == 0:
            break
    return ids, pages


def _create(http: Http) -> str:
    created = http.post("/runs", {"workflowId": NOOP})
    assert created.status == 201, created.raw[:300]
    return str(created.body["runId"])


def test_the_suites_v2_run_list_legs_with_a_token_of_one_tenant(
    workers: list[str], runs: dict
) -> None:
    """v2-run-list through either worker, as ``l-all`` (tenant ``local``) while alpha's and
    beta's runs are recorded, and ``local`` runs whose ids are not v2-bound (a v1 bare id, an
    opaque segment under 16 characters) are among the newest: v2 discovery's runList record
    (maxPageSize an integer >= 1); two created runs appear, the later first; every page is a
    RunListResponse of at most maxPageSize; every runId has the created runs' tenant; a
    cursor the host did not mint is 400 validation_error; the workflowId filter (advertised)
    lists only conformance-noop runs, the one just created among them."""
    local = Http(workers[0], token=TOKENS["l-all"])
    for unbound in (f"v1run{uuid.uuid4().hex[:8]}", f"local/short{uuid.uuid4().hex[:4]}"):
        _record(local, unbound)
        assert local.get(runs_path(unbound)).status == 200  # readable, and local's
    for base in workers:
        http = Http(base, token=TOKENS["l-all"], version="2.0")
        doc = Http(base, token=None, version="2.0").get("/.well-known/openwop").body
        record = doc["runList"]
        size = record["maxPageSize"]
        assert isinstance(size, int) and not isinstance(size, bool) and size >= 1, record
        a, b = _create(http), _create(http)
        ids, pages = _walk(http, {}, size, {a, b})
        problems = [p for page in pages for p in _page_problems(page, size)]
        assert problems == [], problems[:5]
        assert a in ids and b in ids, (a, b, len(ids))
        assert ids.index(b) < ids.index(a)  # newest first
        tenant = a.split("/")[0]
        assert [i for i in ids if i.split("/")[0] != tenant or "/" not in i] == []
        foreign = http.get("/runs?cursor=openwop-conformance-not-a-cursor")
        assert (foreign.status, foreign.body["error"]) == (400, "validation_error"), foreign.raw
        assert "workflowId" in record["filters"]
        c = _create(http)
        ids, pages = _walk(http, {"workflowId": NOOP}, size, {c})
        assert [r for page in pages for r in page["runs"] if r["workflowId"] != NOOP] == []
        assert c in ids


def test_a_forwarded_request_is_authorized_again_at_the_owner(
    workers: list[str], runs: dict
) -> None:
    """A request marked as forwarded (as a worker sends it, with the caller's Authorization)
    is authorized by the worker that receives it: a foreign run is still an unknown one, and
    a forwarded listing lists the caller's tenants only."""
    forwarded = {"A2UI-Stream-Forwarded": "elsewhere"}
    for base in workers:
        a_all = _as(base, "a-all")
        reply = a_all.get(runs_path(runs["beta"][0]), headers=forwarded)
        assert (reply.status, reply.body["error"]) == (404, "not_found"), reply.raw
        page = a_all.get("/runs?limit=200", headers=forwarded).body
        assert all(row[1].startswith("alpha/") for row in page["rows"]), page


def test_the_seams_authorize_the_run_their_body_names(workers: list[str], runs: dict) -> None:
    b = Builder()
    envelope = b.envelope(v2(b.sid("seam"), [create_msg()]))
    for base in workers:
        body = json.dumps({"runId": runs["beta"][0], "envelope": envelope}).encode()
        sent = {"Authorization": f"Bearer {TOKENS['a-all']}", "Content-Type": "application/json"}
        foreign = send_raw(base, "POST", SEAM_V2, body, sent)
        assert _shape(foreign) == runs["before"][base], foreign.raw
        lacking = _as(base, "a-no-emit").post(
            SEAM_V2, {"runId": runs["alpha"][0], "envelope": envelope}
        )
        assert (lacking.status, lacking.body["error"]) == (403, "forbidden"), lacking.raw


def test_create_needs_emit_in_the_tenant_it_creates_in(workers: list[str]) -> None:
    """POST /runs records its run in the default tenant (``local/...``): a token of alpha
    cannot create there (403); the plain token can."""
    for base in workers:
        for path in ("/runs", "/v1/runs"):
            refused = _as(base, "a-all").post(path, {"workflowId": "tenants"})
            assert (refused.status, refused.body["error"]) == (403, "forbidden"), refused.raw
    created = Http(workers[0]).post("/runs", {"workflowId": "tenants"})
    assert created.status == 201 and created.body["runId"].startswith("local/"), created.raw


def test_metrics_carry_no_run_id(workers: list[str], runs: dict) -> None:
    """/metrics is open (no token): it names no run, of any tenant."""
    for base in workers:
        text = Http(base, token=None).get("/metrics").raw.decode()
        assert "a2ui_" in text
        for run in runs["alpha"] + runs["beta"]:
            assert run not in text and project_run_id(run) not in text
        assert "alpha" not in text and "beta" not in text
