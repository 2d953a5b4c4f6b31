"""``a2ui-stream bench projection``: the three parts measured as one JSON object, the options
and the run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
from typing import Any

from app.core.projection.subscriptions import MAX_FULL_EVERY
from app.core.runlog.events import RecordedEvent
from app.devtools.bench_output import baseline_missing, emit, load_average
from app.devtools.bench_projection.diffs import measure_bytes, measure_diff, random_pairs
from app.devtools.bench_projection.fanout import fanout_on, measure_fanout
from app.devtools.bench_projection.inputs import RANDOM_PAIRS, surface_changes, v1_events, v2_events
from app.devtools.bench_projection.table import table

__all__ = ["add_parser", "measure", "register", "run"]


async def _fanout_with_broker(events: list[RecordedEvent]) -> tuple[str, list[dict[str, Any]]]:
    from app.shell.cli.broker import start_broker

    broker = start_broker(log=lambda m: print(m, file=sys.stderr))
    try:
        return broker.description, await fanout_on(broker.bootstrap, events)
    finally:
        broker.stop()


# --- the command ---------------------------------------------------------------------------------


def measure(updates: int, produce: bool = False) -> dict[str, Any]:
    import jsonpatch

    from app.core.admission.payload_rules import PayloadRules
    from app.shell.schema_files import load_schema_documents

    rules = PayloadRules.from_documents(load_schema_documents())
    v2_recorded = v2_events(updates, rules)
    v2 = surface_changes(v2_recorded)
    v1 = surface_changes(v1_events(updates, rules))
    v2_pairs = [(c.old.content, c.new.content) for c in v2 if c.old is not None]
    v1_pairs = [(c.old.content, c.new.content) for c in v1 if c.old is not None]
    load_start = load_average()
    produced: dict[str, Any] = {}
    if produce:
        where, rows = asyncio.run(_fanout_with_broker(v2_recorded))
        produced = {"fanout_produced": rows, "broker": where}
    result = {
        "bench": "projection",
        "python": platform.python_version(),
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "load_average_1m": round(os.getloadavg()[0], 2),
        "bytes": {"v2": measure_bytes(v2), "v1": measure_bytes(v1)},
        "bytes_deltas_only": {
            "v2": measure_bytes(v2, MAX_FULL_EVERY),
            "v1": measure_bytes(v1, MAX_FULL_EVERY),
        },
        "diff": [
            measure_diff("v2 projector pairs (100 components, one leaf)", v2_pairs, jsonpatch),
            measure_diff("v1 projector pairs (100 components, one leaf)", v1_pairs, jsonpatch),
            measure_diff(
                "random JSON pairs (arrays, / and ~ keys)",
                random_pairs(RANDOM_PAIRS),
                jsonpatch,
                targeted=False,
            ),
        ],
        "fanout": measure_fanout(v2_recorded),
        **produced,
    }
    return result | {"load_average": {"start": load_start, "end": load_average()}}


def run(args: argparse.Namespace) -> int:
    if args.updates < 2:
        print("a2ui-stream bench projection: --updates must be at least 2", file=sys.stderr)
        return 2
    if baseline_missing("projection", ("jsonpatch",), "the `jsonpatch` package"):
        return 2
    return emit(measure(args.updates, produce=not args.no_produce), args.json, table)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``projection`` under the ``bench`` subcommand's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "projection",
        help="delta vs full bytes, verified delta vs jsonpatch, fan-out cost",
        description=(
            "What the projector costs and saves on a 100-component surface updated one leaf at "
            "a time: the bytes of RFC 6902 delta frames against full frames, the verified "
            "delta against jsonpatch.make_patch, and the cost of fanning frames out to many "
            "subscribers until every frame is acknowledged: the projector's one request per "
            "broker beside one producer send per frame, the way before (on the broker the "
            "harness picks: KAFKA_BOOTSTRAP, else one it starts; --no-produce: none)."
        ),
    )
    parser.add_argument(
        "--no-produce",
        action="store_true",
        help="fan-out: plan + encode only, no broker (the figure of earlier versions)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--updates",
        type=int,
        default=1000,
        metavar="N",
        help="single-leaf updates of the 100-component surface (default 1000)",
    )
    parser.set_defaults(func=run)
    return parser


register = add_parser
