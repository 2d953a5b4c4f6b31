"""What the live surface viewer's routes decide (issue 9; docs/viewer.md): which built asset
may be served and as what, the page's security policy, and the recent-runs listing.

Role: pure. The shell (``app.shell.http.viewer``) reads the run index and the files; the rules are
here. May import: the standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final, NamedTuple

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "RECENT_RUNS_LIMIT",
    "RunSummary",
    "asset_type",
    "recent_runs",
]

# Nothing from outside the worker: scripts, styles, fetches and images come from the page's
# own origin only (issue 9: no CDN, no web fonts). Inline styles are allowed because the A2UI
# basic catalog sets element styles (``style=`` attributes); inline scripts are not.
CONTENT_SECURITY_POLICY: Final = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "connect-src 'self'",
        "img-src 'self'",
        "font-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)

RECENT_RUNS_LIMIT: Final = 200

# One path segment, no leading dot (no hidden files), no separators: the name alone picks the
# file inside the built assets directory, so no request can reach a file outside it.
_ASSET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_CONTENT_TYPES: Final = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".map": "application/json",
    ".txt": "text/plain; charset=utf-8",
    ".svg": "image/svg+xml",
}


def asset_type(name: str) -> str | None:
    """The content type to serve the built asset ``name`` as, or None: not an asset name."""
    if _ASSET_NAME.fullmatch(name) is None:
        return None
    _, dot, extension = name.rpartition(".")
    return _CONTENT_TYPES.get(f".{extension}") if dot else None


class RunSummary(NamedTuple):
    """One run as the index lists it."""

    run_id: str
    last_sequence: int
    status: str
    terminal: bool
    events: int
    updated_ms: int  # the broker timestamp of its last recorded event


def recent_runs(runs: Iterable[RunSummary], limit: int = RECENT_RUNS_LIMIT) -> dict[str, Any]:
    """``GET /ui/api/runs``: the ``limit`` runs with the latest last event, newest first (ties
    by runId, so the order is stable), and how many runs there are in all."""
    listed = sorted(runs, key=lambda r: (-r.updated_ms, r.run_id))
    return {
        "runs": [
            {
                "runId": r.run_id,
                "lastSequence": r.last_sequence,
                "status": r.status,
                "isTerminal": r.terminal,
                "events": r.events,
                "updatedMs": r.updated_ms,
            }
            for r in listed[:limit]
        ],
        "total": len(listed),
    }
