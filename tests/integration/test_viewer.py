"""The live surface viewer in headless Chromium against real workers (issue 9; docs/viewer.md).

Two loopback workers with auth off (the embedded mode's setting; loopback only): a floor-2 host
for A2UI v0.9 surfaces and a floor-1 host for v1 surfaces with RFC 0114 deltas. Envelopes go
through POST /runs/{runId}/envelopes and the validator; the browser only reads the viewer.
A screenshot is written to the test's tmp dir, and to docs/viewer.png when
A2UI_STREAM_VIEWER_SCREENSHOT=1.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import urllib.parse
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.core.common.examples import BASIC_CATALOG, rfc0209_positive_payload
from app.devtools.fault_kit import WorkerProcess, apply_topics
from app.shell.cli.broker import Broker
from app.shell.settings import load_settings
from tests.integration.browser_kit import (
    REPO,
    BrowserDriver,
    append_to_log,
    recorded_surface,
    require_browser,
)
from tests.integration.http_kit import Builder, Http, runs_path, v2, wait_http

pytestmark = [pytest.mark.broker, pytest.mark.slow]

LOOPBACK = {"127.0.0.1", "localhost", "[::1]", "::1"}


def _worker(broker: Broker, tmp: Path, tag: str, floor: int) -> WorkerProcess:
    unique = uuid.uuid4().hex[:8]
    settings = replace(
        load_settings({}),
        topic_prefix=f"v{tag}{unique}.",
        app_id=f"a2ui-viewer-{tag}-{unique}",
        partitions=3,
        fast_groups=True,
    )
    asyncio.run(apply_topics(broker, settings))
    # auth off is meant for the embedded mode only; here the worker binds 127.0.0.1 as well
    env = {"A2UI_STREAM_HTTP_AUTH": "off", "A2UI_STREAM_FLOOR": str(floor)}
    return WorkerProcess(broker, settings, f"viewer-{tag}", tmp, env)


@pytest.fixture(scope="module")
def workers(
    broker: Broker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[int, WorkerProcess]]:
    """The two workers, started and answering (their run index has read the log)."""
    require_browser()
    tmp = tmp_path_factory.mktemp("viewer-workers")
    started = {2: _worker(broker, tmp, "f2", 2), 1: _worker(broker, tmp, "f1", 1)}
    for worker in started.values():
        worker.start()
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(wait_http, started.values()))
        yield started
    finally:
        for worker in started.values():
            worker.stop()


@pytest.fixture(scope="module")
def hosts(workers: dict[int, WorkerProcess]) -> dict[int, Http]:
    return {
        floor: Http(f"http://127.0.0.1:{worker.web_port}", token=None)
        for floor, worker in workers.items()
    }


@pytest.fixture(scope="module")
def browser(
    hosts: dict[int, Http], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrowserDriver]:
    driver = BrowserDriver(tmp_path_factory.mktemp("browser") / "driver.log")
    try:
        yield driver
    finally:
        driver.close()


def _post(http: Http, run: str, envelope: dict[str, Any]) -> int:
    reply = http.post(runs_path(run, "/envelopes"), envelope)
    assert reply.status == 201, reply.body
    sequence: int = reply.body["sequence"]
    return sequence


def _page(http: Http, run: str) -> str:
    return f"{http.base}/ui/runs/{runs_path(run).removeprefix('/runs/')}"


def _surface(sid: str) -> str:
    return f'article[data-surface="{sid}"]'


def _assert_loopback_only(browser: BrowserDriver) -> None:
    requests = browser.call("requests")["requests"]
    assert requests, "the browser made no request at all"
    leaving = [
        r["url"] for r in requests if urllib.parse.urlsplit(r["url"]).hostname not in LOOPBACK
    ]
    assert not leaving, f"requests left 127.0.0.1: {leaving}"
    problems = browser.call("problems")["problems"]
    assert not problems, problems  # CSP violations and script errors land here


def _screenshot(browser: BrowserDriver, path: Path, *, for_docs: bool = False) -> None:
    """A screenshot for humans in the test's tmp dir; the docs' copy only when asked for."""
    browser.call("screenshot", path=str(path))
    assert path.stat().st_size > 10_000
    if for_docs and os.environ.get("A2UI_STREAM_VIEWER_SCREENSHOT") == "1":
        shutil.copyfile(path, REPO / "docs" / "viewer.png")


# -- v2: a surface and its update, live ---------------------------------------------------------


def test_v2_surface_and_its_update_render_live(
    hosts: dict[int, Http], browser: BrowserDriver
) -> None:
    http, b = hosts[2], Builder()
    run, sid = f"viewer/run-{uuid.uuid4().hex}", b.sid("brief")
    _post(http, run, b.envelope(v2(sid, rfc0209_positive_payload()["messages"])))
    browser.goto(_page(http, run))
    browser.wait(f"{_surface(sid)} .a2ui-text", "Launch brief")
    browser.wait('[data-testid="connection"]', "live")
    card = browser.query(_surface(sid))[0]["attrs"]
    assert (card["data-trust"], card["data-state"], card["data-actions"]) == (
        "trusted",
        "final",
        "enabled",
    )
    assert browser.query(f"{_surface(sid)} input")  # the TextField, drawn by @a2ui/lit
    [button] = browser.query(f"{_surface(sid)} a2ui-viewer-button button")
    assert button["text"] == "Submit" and not button["disabled"]

    update = {
        "version": "v0.9",
        "updateComponents": {
            "surfaceId": sid,
            "components": [
                {"id": "root", "component": "Column", "children": ["h", "note", "name", "submit"]},
                {"id": "h", "component": "Text", "text": "Launch brief, revised", "variant": "h2"},
                {"id": "note", "component": "Text", "text": "Reviewed by the agent"},
            ],
        },
    }
    second = _post(http, run, b.envelope(v2(sid, [update])))
    browser.wait(f"{_surface(sid)} .a2ui-text", "Launch brief, revised")
    browser.wait(f"{_surface(sid)} .a2ui-text", "Reviewed by the agent")
    sequences = [row["attrs"]["data-sequence"] for row in browser.query(".timeline tbody tr")]
    assert sequences == [str(second), "0"]  # newest first, every event once
    _assert_loopback_only(browser)


# -- trust, partial and actions --------------------------------------------------------------------


def _ok_button_surface(sid: str, text: str) -> list[dict[str, Any]]:
    return [
        {"version": "v0.9", "createSurface": {"surfaceId": sid, "catalogId": BASIC_CATALOG}},
        {
            "version": "v0.9",
            "updateComponents": {
                "surfaceId": sid,
                "components": [
                    {"id": "root", "component": "Column", "children": ["t", "b"]},
                    {"id": "t", "component": "Text", "text": text},
                    {"id": "b_label", "component": "Text", "text": "Approve"},
                    {
                        "id": "b",
                        "component": "Button",
                        "child": "b_label",
                        "action": {"event": {"name": "resume"}},
                    },
                ],
            },
        },
    ]


def test_untrusted_and_partial_surfaces_show_it_and_disable_actions(
    hosts: dict[int, Http], browser: BrowserDriver, tmp_path: Path
) -> None:
    http, b = hosts[2], Builder()
    run = f"viewer/run-{uuid.uuid4().hex}"
    trusted, tainted, streaming = b.sid("trusted"), b.sid("tainted"), b.sid("streaming")
    _post(http, run, b.envelope(v2(trusted, _ok_button_surface(trusted, "A trusted surface"))))
    _post(
        http, run, b.envelope(v2(tainted, _ok_button_surface(tainted, "Created by a trusted node")))
    )
    taint = {
        "version": "v0.9",
        "updateComponents": {
            "surfaceId": tainted,
            "components": [
                {"id": "t", "component": "Text", "text": "Touched by untrusted content"}
            ],
        },
    }
    _post(http, run, b.envelope(v2(tainted, [taint]), trust="untrusted"))
    chunk = b.envelope(v2(streaming, _ok_button_surface(streaming, "Still streaming")))
    chunk["partial"] = {"isPartial": True, "index": 0, "total": -1}
    _post(http, run, chunk)

    browser.goto(_page(http, run))
    browser.wait(f"{_surface(streaming)} .a2ui-text", "Still streaming")
    browser.wait(f"{_surface(tainted)} .a2ui-text", "Touched by untrusted content")
    # the untrusted surface: its badge, and every action disabled (a later trusted update
    # could not launder it either: trust is sticky)
    assert browser.query(f'{_surface(tainted)} [data-testid="untrusted-badge"]')
    assert browser.query(_surface(tainted))[0]["attrs"]["data-actions"] == "disabled"
    buttons = browser.query(f"{_surface(tainted)} a2ui-viewer-button button")
    assert buttons and all(button["disabled"] for button in buttons)
    # the partial surface: shown as partial, actions disabled until it is final (E1)
    card = browser.query(_surface(streaming))[0]["attrs"]
    assert (card["data-state"], card["data-actions"]) == ("partial", "disabled")
    assert all(
        b["disabled"] for b in browser.query(f"{_surface(streaming)} a2ui-viewer-button button")
    )
    # the trusted final one: no badge, its button enabled
    assert not browser.query(f'{_surface(trusted)} [data-testid="untrusted-badge"]')
    assert not browser.query(f"{_surface(trusted)} a2ui-viewer-button button")[0]["disabled"]
    _screenshot(browser, tmp_path / "viewer-trust.png", for_docs=True)
    _assert_loopback_only(browser)


# -- v1 through the migration map, with RFC 0114 deltas -----------------------------------------

V1_FULL = {
    "catalogVersion": "0.9.1",
    "surface": {
        "title": "Kickoff",
        "components": [
            {"component": "heading", "text": "Agenda", "level": 2},
            {"component": "text", "text": "Pick a room."},
            {"component": "field.text", "id": "name", "label": "Your name", "placeholder": "Ada"},
            {
                "component": "field.select",
                "id": "room",
                "label": "Room",
                "options": [{"value": "a", "label": "Room A"}, {"value": "b", "label": "Room B"}],
            },
            {"component": "field.checkbox", "id": "remote", "label": "Remote", "default": True},
            {
                "component": "action.button",
                "id": "go",
                "label": "Book it",
                "action": {"target": "resume"},
            },
        ],
    },
}


def test_v1_surface_renders_through_the_migration_map_with_deltas(
    hosts: dict[int, Http], browser: BrowserDriver, tmp_path: Path
) -> None:
    http, b = hosts[1], Builder()
    run = f"viewer/run-{uuid.uuid4().hex}"
    _post(http, run, b.envelope(V1_FULL, schema_version=1))
    later = json.loads(json.dumps(V1_FULL))
    later["surface"]["components"][1]["text"] = "Pick a room; Room B has a screen."
    second = _post(http, run, b.envelope(later, schema_version=1))

    browser.goto(_page(http, run))
    card = _surface("~v1")
    browser.wait(f"{card} .a2ui-text", "Pick a room; Room B has a screen.")  # the delta applied
    assert browser.query(card)[0]["attrs"]["data-version"] == "1"
    texts = [e["text"] for e in browser.query(f"{card} .a2ui-text")]
    assert "Kickoff" in texts and "Agenda" in texts  # title -> Text h1, heading -> Text h2
    assert browser.query(f"{card} .a2ui-text.h1")[0]["text"] == "Kickoff"
    assert browser.query(f"{card} .a2ui-text.h2")[0]["text"] == "Agenda"
    body = browser.query(
        f"{card} a2ui-basic-textfield, {card} a2ui-choicepicker, {card} a2ui-checkbox"
    )
    assert [e["tag"] for e in body] == [
        "a2ui-basic-textfield",
        "a2ui-choicepicker",
        "a2ui-checkbox",
    ]
    assert "Room B" in body[1]["text"]
    # the timeline and the byte counters: one full frame, then one RFC 0114 delta
    rows = browser.query(".timeline tbody tr")
    assert [r["attrs"]["data-sequence"] for r in rows] == [str(second), "0"]
    assert "delta" in rows[0]["text"]
    bytes_panel = browser.query('[data-testid="bytes"]')[0]["text"]
    assert "1 RFC 0114 delta" in bytes_panel

    # the button is enabled (trusted, final, live) and submits only to the actions endpoint
    [button] = browser.query(f"{card} a2ui-viewer-button button")
    assert button["text"] == "Book it" and not button["disabled"]
    browser.call("click", selector=f"{card} a2ui-viewer-button button")
    browser.wait(".actions-log li", "201")
    posts = [r for r in browser.call("requests")["requests"] if r["method"] != "GET"]
    assert [urllib.parse.urlsplit(r["url"]).path for r in posts] == [f"{runs_path(run)}/actions"]
    _screenshot(browser, tmp_path / "viewer-v1.png")
    _assert_loopback_only(browser)


def test_index_lists_recent_runs_and_opens_them(
    hosts: dict[int, Http], browser: BrowserDriver
) -> None:
    http, b = hosts[2], Builder()
    run, sid = f"viewer/run-{uuid.uuid4().hex}", b.sid("listed")
    _post(http, run, b.envelope(v2(sid, _ok_button_surface(sid, "Listed"))))
    listing = http.get("/ui/api/runs").body
    assert listing["runs"][0]["runId"] == run and listing["runs"][0]["lastSequence"] == 0
    browser.goto(f"{http.base}/ui/")
    browser.wait("table.runs a", run)
    browser.call("click", selector="table.runs a", text=run)
    browser.wait(f"{_surface(sid)} .a2ui-text", "Listed")
    _assert_loopback_only(browser)


# -- cycle safety: the renderer is never handed a tree it would walk forever -------------------


def _components(sid: str, *components: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": "v0.9",
        "updateComponents": {"surfaceId": sid, "components": list(components)},
    }


def _create(sid: str) -> dict[str, Any]:
    return {"version": "v0.9", "createSurface": {"surfaceId": sid, "catalogId": BASIC_CATALOG}}


def _column(cid: str, *children: str) -> dict[str, Any]:
    return {"id": cid, "component": "Column", "children": list(children)}


def _text(cid: str, text: str) -> dict[str, Any]:
    return {"id": cid, "component": "Text", "text": text}


def _button(cid: str, child: str) -> dict[str, Any]:
    return {
        "id": cid,
        "component": "Button",
        "child": child,
        "action": {"event": {"name": "resume"}},
    }


# Resolves, from the page's own event loop (setTimeout), once the run shows N surface cards.
_EVERY_CARD = """new Promise(resolve => {
  const tick = () => {
    const cards = document.querySelectorAll('article[data-surface]').length;
    if (cards >= %d - 1) resolve(cards); else setTimeout(tick, 50);
  };
  tick();
})"""


def _notice(sid: str) -> str:
    return f'{_surface(sid)} [data-testid="tree-unsafe"]'


def test_cyclic_trees_are_not_rendered_and_the_tab_stays_responsive(
    workers: dict[int, WorkerProcess], hosts: dict[int, Http], browser: BrowserDriver
) -> None:
    """Issue 14 item 3: a cyclic children/child graph froze the tab (@a2ui/lit 0.11.0 renders a
    child by creating its element, which renders its children, with no cycle check). Admission
    refuses cycles now, so the events are written straight to the log, as an older log or
    another host could hold them. Each cyclic surface shows a notice naming the component that
    closes the cycle; the run's other surfaces (a deep chain, a shared child) render."""
    http, worker, b = hosts[2], workers[2], Builder()
    run = f"viewer/run-{uuid.uuid4().hex}"
    ok, own, late, card, deep, shared = (
        b.sid(tag) for tag in ("ok", "self", "late", "card", "deep", "shared")
    )
    depth = 255  # root and 255 below it: 256 nested components, the bound (MAX_TREE_DEPTH)
    chain = [_column(f"c{i}", f"c{i + 1}") for i in range(1, depth)]
    payloads = [
        (ok, [_create(ok), _components(ok, _column("root", "t"), _text("t", "Rendered before"))]),
        (own, [_create(own), _components(own, _column("root", "root"))]),  # root -> root
        (late, [_create(late), _components(late, _column("root", "a"), _column("a", "b"))]),
        (late, [_components(late, _column("b", "root"))]),  # closes root -> a -> b -> root
        (
            card,
            [
                _create(card),
                # Button.child points back up to the Card that holds it
                _components(card, {"id": "root", "component": "Card", "child": "go"},
                            _button("go", "root")),
            ],
        ),
        (
            deep,
            [
                _create(deep),
                _components(deep, _column("root", "c1"), *chain,
                            _text(f"c{depth}", "The bottom of the chain")),
            ],
        ),
        (
            shared,
            [
                _create(shared),
                _components(shared, _column("root", "left", "right"),
                            {"id": "left", "component": "Card", "child": "x"},
                            {"id": "right", "component": "Card", "child": "x"},
                            _text("x", "One child, two parents")),
            ],
        ),
    ]  # fmt: skip
    events = [
        recorded_surface(run, sequence, b.envelope(v2(sid, messages)))
        for sequence, (sid, messages) in enumerate(payloads)
    ]
    asyncio.run(append_to_log(worker.broker.bootstrap, worker.settings, events))

    browser.goto(_page(http, run))
    # The page's own event loop waits for every surface's card: a tab that walks a cycle never
    # turns its event loop again, so this never answers there (the driver's bound says so).
    cards = browser.evaluate(_EVERY_CARD % len(payloads), timeout=60)
    assert cards == len(payloads) - 1  # the late surface has two events and one card
    columns = browser.evaluate("document.querySelectorAll('a2ui-basic-column').length")
    assert columns < 1000
    browser.wait(f"{_surface(shared)} .a2ui-text", "One child, two parents")
    browser.wait(f"{_surface(ok)} .a2ui-text", "Rendered before")
    browser.wait(f"{_surface(deep)} .a2ui-text", "The bottom of the chain")
    assert len(browser.query(f"{_surface(shared)} .a2ui-text")) == 2  # drawn at both positions
    for sid, closes in ((own, "root"), (late, "b"), (card, "go")):
        browser.wait(_notice(sid))
        [notice] = browser.query(_notice(sid))
        assert f"'{closes}'" in notice["text"] and "cycle" in notice["text"], notice
        assert not browser.query(f"{_surface(sid)} a2ui-surface"), sid  # never handed over
        assert browser.query(_surface(sid))[0]["attrs"]["data-actions"] == "disabled"

    # a later update that breaks the cycle renders the surface again
    fixed = b.envelope(v2(late, [_components(late, _text("b", "The cycle is broken"))]))
    asyncio.run(
        append_to_log(
            worker.broker.bootstrap, worker.settings, [recorded_surface(run, len(events), fixed)]
        )
    )
    browser.wait(f"{_surface(late)} .a2ui-text", "The cycle is broken")
    assert not browser.query(_notice(late))
    assert browser.evaluate("1 + 1", timeout=30) == 2
    _assert_loopback_only(browser)
