"""Log lines a producer's bytes cannot forge (app/shell/log_safety.py, issue 14 item 10)."""

from __future__ import annotations

import io
import logging

from app.shell.log_safety import escape, install


def test_escape_writes_control_characters_as_escapes() -> None:
    assert escape("r\nINFO forged") == "r\\x0aINFO forged"
    assert escape("a\rb\x1b[31mc\x7f\u2028") == "a\\x0db\\x1b[31mc\\x7f\\u2028"
    assert escape("tenant/é-ok ~") == "tenant/é-ok ~"


def test_a_logged_value_cannot_start_a_line_of_its_own() -> None:
    install()
    install()  # idempotent
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("a2ui_stream.test_log_safety")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        logger.warning("projection_warning run=%s: %s", "r\nINFO validator: all good", 7)
        logger.warning("no args \n here")
    finally:
        logger.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert lines == [
        "projection_warning run=r\\x0aINFO validator: all good: 7",
        "no args \\x0a here",
    ]
