"""The fault scenarios: the pipeline on a real broker while something breaks, each ending with
the accounting (docs/reliability.md).

Shell module. Each scenario is ``async def name(broker, size, tmp, seed=1) -> Report``: it
creates its own topics (a unique prefix), starts ``a2ui-stream worker`` processes, publishes
about ``size`` admission records (the mixed corpus of ``fault_kit.corpus``: valid lifecycles,
fold violations, excluded components, bad shapes, undecodable bytes, re-sends) spread over
time, injects its fault mid-stream, waits for the pipeline to settle (every record decided,
every worker's lag 0; bounded) and then checks:

- the accounting of ``fault_accounting.tally`` against the core oracle: published = admitted
  + refused + deduplicated, lost 0, duplicated 0, mis-ordered 0, wrong 0;
- every subscriber's reconstructed surfaces equal the log's materialization;
- no worker crashed (an exit we did not cause, or a service crash in its log).

The tests (tests/integration/test_faults.py) run them at CI size; ``a2ui-stream soak`` runs
them repeatedly, bigger.

This module is the registry (``SCENARIOS``: name, function, what it proves); the scenarios
are grouped by what they break: ``fault_scenarios_members`` (members and ownership),
``fault_scenarios_subscribers`` (subscribers and SSE), ``fault_scenarios_broker`` (the broker
and producers); all run on ``fault_stage.Stage``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from app.devtools.fault_scenarios_broker import broker_restart, producer_retries
from app.devtools.fault_scenarios_members import rebalance_kill, sigkill_loop, zombie_member
from app.devtools.fault_scenarios_subscribers import (
    resync_storm,
    sse_owner_change,
    subscriber_pause,
)
from app.devtools.fault_stage import Report
from app.shell.cli.broker import Broker

__all__ = ["SCENARIOS", "Report", "Scenario"]


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[Broker, int, Path, int], Awaitable[Report]]
    proves: str


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("sigkill-loop", sigkill_loop, "crash safety: SIGKILL repeatedly mid-stream"),
        Scenario("broker-restart", broker_restart, "the broker stops and restarts mid-stream"),
        Scenario("rebalance-kill", rebalance_kill, "a member killed during a rebalance"),
        Scenario("subscriber-pause", subscriber_pause, "subscribers stop reading, catch up"),
        Scenario("resync-storm", resync_storm, "many full-surface requests at once"),
        Scenario("producer-retries", producer_retries, "same correlationIds re-sent"),
        Scenario("zombie-member", zombie_member, "a member stopped past its session resumes"),
        Scenario(
            "sse-owner-change",
            sse_owner_change,
            "owners change under attached SSE clients, which resume",
        ),
    )
}
