"""The viewer with a tenant-scoped token, in headless Chromium (issue 18 item 5; the kit of
tests/integration/test_viewer_states.py): the run index shows the token's tenants only, and
another tenant's run page looks exactly like the page of a run never recorded (no oracle)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.core.http.wire_ids import project_run_id
from app.devtools.fault_kit import WorkerProcess, apply_topics
from app.shell.cli.broker import Broker
from app.shell.settings import load_settings
from tests.integration.browser_kit import BrowserDriver, require_browser
from tests.integration.http_kit import TOKEN, Builder, Http, create_msg, runs_path, v2, wait_http

pytestmark = [pytest.mark.broker, pytest.mark.slow]

TOKENS = {name: f"{name}-{uuid.uuid4().hex}" for name in ("alpha-reader", "beta-all", "alpha-all")}
RIGHTS = ["read", "emit", "approve", "act", "admin"]


def _tokens_file(path: Path) -> Path:
    def entry(name: str, tenant: str, rights: list[str]) -> dict[str, object]:
        digest = hashlib.sha256(TOKENS[name].encode()).hexdigest()
        return {"name": name, "token_sha256": digest, "tenants": [tenant], "rights": rights}

    principals = [
        entry("alpha-reader", "alpha", ["read"]),
        entry("alpha-all", "alpha", RIGHTS),
        entry("beta-all", "beta", RIGHTS),
    ]
    path.write_text(json.dumps({"principals": principals}))
    return path


@pytest.fixture(scope="module")
def base(broker: Broker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_browser()
    tmp = tmp_path_factory.mktemp("viewer-tenants")
    unique = uuid.uuid4().hex[:8]
    settings = replace(
        load_settings({}),
        topic_prefix=f"vt{unique}.",
        app_id=f"a2ui-viewer-tenants-{unique}",
        partitions=1,
        fast_groups=True,
    )
    asyncio.run(apply_topics(broker, settings))
    env = {
        "A2UI_STREAM_HTTP_AUTH": "on",
        "A2UI_STREAM_HTTP_TOKENS": TOKEN,  # every tenant: the kit's readiness probe
        "A2UI_STREAM_HTTP_TOKENS_FILE": str(_tokens_file(tmp / "tokens.json")),
    }
    worker = WorkerProcess(broker, settings, "viewer-tenants", tmp, env)
    worker.start()
    try:
        yield wait_http(worker).base
    finally:
        worker.stop()


@pytest.fixture(scope="module")
def browser(base: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserDriver]:
    driver = BrowserDriver(tmp_path_factory.mktemp("tenants-browser") / "driver.log")
    try:
        yield driver
    finally:
        driver.close()


def _record(base: str, token: str, run: str) -> None:
    b = Builder()
    reply = Http(base, token=token).post(
        runs_path(run, "/envelopes"), b.envelope(v2(b.sid("t"), [create_msg()]))
    )
    assert reply.status == 201, reply.raw


def _use_token(browser: BrowserDriver, base: str, token: str) -> None:
    browser.goto(f"{base}/ui/")
    stored = f"(sessionStorage.setItem('a2ui-stream.viewer.token', {json.dumps(token)}), true)"
    assert browser.evaluate(stored) is True


def test_a_scoped_token_sees_its_tenants_runs_only(base: str, browser: BrowserDriver) -> None:
    mine = f"alpha/run-{uuid.uuid4().hex[:10]}"
    theirs = f"beta/run-{uuid.uuid4().hex[:10]}"
    never = f"beta/run-{uuid.uuid4().hex[:10]}"
    _record(base, TOKENS["alpha-all"], mine)
    _record(base, TOKENS["beta-all"], theirs)

    _use_token(browser, base, TOKENS["alpha-reader"])
    browser.goto(f"{base}/ui/")
    browser.wait(f'tr[data-run="{mine}"]', mine)
    listed = {row["attrs"]["data-run"] for row in browser.query("tr[data-run]")}
    assert mine in listed and not any(r.startswith("beta/") for r in listed), listed

    pages = {}
    for run in (theirs, never):
        browser.goto(f"{base}/ui/runs/{project_run_id(run)}")
        browser.wait('[data-testid="waiting"]', "Waiting for the first event")
        pages[run] = (
            browser.query('[data-testid="connection"]')[0]["text"],
            [n["text"] for n in browser.query(".notice")],
            browser.query("article[data-surface]"),
        )
    # another tenant's recorded run looks like a run never recorded: nothing to tell them apart
    assert pages[theirs] == pages[never]
    assert pages[theirs][2] == []
