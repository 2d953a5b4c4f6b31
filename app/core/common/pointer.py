"""RFC 6901 JSON Pointers: the one home for escaping and unescaping a reference token, joining
tokens onto a pointer, and parsing a pointer strictly (STYLE rule 11).

Every refusal names the place it refuses with a pointer into the admission record, the
projector's patches address the surface with pointers, and an ``updateDataModel`` path is one.
Readers that disagree on a pointer disagree on the key, so all of them decode it here: ``~1``
becomes ``/`` and then ``~0`` becomes ``~`` (§4: in that order, so ``~01`` is ``~1``), and a
``~`` followed by anything but ``0`` or ``1`` is malformed (§3).

On the admission hot path (``app.core.admission.limits`` imports it), so it is compiled with mypyc
beside the other hot modules (scripts/compile_core.py).

May import: the standard library only.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PointerError", "escape", "join", "parse", "syntax_error", "unescape"]


class PointerError(ValueError):
    """The text is not an RFC 6901 JSON Pointer (the sender's fault). Callers that refuse
    turn it into their own value or error with the same message."""


def escape(token: str | int) -> str:
    """One reference token for a pointer (§3: ``~`` as ``~0`` first, then ``/`` as ``~1``)."""
    text = str(token)
    if "~" in text:
        text = text.replace("~", "~0")
    if "/" in text:
        text = text.replace("/", "~1")
    return text


def unescape(token: str) -> str:
    """The key one reference token names (§4: ``~1`` -> ``/``, then ``~0`` -> ``~``). Lenient:
    a ``~`` followed by anything else stays as it is (``syntax_error`` finds it)."""
    if "~" not in token:
        return token
    return token.replace("~1", "/").replace("~0", "~")


def join(base: str, *tokens: str | int) -> str:
    """``base`` (a pointer; ``""`` is the whole document) extended by ``tokens``, escaped."""
    return base + "".join("/" + escape(t) for t in tokens)


def syntax_error(pointer: str) -> str | None:
    """Why ``pointer`` breaks §3 (``~`` must be followed by ``0`` or ``1``), or None. A reader
    that took ``~2`` literally and one that refused it would disagree on the key."""
    start = pointer.find("~")
    while start != -1:
        if pointer[start + 1 : start + 2] not in ("0", "1"):
            return f'"~" at character {start} is not followed by 0 or 1'
        start = pointer.find("~", start + 2)
    return None


def parse(path: Any) -> list[str]:
    """The tokens of a pointer, strictly (§3/§4): ``""`` is the root, otherwise ``/``-separated
    tokens, each unescaped. Raises ``PointerError`` for a value that is not a string, a pointer
    that does not start with ``/``, and a ``~`` followed by anything but ``0`` or ``1``."""
    if not isinstance(path, str):
        raise PointerError(f"a path is a string, not {type(path).__name__}")
    if path == "":
        return []
    if path[0] != "/":
        raise PointerError(f"path {path!r} does not start with '/'")
    tokens = path[1:].split("/")
    if "~" not in path:
        return tokens
    if syntax_error(path) is not None:
        raise PointerError(f"path {path!r}: '~' must be followed by 0 or 1 (RFC 6901 §3)")
    return [unescape(t) for t in tokens]
