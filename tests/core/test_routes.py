"""The route table and its matcher (app.core.http.routes): raw-path decoding of runIds, the
resource a path names, 405's Allow, the catch-alls under a run, and what a configuration
serves."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.http.routes import ROUTES, Matched, NotRouted, Route, WrongMethod, match, served

ALL = served(ROUTES, seams=True, envelope_accept=True)
PLAIN = served(ROUTES, seams=False, envelope_accept=False)


@pytest.mark.parametrize(
    ("method", "raw_path", "name", "params"),
    [
        ("GET", "/runs/acme~2Fr-1", "get_run", {"runId": "acme/r-1"}),
        ("GET", "/runs/acme%2Fr-1/events", "run_events", {"runId": "acme/r-1"}),
        ("HEAD", "/runs/acme%2fr-1/events", "run_events", {"runId": "acme/r-1"}),
        ("GET", "/runs/abc/events/poll?afterSequence=3", "poll_events", {"runId": "abc"}),
        # a ``:`` inside a runId arrives escaped; the bare one starts the custom method
        ("POST", "/runs/a%3Ab:fork", "fork_run", {"runId": "a:b"}),
        ("POST", "/v1/runs/a~3Ab:fork", "v1_fork_run", {"runId": "a:b"}),
        ("POST", "/runs/r/interrupts/gate", "resolve_interrupt", {"runId": "r", "nodeId": "gate"}),
        ("POST", "/runs/r/interrupts/a/b", "resolve_interrupt", {"runId": "r", "nodeId": "a/b"}),
        ("POST", "/runs/r/envelopes", "post_envelope", {"runId": "r"}),
        ("POST", "/runs/r/cancel", "cancel_run", {"runId": "r"}),
        ("POST", "/runs/r/actions", "submit_action", {"runId": "r"}),
        ("GET", "/runs", "list_runs", {}),
        ("HEAD", "/runs", "list_runs", {}),
        ("POST", "/runs", "create_run", {}),
        ("GET", "/v1/runs/r", "v1_get_run", {"runId": "r"}),
        ("POST", "/v1/runs", "v1_create_run", {}),
        # unknown endpoints and runIds that do not decode fall to the catch-all (404 after auth)
        ("GET", "/runs/acme/r-9/events", "no_run_endpoint", {"rest": "acme/r-9/events"}),
        ("PUT", "/runs/r/bogus", "no_run_endpoint", {"rest": "r/bogus"}),
        ("GET", "/runs/%ZZ/events", "no_run_endpoint", {"rest": "%ZZ/events"}),
        ("POST", "/runs/r/interrupts/%", "no_run_endpoint", {"rest": "r/interrupts/%"}),
        ("GET", "/v1/runs/r/events/poll", "v1_no_run_endpoint", {"rest": "r/events/poll"}),
        ("GET", "/ui/assets/viewer.js", "viewer_asset", {"name": "viewer.js"}),
        ("GET", "/ui/assets/a%2Fb", "viewer_asset", {"name": "a/b"}),
        ("GET", "/ui/runs/acme~2Fr-1", "viewer_run", {"runPath": "acme~2Fr-1"}),
        ("GET", "/v1/openapi.json", "openapi", {}),
        ("POST", "/v1/host/sample/envelope/accept", "v1_accept_envelope", {}),
    ],
)
def test_a_path_is_matched_on_its_raw_form(
    method: str, raw_path: str, name: str, params: dict[str, str]
) -> None:
    found = match(ALL, method, raw_path)
    assert isinstance(found, Matched), found
    assert (found.route.name, dict(found.params)) == (name, params)


@pytest.mark.parametrize(
    ("method", "raw_path", "allow"),
    [
        ("POST", "/runs/r/events", ("GET",)),
        ("HEAD", "/runs/r/cancel", ("POST",)),
        ("GET", "/runs/r:fork", ("POST",)),
        ("DELETE", "/runs", ("GET", "POST")),
        ("POST", "/.well-known/openwop", ("GET",)),
        ("POST", "/health", ("GET",)),
        ("GET", "/v1/runs", ("POST",)),
    ],
)
def test_a_wrong_method_names_what_the_path_takes(
    method: str, raw_path: str, allow: tuple[str, ...]
) -> None:
    found = match(ALL, method, raw_path)
    assert isinstance(found, WrongMethod) and found.allow == allow


@pytest.mark.parametrize(
    "raw_path", ["/prompts", "/content/settings", "/runs/", "/v1/runs/", "/", "/ui/assets/", "/x"]
)
@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "DELETE"])
def test_a_path_no_route_has_is_not_routed_whatever_the_method(method: str, raw_path: str) -> None:
    assert match(ALL, method, raw_path, known=ROUTES) == NotRouted()


def test_a_route_not_served_at_this_configuration_says_why() -> None:
    for path in (
        "/v1/host/sample/a2ui/emit-surface",
        "/conformance/seams/sample/a2ui/emit-surface",
    ):
        found = match(PLAIN, "POST", path, known=ROUTES)
        assert isinstance(found, NotRouted) and "A2UI_STREAM_SEAMS" in found.absent
    accept = served(ROUTES, seams=True, envelope_accept=False)
    found = match(accept, "POST", "/v1/host/sample/envelope/accept", known=ROUTES)
    assert isinstance(found, NotRouted) and "floor 1" in found.absent


def test_the_table_is_well_formed() -> None:
    names = [r.name for r in ROUTES]
    assert len(names) == len(set(names)), "route names are handler keys: unique"
    for route in ROUTES:
        assert route.methods and all(m == "*" or m in ("GET", "POST") for m in route.methods)
        assert route.auth in ("none", "bearer") and route.body in ("none", "raw", "json")
        # every authenticated route names the right issue 18 will check; open ones none
        assert (route.right is None) == (route.auth == "none"), route.name
        assert route.owner == ("{runId}" in route.path), route.name
        assert (route.body != "none") <= ("POST" in route.methods), route.name
        assert route.documented == ("*" not in route.methods), route.name
        # issue 18: a route whose path names a run authorizes that run's tenant; an open
        # route checks no tenant; the others say where their tenant comes from
        assert (route.scope == "run") == ("{runId}" in route.path), route.name
        assert (route.auth == "none") <= (route.scope == "none"), route.name
        assert (route.scope == "body") == (route.tag == "seams"), route.name
    # one resource per template: the routes sharing a path share its auth
    for route in ROUTES:
        assert {r.auth for r in ROUTES if r.path == route.path} == {route.auth}


def test_every_documented_authenticated_route_says_it_can_be_refused() -> None:
    """The dispatcher answers a bearer route 401 without a known token and 403 when the token
    lacks the route's right (app.shell.http.api: before any handler), so the OpenAPI document
    lists both for each (before: GET /runs, GET /ui/api/runs and the v1 acceptor seam had no
    403 although a token without the right gets one)."""
    for route in ROUTES:
        if route.auth == "bearer" and route.documented:
            assert {401, 403} <= set(route.responses), route.name


def test_each_configuration_serves_its_seams_only() -> None:
    seams = {"v1_emit_surface", "v2_emit_surface"}
    assert not seams & {r.name for r in PLAIN}
    assert "v1_accept_envelope" not in {r.name for r in PLAIN}
    at_floor_2 = {r.name for r in served(ROUTES, seams=True, envelope_accept=False)}
    assert seams <= at_floor_2 and "v1_accept_envelope" not in at_floor_2
    assert {r.name for r in ALL} == {r.name for r in ROUTES}


def doc_row(route: Route) -> str:
    """The row of docs/http.md's route table for ``route``."""
    when = {"always": "", "seams": " (seams)", "envelope_accept": " (seams, floor 1)"}
    methods = "any" if "*" in route.methods else ", ".join(route.methods)
    owner = "yes" if route.owner else ""
    return (
        f"| `{methods}` | `{route.path}`{when[route.when]} | {route.auth} | "
        f"{route.right or '-'} | {route.scope} | {route.body} | {owner} |"
    )


def test_the_docs_list_every_route_as_the_table_says() -> None:
    """docs/http.md's route table is this table's rows, in its order (print them with
    ``python -c 'from tests.core.test_routes import *; print(*map(doc_row, ROUTES), sep="\\n")'``
    from the repository)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "http.md").read_text(encoding="utf-8")
    rows = [doc_row(r) for r in ROUTES]
    assert "\n".join(rows) in text
