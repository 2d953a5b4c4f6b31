"""The viewer's handlers (app.shell.http.viewer) over a fake run index and a temporary build."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from app.shell.http.viewer import ViewerPages
from app.shell.worker.run_store import RunSummary


class FakeIndex:
    """The run index's summaries of the partitions it serves (app.shell.worker.run_index)."""

    def __init__(self) -> None:
        self.partitions = 2
        self.ready_partitions: set[int] = set()
        self.runs: list[RunSummary] = []

    def summaries(self) -> list[RunSummary]:
        return self.runs


class FakeOwners:
    def __init__(self, owned: set[int], others: dict[str, str], claimed: set[int]) -> None:
        self.owned, self.others, self._claimed = owned, others, claimed

    def owner_urls(self) -> dict[str, str]:
        return self.others

    def claimed(self) -> set[int]:
        return self._claimed


class FakeGatherer:
    """Another owner's answer to the forwarded listing."""

    def __init__(self, answers: dict[str, object]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, dict[str, str]]] = []

    async def get_json(self, origin: str, path: str, headers: dict[str, str]) -> object:
        self.asked.append((origin, headers))
        return self.answers.get(origin)


@pytest.fixture
def dist(tmp_path: Path) -> Path:
    (tmp_path / "assets").mkdir()
    (tmp_path / "index.html").write_text("<!doctype html><a2ui-viewer></a2ui-viewer>")
    (tmp_path / "assets" / "viewer.js").write_text("export {};")
    (tmp_path / "secret.py").write_text("no")
    return tmp_path


def _body(response: web.StreamResponse) -> bytes:
    """The bytes of a response the pages answered in full (not streamed)."""
    assert isinstance(response, web.Response) and isinstance(response.body, bytes), response
    return response.body


def _pages(dist: Path, *, auth: bool = False) -> tuple[ViewerPages, FakeIndex]:
    index = FakeIndex()
    return ViewerPages(index, auth=auth, tokens=("t0k",), dist=dist), index


async def test_every_page_is_the_app_with_a_strict_policy(dist: Path) -> None:
    pages, _ = _pages(dist)
    for path in ("/ui/", "/ui/runs/acme~2Fr1"):
        response = await pages.page(make_mocked_request("GET", path))
        assert response.status == 200 and b"a2ui-viewer" in _body(response)
        assert "default-src 'none'" in response.headers["Content-Security-Policy"]
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    redirect = await pages.redirect(make_mocked_request("GET", "/ui"))
    assert (redirect.status, redirect.headers["Location"]) == (302, "/ui/")


async def test_assets_by_name_only(dist: Path) -> None:
    pages, _ = _pages(dist)
    ok = await pages.asset(
        make_mocked_request("GET", "/ui/assets/viewer.js", match_info={"name": "viewer.js"})
    )
    assert ok.status == 200 and ok.headers["Content-Type"].startswith("text/javascript")
    for name in ("../secret.py", "..", "missing.js", "index.html"):
        request = make_mocked_request("GET", "/ui/assets/x", match_info={"name": name})
        assert (await pages.asset(request)).status == 404, name


async def test_missing_build_answers_how_to_build(tmp_path: Path) -> None:
    pages, _ = _pages(tmp_path / "nothing-here")
    response = await pages.page(make_mocked_request("GET", "/ui/"))
    assert response.status == 503
    text = _body(response).decode()
    assert "make viewer" in text and "npm ci" in text


async def test_runs_listing_and_its_bearer_rule(dist: Path) -> None:
    pages, index = _pages(dist, auth=True)
    index.runs = [
        RunSummary("acme/r1", 0, 1, 2, "running", 5000),
        RunSummary("acme/r2", 1, 0, 1, "completed", 3000),
    ]
    index.ready_partitions = {0, 1}
    denied = await pages.runs(make_mocked_request("GET", "/ui/api/runs"))
    assert denied.status == 401 and "WWW-Authenticate" in denied.headers
    wrong = make_mocked_request("GET", "/ui/api/runs", headers={"Authorization": "Bearer nope"})
    assert (await pages.runs(wrong)).status == 401
    right = make_mocked_request("GET", "/ui/api/runs", headers={"Authorization": "Bearer t0k"})
    response = await pages.runs(right)
    body = orjson.loads(_body(response))
    assert response.status == 200 and body["ready"] is True and body["total"] == 2
    assert [(r["runId"], r["lastSequence"], r["status"]) for r in body["runs"]] == [
        ("acme/r1", 1, "running"),
        ("acme/r2", 0, "completed"),
    ]
    open_pages, open_index = _pages(dist, auth=False)  # the embedded mode: auth off
    assert (await open_pages.runs(make_mocked_request("GET", "/ui/api/runs"))).status == 200


async def test_the_listing_gathers_every_owners_runs(dist: Path) -> None:
    """Issue 15 item 2: this worker lists its own partitions from its store and asks each
    other owner once (marked forwarded, with the caller's token); the newest come first."""
    index = FakeIndex()
    index.partitions = 3
    index.runs = [RunSummary("acme/here", 0, 4, 5, "running", 2000)]
    index.ready_partitions = {0}
    other = {
        "runs": [
            {
                "runId": "acme/there",
                "lastSequence": 0,
                "status": "completed",
                "isTerminal": True,
                "events": 1,
                "updatedMs": 9000,
            }
        ],
        "total": 1,
        "ready": True,
    }
    gatherer = FakeGatherer({"http://127.0.0.1:7001": other})
    owners = FakeOwners({0}, {"inst-b": "http://127.0.0.1:7001"}, {0, 1, 2})
    pages = ViewerPages(
        index,
        auth=True,
        tokens=("t0k",),
        dist=dist,
        owners=owners,
        gatherer=gatherer,
        worker_id="w-a",
    )
    request = make_mocked_request("GET", "/ui/api/runs", headers={"Authorization": "Bearer t0k"})
    body = orjson.loads(_body(await pages.runs(request)))
    assert [r["runId"] for r in body["runs"]] == ["acme/there", "acme/here"]
    assert body["total"] == 2 and body["ready"] is True
    ((origin, headers),) = gatherer.asked
    assert origin == "http://127.0.0.1:7001"
    assert headers["Authorization"] == "Bearer t0k" and headers["A2UI-Stream-Forwarded"] == "w-a"
    # an owner that does not answer, or a partition nobody claims: a partial list, not ready
    gatherer.answers.clear()
    body = orjson.loads(_body(await pages.runs(request)))
    assert [r["runId"] for r in body["runs"]] == ["acme/here"] and body["ready"] is False
    # a forwarded listing answers with this worker's own runs only
    forwarded = make_mocked_request(
        "GET",
        "/ui/api/runs",
        headers={"Authorization": "Bearer t0k", "A2UI-Stream-Forwarded": "w-b"},
    )
    gatherer.asked.clear()
    body = orjson.loads(_body(await pages.runs(forwarded)))
    assert [r["runId"] for r in body["runs"]] == ["acme/here"] and gatherer.asked == []
