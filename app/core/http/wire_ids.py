"""Run ids on the wire: the one-path-segment form of a runId, and splitting a run path.

Role: the shell's HTTP routes carry a runId in ONE path segment. A v2 runId is tenant-bound
(``<tenant>/<opaque>``), so it travels "projected": every UTF-8 byte outside ``[A-Za-z0-9._-]``
becomes ``~`` and two uppercase hex digits (``acme/r-9f3c`` -> ``acme~2Fr-9f3c``, ``~`` ->
``~7E``); a host emits that form and accepts it and the legacy percent form (``acme%2Fr-9f3c``)
(openwop-a2ui.md §8 "id grammars"; spec/v2/core/identity.md §5 "Wire form"). The functions here
work on the RAW path (before any percent-decoding by the web framework): decoding first would
turn ``%2F`` into a ``/`` that then splits the path in the wrong place.

May import: the standard library only.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "MAX_RUN_ID_CHARS",
    "is_usable_run_id",
    "no_endpoint_message",
    "project_run_id",
    "split_run_path",
    "unproject_run_id",
]

# The longest runId we accept, in characters. v2 bounds a runId at 1+128+128 ASCII chars
# (ids.schema.json: <tenant 1..128>/<opaque 16..128>); v1 does not bound it. 256 covers the v2
# grammar's useful range without letting a path segment become an unbounded Kafka key.
MAX_RUN_ID_CHARS = 256
# One decoded character is at most 4 UTF-8 bytes, each at most 3 raw characters (``~XX``): a raw
# segment longer than this cannot decode to a usable runId, so it is refused before decoding.
_MAX_RAW_CHARS = MAX_RUN_ID_CHARS * 4 * 3

# identity.md §5: the bytes that pass through the projection unescaped.
_PASSTHROUGH = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
# An escape in either form, or a ``%`` that starts none (group 1 is then None). A ``~`` that
# starts no escape is a literal ``~``: the v1/v2 id grammars allow ``~`` and RFC 3986 leaves it
# unreserved, so a percent-form client sends it as is. A lone ``%`` is malformed RFC 3986.
_ESCAPE = re.compile(r"[~%]([0-9A-Fa-f]{2})|%")
# The runId segment ends at the first ``/`` or at a ``:`` that starts a custom method
# (``/runs/{runId}:fork``, AIP-136 style): inside a runId both arrive escaped (``~2F``/``~3A``
# or ``%2F``/``%3A``), so the split is unambiguous.
_SEGMENT = re.compile(r"[^/:]*")


def is_usable_run_id(run_id: str) -> bool:
    """A runId the host can key a run by: 1..``MAX_RUN_ID_CHARS`` characters and no control
    character (C0, DEL, C1: they would reach logs, headers and Kafka keys verbatim)."""
    if not 1 <= len(run_id) <= MAX_RUN_ID_CHARS:
        return False
    return not any(unicodedata.category(ch) == "Cc" for ch in run_id)


def _decode_bytes(segment: str) -> bytes | None:
    """The bytes a raw segment spells, or None when it is malformed (a lone ``%``, or a
    character that has no UTF-8 form, i.e. a lone surrogate)."""
    out = bytearray()
    pos = 0
    try:
        for match in _ESCAPE.finditer(segment):
            hex_digits = match.group(1)
            if hex_digits is None:
                return None
            out += segment[pos : match.start()].encode("utf-8")
            out.append(int(hex_digits, 16))
            pos = match.end()
        out += segment[pos:].encode("utf-8")
    except UnicodeEncodeError:
        return None
    return bytes(out)


def unproject_run_id(segment: str) -> str | None:
    """The runId a RAW path segment holds, in the projected (``~XX``) or the percent (``%XX``)
    form (both may mix; hex digits in either case). None when the segment is not a usable runId:
    empty, malformed, not UTF-8 once decoded, too long, or holding a control character."""
    if len(segment) > _MAX_RAW_CHARS:
        return None
    data = _decode_bytes(segment)
    if data is None:
        return None
    try:
        run_id = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return run_id if is_usable_run_id(run_id) else None


def project_run_id(run_id: str) -> str:
    """The one-segment wire form of ``run_id`` (identity.md §5): each UTF-8 byte outside
    ``[A-Za-z0-9._-]`` becomes ``~`` + two uppercase hex digits. ``unproject_run_id`` inverts
    it for every usable runId. Unlike openwop_client's ``project_id`` this never guesses that
    its input is already projected: ``a~2Fb`` is a runId of its own (``a~7E2Fb`` on the wire)."""
    return "".join(
        chr(byte) if byte in _PASSTHROUGH else f"~{byte:02X}" for byte in run_id.encode("utf-8")
    )


def split_run_path(raw_path: str, prefix: str) -> tuple[str, str] | None:
    """Split a RAW request path under ``prefix`` (``/runs/`` or ``/v1/runs/``) into the decoded
    runId and the raw remainder: ``/runs/acme~2Fr1/events/poll`` -> ``("acme/r1",
    "/events/poll")``, ``/runs/abc:fork`` -> ``("abc", ":fork")``, ``/runs/abc`` -> ``("abc",
    "")``. A query string is dropped first (aiohttp's ``raw_path`` carries it). None when the
    path is not under ``prefix`` or its runId segment is not a usable runId."""
    path = raw_path.partition("?")[0].partition("#")[0]
    if not path.startswith(prefix):
        return None
    tail = path[len(prefix) :]
    match = _SEGMENT.match(tail)
    end = match.end() if match else 0
    run_id = unproject_run_id(tail[:end])
    if run_id is None:
        return None
    return run_id, tail[end:]


_ENDPOINTS = ("", "/events", "/events/poll", ":fork", "/envelopes", "/cancel", "/actions")


def no_endpoint_message(prefix: str, run_id: str, rest: str) -> str:
    """What a 404 for a path under a run says. A tenant runId's slash left unescaped
    (``/runs/acme/r-9/events``) reads as the run ``acme`` with an unknown endpoint; when
    joining the first segment back gives a served endpoint, say how to write the path."""
    message = f"no endpoint {prefix}{{runId}}{rest}"
    segment, slash, remainder = rest[1:].partition("/")
    if not rest.startswith("/") or not segment:
        return message
    endpoint = slash + remainder
    if not slash and segment.endswith(":fork"):
        segment, endpoint = segment[: -len(":fork")], ":fork"
    joined = f"{run_id}/{segment}"
    served = endpoint in _ENDPOINTS or endpoint.startswith("/interrupts/")
    if not served or not is_usable_run_id(joined):
        return message
    return (
        f"{message}; if the runId is {joined!r}, its slash is part of one path segment: "
        f"{prefix}{project_run_id(joined)}{endpoint}"
    )
