"""The tokens file (``A2UI_STREAM_HTTP_TOKENS_FILE``), read once at start (issue 18 item 1).

Shell module: reads the file's bytes and calls the pure
``app.core.http.principals.parse_principals`` once; ``principals_for`` joins it with the plain
``A2UI_STREAM_HTTP_TOKENS`` list (every tenant, every right) and the laptop mode
(``A2UI_STREAM_HTTP_AUTH=off``: ``TOKENLESS``, the file is not read, as tokens are ignored there
today). The worker builds the result once at start and the route dispatcher (``app.shell.http.api``)
checks every request with ``app.core.http.principals.authorize``
(docs/http.md, "Tenant-scoped tokens").

Secrets: the file holds SHA-256 digests only, and nothing here logs. An error names the
variable, the file, the entry and the field (``app.core.http.principals.Malformed``), never a token
or a digest, and an unreadable file says why by the OS error's name, not its content.
"""

from __future__ import annotations

from app.core.http.principals import (
    TOKENLESS,
    Malformed,
    Principals,
    joined,
    parse_principals,
    plain_principals,
)
from app.shell.errors import OperatorError
from app.shell.settings import Settings

__all__ = ["describe_tokens_file", "principals_for", "read_principals_file"]

_VARIABLE = "A2UI_STREAM_HTTP_TOKENS_FILE"
# A tokens file of a few thousand principals is tens of KiB; refusing a huge file keeps a
# mistaken path (a log, a disk image) from being read into memory at start.
_MAX_BYTES = 4 * 1024 * 1024


def read_principals_file(path: str) -> Principals:
    """The principals the tokens file at ``path`` declares. ``OperatorError`` says what to fix:
    the file cannot be read, is too large, or is malformed (which entry, which field)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_BYTES + 1)
    except FileNotFoundError:
        raise OperatorError(
            f"{_VARIABLE}={path}: no such file; write the tokens file there (docs/http.md, "
            "Tenant-scoped tokens) or unset the variable"
        ) from None
    except OSError as exc:
        raise OperatorError(
            f"{_VARIABLE}={path}: cannot read it ({type(exc).__name__}"
            f"{': ' + exc.strerror if exc.strerror else ''}); check the path and its permissions"
        ) from None
    if len(data) > _MAX_BYTES:
        raise OperatorError(
            f"{_VARIABLE}={path}: larger than {_MAX_BYTES // (1024 * 1024)} MiB, not a tokens file"
        )
    found = parse_principals(data)
    if isinstance(found, Malformed):
        raise OperatorError(f"{_VARIABLE}={path}: {found.message}")
    return found


def principals_for(settings: Settings) -> Principals:
    """Every principal the worker's HTTP API knows: none needed in the laptop mode, else the
    plain token list's and the tokens file's. Call once at start; ``OperatorError`` on a bad
    file or a token that both name."""
    if not settings.http_auth:
        return TOKENLESS
    plain = plain_principals(settings.http_tokens)
    if not settings.http_tokens_file:
        return plain
    both = joined(plain, read_principals_file(settings.http_tokens_file))
    if isinstance(both, Malformed):
        raise OperatorError(
            f"A2UI_STREAM_HTTP_TOKENS and {_VARIABLE}={settings.http_tokens_file}: {both.message}"
        )
    return both


def describe_tokens_file(path: str) -> str:
    """One line for an operator's report (e.g. ``a2ui-stream config``): how many principals
    the file declares, or what is wrong with it. Never a token or a digest."""
    if not path:
        return "no tokens file"
    try:
        found = read_principals_file(path)
    except OperatorError as exc:
        return str(exc)
    count = len(found)
    return f"{_VARIABLE}={path}: {count} principal{'' if count == 1 else 's'}"
