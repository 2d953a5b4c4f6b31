"""Log lines that a producer's bytes cannot forge (issue 14 item 10).

Shell module. A value that reaches a log line from the wire (a runId, a surfaceId, a Kafka
key) could carry a newline or another control character and write a line of its own into
the worker's log ("...\\nINFO validator: all good"). Admission refuses runIds outside the id
grammar (app.core.admission.identifiers), but a log line may name a value before it was judged, and
libraries log too. So every string argument of every log record is escaped once, at the
record factory: control characters (C0, DEL, C1, and the Unicode line and paragraph
separators) become their ``\\x..`` / ``\\u....`` escapes; everything else is left as it was.
"""

from __future__ import annotations

import logging
import re
from typing import Any

__all__ = ["escape", "install"]

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str) -> str:
    """``text`` with every control character written as an escape."""
    return _UNSAFE.sub(_escaped, text) if _UNSAFE.search(text) else text


def _safe(value: Any) -> Any:
    return escape(value) if isinstance(value, str) else value


_installed = False


def install() -> None:
    """Escape the string arguments (and a message that is not a format string, e.g. an
    exception's text) of every log record from now on. Idempotent."""
    global _installed
    if _installed:
        return
    _installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if isinstance(record.args, tuple):
            record.args = tuple(_safe(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: _safe(value) for key, value in record.args.items()}
        if not record.args and isinstance(record.msg, str):
            record.msg = escape(record.msg)
        return record

    logging.setLogRecordFactory(factory)
