"""The viewer's routing decisions: which asset names are served, and the recent-runs listing."""

from __future__ import annotations

import pytest

from app.core.http.viewer_index import CONTENT_SECURITY_POLICY, RunSummary, asset_type, recent_runs


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("viewer.js", "text/javascript; charset=utf-8"),
        ("viewer.css", "text/css; charset=utf-8"),
        ("viewer.js.map", "application/json"),
        ("viewer.js.LEGAL.txt", "text/plain; charset=utf-8"),
        ("favicon.svg", "image/svg+xml"),
        ("index.html", None),  # the page is served by its own route, not as an asset
        ("..", None),
        ("../viewer.py", None),
        (".env", None),
        ("a/b.js", None),
        ("a%2Fb.js", None),
        ("viewer", None),
        ("", None),
        ("x" * 200 + ".js", None),
    ],
)
def test_asset_names(name: str, expected: str | None) -> None:
    assert asset_type(name) == expected


def test_the_policy_loads_nothing_from_elsewhere() -> None:
    directives = dict(d.split(" ", 1) for d in CONTENT_SECURITY_POLICY.split("; "))
    assert directives["default-src"] == "'none'"
    for name in ("script-src", "connect-src", "img-src", "font-src"):
        assert directives[name] == "'self'", name
    assert "unsafe-eval" not in CONTENT_SECURITY_POLICY


def test_recent_runs_newest_first_with_stable_ties_and_a_limit() -> None:
    runs = [
        RunSummary("b", 3, "running", False, 4, 2000),
        RunSummary("a", 0, "completed", True, 1, 2000),
        RunSummary("c", 9, "running", False, 10, 1000),
        RunSummary("d", 1, "running", False, 2, 3000),
    ]
    listing = recent_runs(runs, limit=3)
    assert [r["runId"] for r in listing["runs"]] == ["d", "a", "b"]
    assert listing["total"] == 4
    assert listing["runs"][1] == {
        "runId": "a",
        "lastSequence": 0,
        "status": "completed",
        "isTerminal": True,
        "events": 1,
        "updatedMs": 2000,
    }
    assert recent_runs([]) == {"runs": [], "total": 0}
