"""``a2ui-stream bench scale``: its options, help texts and run."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from app.devtools.bench_output import emit
from app.devtools.bench_scale.designs import DEFAULT_ENVELOPES, DESIGNS
from app.devtools.bench_scale.measure import measure
from app.devtools.bench_scale.table import table
from app.devtools.bench_scale.workers import meminfo_mb

__all__ = ["DESCRIPTION", "EPILOG", "register", "run"]


def run(args: argparse.Namespace) -> int:
    if (
        args.envelopes < 1000
        or args.minutes <= 0
        or args.restarts < 1
        or args.reads < 1
        or args.cpu_windows < 1
        or args.cpu_rate < 0
    ):
        print(
            "a2ui-stream bench scale: needs --envelopes >= 1000, --minutes > 0, "
            "--restarts >= 1, --reads >= 1, --cpu-windows >= 1 and --cpu-rate >= 0",
            file=sys.stderr,
        )
        return 2
    if args.max_rss_mb is None:
        args.max_rss_mb = meminfo_mb() // 5
    unknown = [d for d in args.designs if d not in DESIGNS]
    if unknown:
        print(
            f"a2ui-stream bench scale: unknown design {', '.join(unknown)}; "
            f"known: {', '.join(DESIGNS)}",
            file=sys.stderr,
        )
        return 2
    result = asyncio.run(measure(args))
    return emit(result, args.json, table)


def _designs(text: str) -> list[str]:
    return [d.strip() for d in text.split(",") if d.strip()]


DESCRIPTION = """\
What a worker costs as the log grows, on a real broker (KAFKA_BOOTSTRAP, or one the harness
starts): its memory against the envelopes recorded, the time from a restart to ready, what two
workers of one deployment each hold, and reads of runs a worker owns against runs the other
owns. Prints a table (--json: one JSON object). Takes about 15 minutes at the default size.

It publishes a realistic, seeded mix (many runs at once, surfaces updated many times, some runs
cancelled through the HTTP API or deleted with tombstones, a few refusals and re-sends) at live
pace, and stops at N, after --minutes, or when the worker's memory passes --max-rss-mb (the
output says which); everything after that is measured at the size reached."""

EPILOG = """\
rows:
  worker RSS against envelopes recorded   one worker, sampled once all is decided and read
  restart to ready                        from SIGKILL (or SIGTERM) until, on every partition,
                                          a poll of a known run shows its last event and a
                                          POSTed envelope gets its 201; beside it, when the
                                          validator gauge shows every partition restored and
                                          when the worker is quiet (its background restores done)
  two workers                             a second worker joins: each one's RSS, disk, state
                                          (a2ui_http_runs, a2ui_validator_run_states,
                                          a2ui_projector_surfaces) and its share of what one
                                          worker alone held; CPU per envelope of both vs one
                                          (--cpu-windows windows each: the median and range),
                                          also above the workers' idle CPU, with the commits
                                          and moves per envelope that explain it
  read p50 / p99                          GETs of runs on the worker's own partitions vs the
                                          other worker's: the poll of the last event, the
                                          whole event-log read

columns:
  one per design measured in the run (--designs). default is the worker as built with its
  default settings; the output names the commit it ran. The target column quotes the scale
  targets (docs/scale.md); nothing is asserted. The machine may be shared: the load average
  is printed, restarts and read rounds are repeated to show spreads."""


def register(bench_subparsers: Any) -> None:
    parser = bench_subparsers.add_parser(
        "scale",
        help="worker RSS vs envelopes, restart to ready, 2 workers' state, own vs other reads",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    _add_budgets(parser)
    _add_phase_sizes(parser)
    parser.add_argument(
        "--keep-logs",
        metavar="DIR",
        default=None,
        help="copy the workers' logs into DIR/<design>/ at the end (they are kept anyway "
        "when the bench fails)",
    )
    parser.add_argument(
        "--designs",
        type=_designs,
        default=["default"],
        metavar="A,B",
        help="the designs to measure, one column each (default: default; known: "
        + ", ".join(DESIGNS)
        + ")",
    )
    parser.set_defaults(func=run)


def _add_budgets(parser: argparse.ArgumentParser) -> None:
    """How far the grow phase goes: envelopes, time and memory."""
    parser.add_argument(
        "--envelopes",
        type=int,
        default=DEFAULT_ENVELOPES,
        metavar="N",
        help="envelopes to publish (default 1,000,000; fewer if a budget stops it first)",
    )
    parser.add_argument(
        "--minutes",
        type=float,
        default=10.0,
        metavar="M",
        help="time budget for publishing (default 10)",
    )
    parser.add_argument(
        "--max-rss-mb",
        type=int,
        default=None,
        metavar="MB",
        help="memory budget: stop publishing once the worker's RSS passes it (default: a fifth "
        "of MemAvailable at start; 1.5x it kills the worker)",
    )


def _add_phase_sizes(parser: argparse.ArgumentParser) -> None:
    """How much each later phase measures: restarts, CPU windows, reads, partitions."""
    parser.add_argument(
        "--restarts",
        type=int,
        default=3,
        help="SIGKILL restarts of the one worker, then one with SIGTERM; as many of one of "
        "two workers (default 3)",
    )
    parser.add_argument(
        "--cpu-rate",
        type=float,
        default=2000.0,
        help="envelopes/s offered in a second set of CPU windows, below saturation "
        "(default 2000; 0: none)",
    )
    parser.add_argument(
        "--cpu-windows",
        type=int,
        default=3,
        help="CPU windows with one worker, then as many with two (default 3): the median "
        "and the range are printed",
    )
    parser.add_argument(
        "--reads",
        type=int,
        default=200,
        help="reads per kind, locality, worker and round (default 200)",
    )
    parser.add_argument("--read-rounds", type=int, default=3, help="read rounds (default 3)")
    parser.add_argument("--partitions", type=int, default=6, help="partitions (default 6)")
