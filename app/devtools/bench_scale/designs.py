"""The scale bench's fixed sizes and waits, issue 15's targets, and the designs it measures
(one column each: a name and the worker environment that selects it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_ENVELOPES",
    "DESIGNS",
    "Design",
    "NOW",
    "PROGRESS_FRESH_S",
    "STOP_SECONDS",
    "SUB_CHUNK",
    "TARGETS",
    "WAIT_SECONDS",
    "WINDOW",
]


NOW = "2026-01-01T00:00:00Z"
WINDOW = 10_000  # records published but not yet decided, at most
# How long a publishing round trusts the decided count it read last: each read renders every
# worker's /metrics, which the CPU windows count as the pipeline's. At 2,000/s a round is 100
# records and read it twice (profiled: the HTTP requests the workers served were 75 of 2,176
# CPU samples with one worker and 200 of 2,887 with two, a sixth of the difference).
PROGRESS_FRESH_S = 0.25
SUB_CHUNK = 1_000  # records per publish round
WAIT_SECONDS = 900.0  # the longest any one wait (catch-up, restore) may take
STOP_SECONDS = 240.0  # a SIGTERM'd worker is SIGKILLed if it has not exited by then
DEFAULT_ENVELOPES = 1_000_000
TARGETS = {
    "rss_mb_at_1m": 300,
    "rss_ratio_1m_to_50k": 1.5,
    "restart_ready_s_at_1m": 15,
    "state_share_of_one": 0.60,
    "forwarded_read_extra_p99_ms": 10,
}


@dataclass(frozen=True)
class Design:
    """One way of running the workers, measured as one column: its name, what it is, and the
    worker environment that selects it."""

    name: str
    summary: str
    env: dict[str, str] = field(default_factory=dict)


DESIGNS: dict[str, Design] = {
    "default": Design("default", "the worker as built, with its default settings"),
    # issue 15 item 3: the projector's cache small enough to evict at bench sizes
    "projector-cache-256": Design(
        "projector-cache-256",
        "the projector's cache bounded to 256 surfaces (idle runs evicted, rebuilt on demand)",
        {"A2UI_STREAM_PROJECTOR_CACHE_SURFACES": "256"},
    ),
}
