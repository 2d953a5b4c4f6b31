"""Stream and poll parameters (app.core.http.stream_modes, openwop-a2ui.md §9): the parsers' tables,
the stream-mode membership of recorded events, and the terminal types."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.http.errors import HttpError
from app.core.http.stream_modes import (
    DEFAULT_MODES,
    MAX_SEQUENCE,
    MODES,
    event_in_modes,
    is_terminal_event,
    parse_buffer_ms,
    parse_last_event_id,
    parse_poll_query,
    parse_stream_mode,
)

UPSTREAM = Path(__file__).resolve().parents[2].parent / "shared" / "upstream" / "openwop"

# --- streamMode ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "modes"),
    [
        (None, {"updates"}),
        ("values", {"values"}),
        ("updates", {"updates"}),
        ("messages", {"messages"}),
        ("debug", {"debug"}),
        ("updates,messages", {"updates", "messages"}),
        ("debug,updates,messages", {"debug", "updates", "messages"}),
        ("updates,updates", {"updates"}),
    ],
)
def test_parse_stream_mode(raw: str | None, modes: set[str]) -> None:
    assert parse_stream_mode(raw) == frozenset(modes)


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "values,updates",  # §9: values never combines
        "updates,values",
        "Updates",
        "updates,",
        ",updates",
        "updates messages",
        "updates;messages",
        " updates",
        "custom",
        "updates\n",
    ],
)
def test_parse_stream_mode_refuses(raw: str) -> None:
    answer = parse_stream_mode(raw)
    assert isinstance(answer, HttpError)
    assert answer.status == 400
    assert answer.body["error"] == "unsupported_stream_mode"
    # The v2 registry requires details.supported: the individual modes served.
    assert answer.body["details"] == {"supported": ["values", "updates", "messages", "debug"]}


def test_default_modes() -> None:
    assert frozenset({"updates"}) == DEFAULT_MODES
    assert MODES == ("values", "updates", "messages", "debug")


# --- Last-Event-ID, bufferMs, poll query -----------------------------------------------------


def _is_validation_error(answer: object) -> bool:
    return (
        isinstance(answer, HttpError)
        and answer.status == 400
        and answer.body["error"] == "validation_error"
    )


@pytest.mark.parametrize(
    ("raw", "cursor"),
    [
        (None, None),
        ("", None),
        ("  ", None),
        ("0", 0),
        ("7", 7),
        ("007", 7),
        (" 12\t", 12),  # optional whitespace is not part of a field value (RFC 9110 §5.5)
        (str(MAX_SEQUENCE), MAX_SEQUENCE),
        (str(MAX_SEQUENCE + 1), MAX_SEQUENCE),  # well-formed: clamped, never refused
        ("9" * 5000, MAX_SEQUENCE),  # more digits than int() accepts
    ],
)
def test_parse_last_event_id(raw: str | None, cursor: int | None) -> None:
    assert parse_last_event_id(raw) == cursor


@pytest.mark.parametrize("raw", ["-1", "+1", "1.0", "1e3", "abc", "1_000", "٣", "²", "0x10"])
def test_parse_last_event_id_refuses(raw: str) -> None:
    assert _is_validation_error(parse_last_event_id(raw))


@given(st.integers(min_value=0, max_value=MAX_SEQUENCE))
def test_law_any_non_negative_integer_is_a_cursor(n: int) -> None:
    assert parse_last_event_id(str(n)) == n


@pytest.mark.parametrize(
    ("raw", "ms"),
    [
        (None, None),
        ("0", 0),
        ("250", 250),
        ("5000", 5000),
        ("5001", 5000),  # §9: larger values are clamped
        ("99999999999999999999999", 5000),
    ],
)
def test_parse_buffer_ms(raw: str | None, ms: int | None) -> None:
    assert parse_buffer_ms(raw) == ms


@pytest.mark.parametrize("raw", ["", "-1", "-0", "+5", "1.5", "ms", " 5"])
def test_parse_buffer_ms_refuses(raw: str) -> None:
    assert _is_validation_error(parse_buffer_ms(raw))


@pytest.mark.parametrize(
    ("after", "timeout", "parsed"),
    [
        (None, None, (-1, 30)),  # from the first event; default timeout
        ("0", None, (0, 30)),
        ("41", "1", (41, 1)),
        ("41", "60", (41, 60)),
        (None, "05", (-1, 5)),
        ("99999999999999999999999", None, (MAX_SEQUENCE, 30)),
    ],
)
def test_parse_poll_query(after: str | None, timeout: str | None, parsed: tuple[int, int]) -> None:
    assert parse_poll_query(after, timeout) == parsed


@pytest.mark.parametrize(
    ("after", "timeout", "parameter"),
    [
        ("-1", None, "afterSequence"),
        ("", None, "afterSequence"),
        ("x", None, "afterSequence"),
        ("1.5", None, "afterSequence"),
        (None, "0", "timeout"),
        (None, "61", "timeout"),
        (None, "", "timeout"),
        (None, "-5", "timeout"),
        (None, "30s", "timeout"),
        (None, "9" * 5000, "timeout"),
    ],
)
def test_parse_poll_query_refuses(after: str | None, timeout: str | None, parameter: str) -> None:
    answer = parse_poll_query(after, timeout)
    assert _is_validation_error(answer)
    assert isinstance(answer, HttpError)
    assert answer.body["details"]["parameter"] == parameter


# --- stream-mode membership ------------------------------------------------------------------

SURFACE = "ui.a2ui-surface"
DELTA = "ui.a2ui-surface.delta"
CHUNK = "ai.message.chunk"
LIFECYCLE = [
    "run.created",
    "run.started",
    "run.completed",
    "run.failed",
    "run.cancelled",
    "node.suspended",
    "node.resumed",
    "interrupt.resolved",
    "action.accepted",
    "approval.granted",
    "workflow-chain.event",
    "runOrchestrator.decided",
]
VENDOR = [
    "openwop-v2-reference.a2ui-surface-recorded",
    "acme.canvas.published",
    "ui.other-thing",  # only the two surface types are ours under ui.
    "runs.started",  # a near miss of a protocol namespace is a vendor's
    "nodot",
]

# (event type, modes, expected): §9 and the [GAP] recommendation (surfaces in updates + debug).
MEMBERSHIP = (
    [(t, m, m in ("updates", "debug")) for t in [SURFACE, DELTA, *LIFECYCLE] for m in MODES]
    + [(CHUNK, m, m in ("messages", "debug")) for m in MODES]
    + [(t, m, m == "debug") for t in VENDOR for m in MODES]
)


@pytest.mark.parametrize(("event_type", "mode", "expected"), MEMBERSHIP)
def test_event_in_single_mode(event_type: str, mode: str, expected: bool) -> None:
    assert event_in_modes(event_type, frozenset({mode})) is expected


@given(
    st.sampled_from([SURFACE, DELTA, CHUNK, *LIFECYCLE, *VENDOR]),
    st.sets(st.sampled_from(["updates", "messages", "debug"]), min_size=1),
)
def test_law_mixed_mode_is_the_union_of_its_filters(event_type: str, modes: set[str]) -> None:
    union = any(event_in_modes(event_type, frozenset({m})) for m in modes)
    assert event_in_modes(event_type, frozenset(modes)) is union


@given(st.text(max_size=40))
def test_law_debug_carries_everything_and_values_nothing(event_type: str) -> None:
    assert event_in_modes(event_type, frozenset({"debug"})) is True
    assert event_in_modes(event_type, frozenset({"values"})) is False


@pytest.mark.parametrize(
    ("event_type", "terminal"),
    [
        ("run.completed", True),
        ("run.failed", True),
        ("run.cancelled", True),
        ("run.started", False),
        ("run.paused", False),
        ("node.suspended", False),
        ("ui.a2ui-surface", False),
        ("run.completed.x", False),
        ("", False),
    ],
)
def test_is_terminal_event(event_type: str, terminal: bool) -> None:
    assert is_terminal_event(event_type) is terminal


@pytest.mark.parametrize(
    ("schema", "enum_at"),
    [
        ("schemas/run-event.schema.json", ("$defs", "RunEventType", "enum")),
        ("schemas/v2/run-event.schema.json", ("properties", "type", "oneOf", 0, "enum")),
    ],
)
def test_every_registered_event_type_is_in_updates(
    schema: str, enum_at: tuple[object, ...]
) -> None:
    """Every type of the v1 RunEventType enum and of the v2 closed enum is a protocol type, so
    none is taken for a vendor type (debug only)."""
    path = UPSTREAM / schema
    if not path.is_file():
        pytest.skip(f"upstream schema not found at {path}")
    node = json.loads(path.read_text(encoding="utf-8"))
    for key in enum_at:
        node = node[key]
    assert len(node) > 50
    assert [t for t in node if not event_in_modes(t, frozenset({"updates"}))] == []
