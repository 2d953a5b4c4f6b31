"""A 404 under a run names the fix when a tenant runId's slash was left unescaped (issue 19:
``/runs/acme/r-9/events`` said only "no endpoint", with no hint about ``~2F``)."""

from __future__ import annotations

import pytest

from app.core.http.wire_ids import no_endpoint_message, split_run_path


@pytest.mark.parametrize(
    ("path", "fixed"),
    [
        ("/runs/acme/r-9/events", "/runs/acme~2Fr-9/events"),
        ("/runs/acme/r-9/events/poll", "/runs/acme~2Fr-9/events/poll"),
        ("/runs/acme/r-9", "/runs/acme~2Fr-9"),
        ("/runs/acme/r-9:fork", "/runs/acme~2Fr-9:fork"),
        ("/runs/acme/r-9/interrupts/gate", "/runs/acme~2Fr-9/interrupts/gate"),
        ("/v1/runs/acme/r-9/cancel", "/v1/runs/acme~2Fr-9/cancel"),
    ],
)
def test_an_unescaped_tenant_slash_gets_the_escaped_path(path: str, fixed: str) -> None:
    prefix = "/v1/runs/" if path.startswith("/v1/") else "/runs/"
    split = split_run_path(path, prefix)
    assert split is not None
    message = no_endpoint_message(prefix, *split)
    assert message.startswith(f"no endpoint {prefix}{{runId}}")
    assert message.endswith(f"its slash is part of one path segment: {fixed}")
    escaped = split_run_path(fixed, prefix)
    assert escaped is not None and escaped[0] == "acme/r-9"  # the hint's path names that run


@pytest.mark.parametrize("rest", ["/bogus/thing", "/events/nope", ":nothing", "/"])
def test_no_hint_where_no_served_endpoint_would_follow(rest: str) -> None:
    assert no_endpoint_message("/runs/", "acme", rest) == f"no endpoint /runs/{{runId}}{rest}"
