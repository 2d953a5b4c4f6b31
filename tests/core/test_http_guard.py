"""Request guards (app.core.http.guard): the Host rule of the laptop mode (DNS rebinding), the
Origin rule (cross-site requests), the JSON content type of mutating requests (CSRF) and the
loopback bind rule, as tables (issue 14 item 4)."""

from __future__ import annotations

import pytest

from app.core.http.errors import STATUS
from app.core.http.guard import (
    RequestHead,
    check_request,
    is_json_media_type,
    is_loopback_bind,
    is_loopback_host,
    is_same_origin,
)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.1:6066", True),
        ("127.1.2.3:80", True),  # all of 127.0.0.0/8
        ("localhost", True),
        ("localhost:6066", True),
        ("LocalHost:6066", True),
        ("[::1]", True),
        ("[::1]:6066", True),
        ("[0:0:0:0:0:0:0:1]:6066", True),
        # DNS names can be re-pointed at 127.0.0.1: that is the attack
        ("evil.example", False),
        ("evil.example:6066", False),
        ("127.0.0.1.evil.example", False),
        ("localhost.evil.example:6066", False),
        ("foo.localhost", False),
        ("localhost.", False),
        # other addresses, and what is not a Host at all
        ("192.0.2.2:6066", False),
        ("0.0.0.0:6066", False),
        ("[::]:6066", False),
        ("::1", False),  # an IPv6 literal without brackets is not a Host
        ("[::1", False),
        ("[::1]x", False),
        ("[evil]:1", False),
        ("127.0.0.1:", False),
        ("127.0.0.1:0", False),
        ("127.0.0.1:65536", False),
        ("127.0.0.1:6O66", False),
        ("127.0.0.1:６０６６", False),  # non-ASCII digits
        ("127.0.0.1:6066/x", False),
        ("user@127.0.0.1", False),
        ("127.0.0.1 evil", False),
        ("", False),
        (None, False),
    ],
)
def test_loopback_host(host: str | None, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        (" 127.0.0.1 ", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("192.0.2.2", False),
        ("example.org", False),
    ],
)
def test_loopback_bind(address: str, loopback: bool) -> None:
    assert is_loopback_bind(address) is loopback


@pytest.mark.parametrize(
    ("origin", "host", "same"),
    [
        ("http://127.0.0.1:6066", "127.0.0.1:6066", True),
        ("http://localhost:6066", "localhost:6066", True),
        ("HTTP://LOCALHOST:6066", "localhost:6066", True),
        ("http://[::1]:6066", "[::1]:6066", True),
        ("http://a2ui.example", "a2ui.example", True),
        ("http://a2ui.example", "a2ui.example:80", True),  # the default port, either way
        ("http://a2ui.example:80", "a2ui.example", True),
        ("https://a2ui.example", "a2ui.example", True),  # TLS ended in front of the worker
        ("https://a2ui.example", "a2ui.example:443", True),
        ("https://a2ui.example", "a2ui.example:80", False),
        ("http://127.0.0.1:6067", "127.0.0.1:6066", False),  # another port is another origin
        ("http://localhost:6066", "127.0.0.1:6066", False),  # another name is another origin
        ("http://evil.example", "127.0.0.1:6066", False),
        ("http://evil.example:6066", "127.0.0.1:6066", False),
        ("null", "127.0.0.1:6066", False),  # sandboxed frames, data: and file: pages
        ("file://", "127.0.0.1:6066", False),
        ("ftp://127.0.0.1:6066", "127.0.0.1:6066", False),
        ("http://127.0.0.1:6066/", "127.0.0.1:6066", False),  # an Origin has no path
        ("http://u@127.0.0.1:6066", "127.0.0.1:6066", False),
        ("http://", "127.0.0.1:6066", False),
        ("", "127.0.0.1:6066", False),
        ("http://127.0.0.1:6066", None, False),
        ("http://127.0.0.1:6066", "", False),
    ],
)
def test_same_origin(origin: str, host: str | None, same: bool) -> None:
    assert is_same_origin(origin, host) is same


@pytest.mark.parametrize(
    ("content_type", "json"),
    [
        ("application/json", True),
        ("application/json; charset=utf-8", True),
        ("Application/JSON;charset=UTF-8", True),
        (" application/json ", True),
        # what a page can send cross-site without a preflight (a "simple" request)
        ("text/plain", False),
        ("text/plain; charset=utf-8", False),
        ("application/x-www-form-urlencoded", False),
        ("multipart/form-data; boundary=x", False),
        (None, False),
        ("", False),
        # near misses
        ("application/json-patch+json", False),
        ("application/jsonx", False),
        ("text/json", False),
        ("application/ld+json", False),
    ],
)
def test_json_media_type(content_type: str | None, json: bool) -> None:
    assert is_json_media_type(content_type) is json


LOOPBACK = "127.0.0.1:6066"
SELF = "http://127.0.0.1:6066"
JSON = "application/json"


@pytest.mark.parametrize(
    ("head", "loopback_only", "refused"),
    [
        # the laptop mode: a loopback Host, then the Origin, then the content type
        (RequestHead("GET", LOOPBACK, None, None), True, None),
        (RequestHead("GET", "localhost:6066", None, None), True, None),
        (RequestHead("GET", "evil.example:6066", None, None), True, ("forbidden", "host-loopback")),
        (RequestHead("GET", None, None, None), True, ("forbidden", "host-loopback")),
        (
            RequestHead("POST", "evil.example:6066", "http://evil.example:6066", JSON),
            True,
            ("forbidden", "host-loopback"),
        ),
        (RequestHead("POST", LOOPBACK, SELF, JSON), True, None),
        (RequestHead("POST", LOOPBACK, None, JSON), True, None),  # curl: no Origin
        (
            RequestHead("POST", LOOPBACK, "http://evil.example", JSON),
            True,
            ("forbidden", "origin"),
        ),
        (RequestHead("POST", LOOPBACK, "null", "text/plain"), True, ("forbidden", "origin")),
        (
            RequestHead("POST", LOOPBACK, None, "text/plain"),
            True,
            ("unsupported_media_type", "content-type"),
        ),
        (
            RequestHead("POST", LOOPBACK, None, None),
            True,
            ("unsupported_media_type", "content-type"),
        ),
        # a worker with tokens: any Host name (it sits behind a DNS name), same rules otherwise
        (RequestHead("GET", "a2ui.internal:6066", None, None), False, None),
        (RequestHead("GET", None, None, None), False, None),
        (RequestHead("GET", "a2ui.internal", "http://a2ui.internal", None), False, None),
        (
            RequestHead("GET", "a2ui.internal", "http://evil.example", None),
            False,
            ("forbidden", "origin"),
        ),
        (RequestHead("POST", "a2ui.internal", None, JSON), False, None),
        (
            RequestHead("post", "a2ui.internal", None, "text/plain"),
            False,
            ("unsupported_media_type", "content-type"),
        ),
        (
            RequestHead("PUT", "a2ui.internal", None, None),
            False,
            ("unsupported_media_type", "content-type"),
        ),
        (
            RequestHead("DELETE", "a2ui.internal", None, None),
            False,
            ("unsupported_media_type", "content-type"),
        ),
        (RequestHead("HEAD", "a2ui.internal", None, None), False, None),
        (RequestHead("OPTIONS", "a2ui.internal", None, None), False, None),
        # a path no route serves changes nothing: it answers 404 (errors.md §Unadvertised
        # operations), whatever the method; the Host and Origin rules still come first
        (RequestHead("DELETE", "a2ui.internal", None, None, routed=False), False, None),
        (RequestHead("POST", LOOPBACK, None, "text/plain", routed=False), True, None),
        (
            RequestHead("PUT", "evil.example:6066", None, None, routed=False),
            True,
            ("forbidden", "host-loopback"),
        ),
        (
            RequestHead("POST", LOOPBACK, "http://evil.example", None, routed=False),
            True,
            ("forbidden", "origin"),
        ),
    ],
)
def test_check_request(
    head: RequestHead, loopback_only: bool, refused: tuple[str, str] | None
) -> None:
    answer = check_request(head, loopback_only=loopback_only)
    if refused is None:
        assert answer is None
        return
    assert answer is not None
    code, rule = refused
    assert answer.body["error"] == code and answer.body["details"]["rule"] == rule
    assert answer.status == STATUS[code] == {"forbidden": 403, "unsupported_media_type": 415}[code]
    assert answer.body["message"]  # says what to do


def test_a_refused_content_type_is_echoed_bounded() -> None:
    answer = check_request(RequestHead("POST", LOOPBACK, None, "x" * 10_000), loopback_only=True)
    assert answer is not None and len(answer.body["details"]["contentType"]) == 100
