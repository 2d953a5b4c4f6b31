"""The viewer's waiting and auth states, and markdown in Text, in headless Chromium (issue 19
item 6; the kit of tests/integration/test_viewer.py).

Before: a run page opened before the run existed showed a pink error banner ("No event is
recorded for this run yet"); on a worker without tokens configured the index asked for a
token forever and stayed "Loading..."; markdown in a Text was shown literally, newlines
collapsed (@a2ui/lit's markdown directive had no renderer)."""

from __future__ import annotations

import asyncio
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.core.common.examples import BASIC_CATALOG
from app.devtools.fault_kit import WorkerProcess, apply_topics
from app.shell.cli.broker import Broker
from app.shell.settings import load_settings
from tests.integration.browser_kit import BrowserDriver, require_browser
from tests.integration.http_kit import Builder, Http, runs_path, v2, wait_http

pytestmark = [pytest.mark.broker, pytest.mark.slow]

MARKDOWN = (
    "**Bold** and *italic* and `code`\n"
    "a second line\n"
    "\n"
    "- one\n"
    "- two\n"
    "\n"
    "see [the docs](https://evil.example/docs) ![logo](https://evil.example/logo.png)\n"
    "<script>window.pwned = 1</script><img src=https://evil.example/x.png>"
)


def _worker(broker: Broker, tmp: Path, tag: str, env: dict[str, str]) -> WorkerProcess:
    unique = uuid.uuid4().hex[:8]
    settings = replace(
        load_settings({}),
        topic_prefix=f"vs{tag}{unique}.",
        app_id=f"a2ui-viewer-states-{tag}-{unique}",
        partitions=1,
        fast_groups=True,
    )
    asyncio.run(apply_topics(broker, settings))
    return WorkerProcess(broker, settings, f"states-{tag}", tmp, env)


def _health(worker: WorkerProcess, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            url = f"http://127.0.0.1:{worker.web_port}/health"
            urllib.request.urlopen(url, timeout=3).close()
            return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(worker.tail())


@pytest.fixture(scope="module")
def workers(
    broker: Broker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, WorkerProcess]]:
    require_browser()
    tmp = tmp_path_factory.mktemp("viewer-states")
    started = {
        # the embedded mode's setting, loopback only
        "open": _worker(broker, tmp, "open", {"A2UI_STREAM_HTTP_AUTH": "off"}),
        # a worker that requires tokens and has none configured
        "tokenless": _worker(
            broker, tmp, "tokenless", {"A2UI_STREAM_HTTP_AUTH": "on", "A2UI_STREAM_HTTP_TOKENS": ""}
        ),
    }
    for worker in started.values():
        worker.start()
    try:
        wait_http(started["open"])
        _health(started["tokenless"])
        yield started
    finally:
        for worker in started.values():
            worker.stop()


@pytest.fixture(scope="module")
def browser(
    workers: dict[str, WorkerProcess], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrowserDriver]:
    driver = BrowserDriver(tmp_path_factory.mktemp("states-browser") / "driver.log")
    try:
        yield driver
    finally:
        driver.close()


def _base(worker: WorkerProcess) -> str:
    return f"http://127.0.0.1:{worker.web_port}"


def _text_surface(sid: str, text: str) -> list[dict[str, Any]]:
    return [
        {"version": "v0.9", "createSurface": {"surfaceId": sid, "catalogId": BASIC_CATALOG}},
        {
            "version": "v0.9",
            "updateComponents": {
                "surfaceId": sid,
                "components": [
                    {"id": "root", "component": "Column", "children": ["title", "md"]},
                    {"id": "title", "component": "Text", "text": "Notes", "variant": "h2"},
                    {"id": "md", "component": "Text", "text": text},
                ],
            },
        },
    ]


def test_a_run_page_opened_before_the_run_waits_calmly_then_draws_markdown_safely(
    workers: dict[str, WorkerProcess], browser: BrowserDriver
) -> None:
    base, b = _base(workers["open"]), Builder()
    run, sid = f"states/run-{uuid.uuid4().hex[:10]}", b.sid("notes")
    browser.goto(f"{base}/ui/runs/{runs_path(run).removeprefix('/runs/')}")
    browser.wait('[data-testid="waiting"]', "Waiting for the first event")
    browser.wait('[data-testid="connection"]', "waiting for the first event")
    assert not browser.query(".notice"), "a normal waiting state shown as an error"

    reply = Http(base, token=None).post(
        runs_path(run, "/envelopes"), b.envelope(v2(sid, _text_surface(sid, MARKDOWN)))
    )
    assert reply.status == 201, reply.body
    card = f'article[data-surface="{sid}"]'
    browser.wait(f"{card} .a2ui-text strong", "Bold")  # the page's renderer answered
    assert not browser.query('[data-testid="waiting"]')
    assert [e["text"] for e in browser.query(f"{card} .a2ui-text li")] == ["one", "two"]
    assert browser.query(f"{card} .a2ui-text em")[0]["text"] == "italic"
    assert browser.query(f"{card} .a2ui-text br"), "the newline became a line break"
    # nothing navigates or fetches, and no markup of the text's own: link text, alt text,
    # the tags shown as text
    for tag in ("a", "img", "script", "iframe"):
        assert not browser.query(f"{card} {tag}"), tag
    text = " ".join(e["text"] for e in browser.query(f"{card} .a2ui-text"))
    assert "the docs" in text and "[logo]" in text and "<script>window.pwned = 1</script>" in text
    assert browser.evaluate("window.pwned === undefined")
    hosts = {r["url"].split("/")[2] for r in browser.call("requests")["requests"]}
    assert all(h.startswith("127.0.0.1:") for h in hosts), hosts  # evil.example never asked


def test_a_worker_without_tokens_says_so_instead_of_asking(
    workers: dict[str, WorkerProcess], browser: BrowserDriver
) -> None:
    base = _base(workers["tokenless"])
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(f"{base}/ui/api/runs", timeout=10)
    assert answer.value.code == 401
    answer.value.close()  # its response: the traceback's cycle would leave the socket to the GC
    browser.goto(f"{base}/ui/")
    browser.wait('[data-testid="no-tokens"]', "no token configured")
    page = browser.query("viewer-run-index")[0]["text"]
    assert "A2UI_STREAM_HTTP_TOKENS" in page and "Loading" not in page
    assert not browser.query("form.token"), "asked for a token no worker would accept"
    browser.goto(f"{base}/ui/runs/some-run")
    browser.wait('[data-testid="no-tokens"]', "no token configured")
    browser.wait('[data-testid="connection"]', "no tokens configured")
    assert not browser.query("form.token")
