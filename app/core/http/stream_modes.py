"""Stream and poll parameters (openwop-a2ui.md §9): parsing the query and headers of the
event routes, and which recorded events each stream mode carries.

Role: the shell's SSE and poll handlers call one parser per parameter and answer the
``HttpError`` it may return as is; parsers return values, never raise (STYLE rule 3).

Conventions shared by the parsers:

- ``None`` means the parameter is absent. A query parameter that is present but empty
  (``?timeout=``) is malformed, not absent: the OpenAPI schema types each one (integer, or the
  ``streamMode`` pattern) and an empty string matches none of them. ``Last-Event-ID`` is the
  exception: an empty header is "no cursor" (as for an EventSource that has none yet).
- Integers are ASCII decimal digits only: no sign, no ``_``, no Unicode digits (``int()``
  accepts all three). A cursor with more digits than a 63-bit sequence can have is clamped to
  ``MAX_SEQUENCE`` rather than refused: §9 "never refuse a well-formed non-negative integer",
  and a cursor past every sequence means the same whatever its size.

May import: the standard library and ``app.core.http.errors``.
"""

from __future__ import annotations

import re

from app.core.http.errors import HttpError, error

__all__ = [
    "DEFAULT_MODES",
    "MAX_BUFFER_MS",
    "MAX_SEQUENCE",
    "MODES",
    "POLL_TIMEOUT_DEFAULT",
    "POLL_TIMEOUT_MAX",
    "POLL_TIMEOUT_MIN",
    "TERMINAL_EVENT_TYPES",
    "event_in_modes",
    "is_terminal_event",
    "parse_buffer_ms",
    "parse_last_event_id",
    "parse_poll_query",
    "parse_stream_mode",
]

MODES = ("values", "updates", "messages", "debug")
DEFAULT_MODES: frozenset[str] = frozenset({"updates"})
# §9: ``values`` never combines with another mode; the others mix with commas.
_STREAM_MODE = re.compile(r"(values|(updates|messages|debug)(,(updates|messages|debug))*)")

MAX_BUFFER_MS = 5000  # §9: bufferMs 0..5000, larger values clamped
POLL_TIMEOUT_MIN, POLL_TIMEOUT_MAX, POLL_TIMEOUT_DEFAULT = 1, 60, 30  # §9 poll: timeout
MAX_SEQUENCE = 2**63 - 1  # the largest Kafka offset, hence the largest sequence we can hold
_DIGITS = re.compile(r"[0-9]+")
_MAX_SEQUENCE_DIGITS = len(str(MAX_SEQUENCE))

TERMINAL_EVENT_TYPES: frozenset[str] = frozenset({"run.completed", "run.failed", "run.cancelled"})
_SURFACE_TYPES = frozenset({"ui.a2ui-surface", "ui.a2ui-surface.delta"})
_MESSAGE_TYPES = frozenset({"ai.message.chunk"})
# The first segments the protocol owns: every first segment of the v1 RunEventType enum and of
# the v2 closed enum (the negative lookahead of schemas/v2/run-event.schema.json), plus ``ai``
# (v1 stream-modes.md ``ai.message.chunk``) and ``action`` (``action.accepted``). A type whose
# first segment is none of these is a vendor type: debug only (§9). ``ui`` is not listed: only
# the two surface types above are ours, any other ``ui.*`` is a vendor's (``ui`` is not a
# registered org, §8).
_PROTOCOL_NAMESPACES = frozenset(
    {
        "action", "agent", "ai", "approval", "artifact", "authorization", "budget", "cap",
        "channel", "clarification", "commitment", "compensation", "connector", "context",
        "conversation", "core", "deployment", "dispatch", "egress", "envelope", "eval", "goal",
        "import", "interrupt", "lease", "log", "memory", "model", "negotiation", "node",
        "orchestrator", "output", "prompt", "proposal", "provider", "replay", "roster", "run",
        "runOrchestrator", "tool", "trigger", "variable", "version", "voice", "workflow",
        "workflow-chain", "workspace",
    }
)  # fmt: skip


def _bad_request(parameter: str, raw: str, expected: str) -> HttpError:
    return error(
        "validation_error",
        f"{parameter} must be {expected}, not {raw!r}",
        {"parameter": parameter, "value": raw},
    )


def _sequence(digits: str) -> int:
    """A digit string as a sequence number, clamped to ``MAX_SEQUENCE`` (and never handed to
    ``int`` when longer than any sequence: CPython refuses more than 4300 digits)."""
    if len(digits) > _MAX_SEQUENCE_DIGITS:
        return MAX_SEQUENCE
    return min(int(digits), MAX_SEQUENCE)


def parse_stream_mode(raw: str | None) -> frozenset[str] | HttpError:
    """``?streamMode=``: absent -> ``{"updates"}``; a value of the §9 pattern -> its modes;
    anything else -> 400 ``unsupported_stream_mode`` with ``details.supported`` = every mode
    this host serves (the v2 registry requires it; combinations are not listed)."""
    if raw is None:
        return DEFAULT_MODES
    if _STREAM_MODE.fullmatch(raw) is None:
        return error(
            "unsupported_stream_mode",
            f"streamMode {raw!r} is not supported: use one of values, or a comma-separated "
            "mix of updates, messages and debug",
            {"supported": list(MODES)},
        )
    return frozenset(raw.split(","))


def parse_last_event_id(raw: str | None) -> int | None | HttpError:
    """The ``Last-Event-ID`` header: an exclusive cursor (§9: stream ``sequence > N``). None
    when absent or empty; a non-negative decimal integer -> that int (optional whitespace
    around it is not part of the field value, RFC 9110 §5.5); anything else -> 400
    ``validation_error`` (§9 SHOULD refuse it)."""
    if raw is None:
        return None
    value = raw.strip(" \t")
    if not value:
        return None
    if _DIGITS.fullmatch(value) is None:
        return _bad_request("Last-Event-ID", raw, "a non-negative decimal integer")
    return _sequence(value)


def parse_buffer_ms(raw: str | None) -> int | None | HttpError:
    """``?bufferMs=``: None when absent; a non-negative decimal integer -> that many
    milliseconds, values above ``MAX_BUFFER_MS`` clamped to it (§9); anything else (negative,
    empty, not an integer) -> 400 ``validation_error``."""
    if raw is None:
        return None
    if _DIGITS.fullmatch(raw) is None:
        return _bad_request("bufferMs", raw, f"an integer from 0 to {MAX_BUFFER_MS}")
    return min(_sequence(raw), MAX_BUFFER_MS)


def parse_poll_query(
    after_sequence: str | None, timeout: str | None
) -> tuple[int, int] | HttpError:
    """``GET /runs/{runId}/events/poll`` query (§9): ``(after, timeout_seconds)``. The poll
    answers events with ``sequence > after``; an absent ``afterSequence`` is ``-1`` (from the
    first event, sequence 0). ``timeout`` is 1..60 seconds, default 30; out of range, or either
    parameter not a non-negative decimal integer -> 400 ``validation_error``."""
    after = -1
    if after_sequence is not None:
        if _DIGITS.fullmatch(after_sequence) is None:
            return _bad_request("afterSequence", after_sequence, "a non-negative integer")
        after = _sequence(after_sequence)
    seconds = POLL_TIMEOUT_DEFAULT
    if timeout is not None:
        expected = f"an integer from {POLL_TIMEOUT_MIN} to {POLL_TIMEOUT_MAX}"
        if _DIGITS.fullmatch(timeout) is None:
            return _bad_request("timeout", timeout, expected)
        seconds = _sequence(timeout)
        if not POLL_TIMEOUT_MIN <= seconds <= POLL_TIMEOUT_MAX:
            return _bad_request("timeout", timeout, expected)
    return after, seconds


def _is_vendor(event_type: str) -> bool:
    return event_type.partition(".")[0] not in _PROTOCOL_NAMESPACES


def event_in_modes(event_type: str, modes: frozenset[str]) -> bool:
    """Whether a recorded event of ``event_type`` goes to a subscriber of ``modes`` (§9; a
    mixed mode is the union of its filters):

    - ``debug`` carries every event;
    - ``ai.message.chunk`` is in ``messages``;
    - the surface types (``ui.a2ui-surface`` and its delta frames) and every other protocol
      type (run lifecycle, nodes, interrupts, ...) are in ``updates`` (§9 [GAP] recommendation:
      surface events in updates and debug);
    - vendor types (first segment not a protocol namespace) are in ``debug`` only.

    ``values`` carries state snapshots, which the caller builds; no event is in ``values``."""
    if "debug" in modes:
        return True
    if event_type in _MESSAGE_TYPES:
        return "messages" in modes
    if event_type in _SURFACE_TYPES:
        return "updates" in modes
    return "updates" in modes and not _is_vendor(event_type)


def is_terminal_event(event_type: str) -> bool:
    """§9: the stream closes after ``run.completed``, ``run.failed`` or ``run.cancelled``."""
    return event_type in TERMINAL_EVENT_TYPES
