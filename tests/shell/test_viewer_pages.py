"""The viewer's handlers (app.shell.viewer) over a fake run index and a temporary build."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
from aiohttp.test_utils import make_mocked_request

from app.shell.run_index import LoggedEvent, RunLog
from app.shell.viewer import ViewerPages


class FakeIndex:
    def __init__(self) -> None:
        self.runs: dict[str, RunLog] = {}
        self.ready = asyncio.Event()


def _event(sequence: int, appended_ms: int) -> LoggedEvent:
    return LoggedEvent(sequence, "ui.a2ui-surface", b"{}", {}, 0, sequence, appended_ms)


@pytest.fixture
def dist(tmp_path: Path) -> Path:
    (tmp_path / "assets").mkdir()
    (tmp_path / "index.html").write_text("<!doctype html><a2ui-viewer></a2ui-viewer>")
    (tmp_path / "assets" / "viewer.js").write_text("export {};")
    (tmp_path / "secret.py").write_text("no")
    return tmp_path


def _pages(dist: Path, *, auth: bool = False) -> tuple[ViewerPages, FakeIndex]:
    index = FakeIndex()
    return ViewerPages(index, auth=auth, tokens=("t0k",), dist=dist), index  # type: ignore[arg-type]


async def test_every_page_is_the_app_with_a_strict_policy(dist: Path) -> None:
    pages, _ = _pages(dist)
    for path in ("/ui/", "/ui/runs/acme~2Fr1"):
        response = await pages.page(make_mocked_request("GET", path))
        assert response.status == 200 and b"a2ui-viewer" in response.body
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
    assert "make viewer" in response.text and "npm ci" in response.text


async def test_runs_listing_and_its_bearer_rule(dist: Path) -> None:
    pages, index = _pages(dist, auth=True)
    index.runs["acme/r1"] = RunLog("acme/r1", [_event(0, 1000), _event(1, 5000)])
    index.runs["acme/r2"] = RunLog("acme/r2", [_event(0, 3000)], status="completed")
    index.ready.set()
    denied = await pages.runs(make_mocked_request("GET", "/ui/api/runs"))
    assert denied.status == 401 and "WWW-Authenticate" in denied.headers
    wrong = make_mocked_request("GET", "/ui/api/runs", headers={"Authorization": "Bearer nope"})
    assert (await pages.runs(wrong)).status == 401
    right = make_mocked_request("GET", "/ui/api/runs", headers={"Authorization": "Bearer t0k"})
    response = await pages.runs(right)
    body = orjson.loads(response.body)
    assert response.status == 200 and body["ready"] is True and body["total"] == 2
    assert [(r["runId"], r["lastSequence"], r["status"]) for r in body["runs"]] == [
        ("acme/r1", 1, "running"),
        ("acme/r2", 0, "completed"),
    ]
    open_pages, open_index = _pages(dist, auth=False)  # the embedded mode: auth off
    assert (await open_pages.runs(make_mocked_request("GET", "/ui/api/runs"))).status == 200
