"""Request guards: what a request's head must say before any route handler runs (issue 14).

Role: the decisions the worker's web server applies to every request at one choke point (the
middleware in app.shell.http.api), as values:

- DNS rebinding. In the laptop mode (auth off) a page on ``evil.example`` whose name the
  attacker re-points at 127.0.0.1 reaches the worker from the developer's browser, but its
  requests carry ``Host: evil.example``. Only the loopback names are answered there:
  ``localhost`` and a loopback IP literal (127.0.0.0/8, ``[::1]``), with any port.
- Cross-site requests. A request whose ``Origin`` is not this host (another site, or the
  opaque ``null`` of a sandboxed frame, a ``data:`` or a ``file:`` page) is refused, whatever the
  method. Clients that are not browsers send no ``Origin`` and are not affected. The scheme is
  not compared: TLS may end in front of the worker, so the worker cannot know its own scheme;
  host and port are compared (a port left out is the Origin scheme's default).
- CSRF. A browser sends a cross-site POST without asking first (no CORS preflight) only when it
  is a "simple" request: text/plain, a form encoding, or no body type at all. Every mutating
  request must therefore say ``Content-Type: application/json`` (parameters such as a charset
  are allowed), which no page can send cross-site without a preflight this host never answers.
  A request for a path no route serves changes nothing, so it is exempt and answers 404
  ``not_found`` whatever its method (spec/v2/core/errors.md §Unadvertised operations: an absent
  route is a 404, not another refusal).
- The bind address: the laptop mode (auth off) may only listen on a loopback address.

May import: the standard library (``ipaddress``) and app.core.http.errors.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from app.core.http.errors import HttpError, error

__all__ = [
    "JSON_MEDIA_TYPE",
    "SAFE_METHODS",
    "RequestHead",
    "check_request",
    "is_json_media_type",
    "is_loopback_bind",
    "is_loopback_host",
    "is_same_origin",
]

JSON_MEDIA_TYPE = "application/json"
# RFC 9110 §9.2.1: the methods that do not ask for a change. Everything else is mutating.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class RequestHead:
    """The parts of a request the guards read (header values as received, None if absent);
    ``routed``: some route serves the path (False: the web server answers 404)."""

    method: str
    host: str | None
    origin: str | None
    content_type: str | None
    routed: bool = True


def _authority(text: str) -> tuple[str, int | None] | None:
    """``host[:port]`` (RFC 9110 §7.2; an IPv6 literal in brackets) -> (lower-cased host, port),
    or None when it is not one."""
    if not text or any(c in text for c in "/?#@ \t\\"):
        return None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        host, rest = text[1:end], text[end + 1 :]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return None
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    else:
        host, colon, port_text_or_empty = text.partition(":")
        if ":" in port_text_or_empty:  # a bare IPv6 literal or garbage
            return None
        port_text = port_text_or_empty if colon else None
    if not host:
        return None
    if port_text is None:
        return host.lower(), None
    if not port_text.isdigit() or not port_text.isascii() or not 0 < int(port_text) <= 65535:
        return None
    return host.lower(), int(port_text)


def _is_loopback_name(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a DNS name: it could resolve anywhere, and be re-pointed
        return False


def is_loopback_host(host_header: str | None) -> bool:
    """True when a ``Host`` header names this machine by a name no DNS answer can change:
    ``localhost``, 127.0.0.0/8 or ``[::1]``, with or without a port."""
    parsed = _authority((host_header or "").strip())
    return parsed is not None and _is_loopback_name(parsed[0])


def is_loopback_bind(address: str) -> bool:
    """True when a listening address (A2UI_STREAM_WEB_HOST) is reachable from this machine
    only: ``localhost`` or a loopback IP literal (bracketed or not). The empty address and
    ``0.0.0.0`` / ``::`` listen on every interface."""
    text = address.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return _is_loopback_name(text.lower()) if text else False


def is_same_origin(origin: str, host_header: str | None) -> bool:
    """True when ``Origin`` (RFC 6454 §7: ``scheme://host[:port]``, no path) names the host and
    port the request was sent to (its ``Host``). ``null`` and anything malformed are not."""
    scheme, sep, rest = origin.strip().partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in _DEFAULT_PORTS:
        return False
    claimed = _authority(rest)
    target = _authority((host_header or "").strip())
    if claimed is None or target is None:
        return False
    default = _DEFAULT_PORTS[scheme]
    return claimed[0] == target[0] and (claimed[1] or default) == (target[1] or default)


def is_json_media_type(content_type: str | None) -> bool:
    """True for ``application/json`` with any parameters (RFC 9110 §8.3.1: the type and
    subtype are case-insensitive)."""
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    return media_type == JSON_MEDIA_TYPE


def check_request(head: RequestHead, *, loopback_only: bool) -> HttpError | None:
    """The first guard ``head`` fails, as the error to answer, or None. ``loopback_only`` is
    the laptop mode (no bearer token), where the Host must be a loopback name."""
    if loopback_only and not is_loopback_host(head.host):
        return error(
            "forbidden",
            "this worker runs without tokens (the laptop mode) and answers only requests sent "
            "to a loopback name: use http://127.0.0.1:<port>/ or http://localhost:<port>/",
            {"rule": "host-loopback"},
        )
    if head.origin is not None and not is_same_origin(head.origin, head.host):
        return error(
            "forbidden",
            "cross-origin requests are refused: a web page from another origin may not call "
            "this worker (send the request from a non-browser client, or from the worker's "
            "own pages)",
            {"rule": "origin"},
        )
    mutating = head.routed and head.method.upper() not in SAFE_METHODS
    if mutating and not is_json_media_type(head.content_type):
        return error(
            "unsupported_media_type",
            f"send Content-Type: {JSON_MEDIA_TYPE} with a JSON body (every POST requires it)",
            {"rule": "content-type", "contentType": (head.content_type or "")[:100]},
        )
    return None
