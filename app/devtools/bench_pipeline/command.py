"""``a2ui-stream bench pipeline``: its options, help texts and run."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

from app.devtools.bench_output import (
    emit,
)
from app.devtools.bench_pipeline.measure import measure
from app.devtools.bench_pipeline.records import DEFAULT_ROLES, Options, say
from app.devtools.bench_pipeline.table import table
from app.shell.cli.broker import start_broker

__all__ = ["EPILOG", "register", "run"]


def run(args: argparse.Namespace) -> int:
    if args.records < 100:
        print("a2ui-stream bench pipeline: --records must be at least 100", file=sys.stderr)
        return 2
    for roles in args.roles:
        names = set(roles.split(","))
        if not names or names - {"validator", "projector"}:
            print(f"a2ui-stream bench pipeline: --roles {roles!r}: validator and/or projector")
            return 2
    if "projector" in args.roles and not any("validator" in r for r in args.roles):
        print(
            "a2ui-stream bench pipeline: --roles projector replays the log a validator pass "
            "wrote: list a role set with the validator too",
            file=sys.stderr,
        )
        return 2
    opts = Options(
        records=args.records,
        runs=args.runs,
        partitions=args.partitions,
        rate=args.rate,
        rounds=args.rounds,
        workers=args.workers,
        roles=tuple(dict.fromkeys(args.roles)),
        latency_records=args.latency_records,
        worker_producer=args.worker_producer,
    )

    async def main() -> dict[str, Any]:
        # SIGTERM cancels the bench, so its finally blocks stop the processes it started
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        broker = start_broker(log=say)
        try:
            return await measure(opts, broker)
        finally:
            broker.stop()

    try:
        result = asyncio.run(main())
    except asyncio.CancelledError:
        say("stopped (SIGTERM); the processes it started are stopped")
        return 143
    return emit(result, args.json, table)


EPILOG = """\
what each figure means:
  envelopes/s            records published in a pass / seconds from the bench's first
                         admission send to the moment its read_committed consumer saw the last
                         outcome (log record or dead letter). The producer runs beside the
                         worker (live); start-up and readiness are before the clock.
  pipeline, roles R      --workers `a2ui-stream worker` processes with A2UI_STREAM_ROLES=R;
                         validator,projector is the default worker. projector alone replays
                         the log a validator pass wrote and ends when the projector group's
                         committed offsets reach the log's end.
  ceiling a              the same records through --workers processes that move each admission
                         record to the log in the validator's transaction pattern (per-partition
                         transactional producer, the offsets once per commit interval, commit),
                         with no decision: what transactions alone allow here.
  ceiling a2             (--worker-producer) the same with one transactional producer per
                         process: a batch is one transaction over all its partitions, each
                         carrying its offsets fenced by the group generation (Kafka's
                         KIP-447, "exactly_once_v2" in Kafka Streams): the design that would
                         replace a producer per partition (docs/pipeline.md).
  ceiling b              the same records produced without transactions and consumed back.
  pipeline / ceiling     a pass over the ceiling's pass of the same round (interleaved rounds,
                         fresh topics of the same layout and partition count each pass).
  send -> committed      per record offered at --rate: its send to its outcome visible to the
                         bench's read_committed consumer (one clock). Offered once the
                         processes are quiet after the timed pass (under 0.15 of a core:
                         the projector and read side done with its backlog); the table
                         says how long that took. The CPU per envelope at that rate is
                         the processes' CPU from the first of those sends until they are
                         quiet again, their idle CPU over the phase included.
  CPU per envelope       the user + system CPU seconds of the worker (or pass-through)
                         processes from just before the first timed send until they are
                         quiet after the drain (the projector's and read side's catch-up
                         included), over the records published: the cost, where envelopes/s
                         is also the machine's contention. Set A2UI_STREAM_PROFILE_DIR to a
                         directory to run them under the CPU-time sampler
                         (app/devtools/cpu_profile.py) and see where it goes.
  load average           /proc/loadavg at the start and the end: the machine may be shared.
"""


# long: one add_argument per option, in the order --help lists them
def register(bench_subparsers: Any) -> None:
    parser = bench_subparsers.add_parser(
        "pipeline",
        help="end-to-end envelopes/s through workers vs transactional and raw ceilings",
        description=(
            "Envelopes per second end to end through real worker processes, each pass beside\n"
            "a transactional pass-through and a raw produce+consume measured in the same round\n"
            "on the same broker and topic layout (the harness picks the broker: KAFKA_BOOTSTRAP,\n"
            "else one it starts). Printed, never asserted."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--records", type=int, default=20000, help="envelopes per pass (default 20000)"
    )
    parser.add_argument("--runs", type=int, default=50, help="runs they spread over (default 50)")
    parser.add_argument("--partitions", type=int, default=6, help="partitions (default 6)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="interleaved rounds of every pass (default 3)"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="worker (and pass-through) processes (default 1)"
    )
    parser.add_argument(
        "--roles",
        nargs="+",
        default=[DEFAULT_ROLES],
        metavar="ROLES",
        help=(
            "role sets to bench, each a pipeline pass per round (default validator,projector; "
            "e.g. --roles validator,projector validator projector)"
        ),
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=1000.0,
        help="envelopes/s offered in the latency phase (default 1000)",
    )
    parser.add_argument(
        "--latency-records",
        type=int,
        default=2000,
        help="records offered at --rate after each timed pass (default 2000; 0: none)",
    )
    parser.add_argument(
        "--worker-producer",
        action="store_true",
        help="also measure ceiling a2: the pass-through with one producer per process (KIP-447)",
    )
    parser.set_defaults(func=run)
