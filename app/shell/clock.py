"""The wall clock, read by the shell only: the core takes the time as an argument (STYLE.md:
no clock inside the domain, so replay stays deterministic).

Shared shell module. May import: the standard library only.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["now_rfc3339"]


def now_rfc3339() -> str:
    """Now, as RFC 3339 UTC with milliseconds (``2025-01-31T12:00:00.123Z``)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
