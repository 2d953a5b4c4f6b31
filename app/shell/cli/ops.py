"""Operators' commands on runs: ``runs delete`` and ``log`` (``deadletter`` is
``app.shell.cli.deadletter``).

Shell module: reads the log topic (read_committed), asks ``app.core.admission.ops`` what to print or
tombstone, and performs the sends. docs/operations.md has examples.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer

from app.core.admission.ops import event_line, run_events, tombstone_keys
from app.core.runlog.keys import partition_for_run
from app.shell.cli.client import client_command, read_committed, topic_names
from app.shell.errors import OperatorError
from app.shell.settings import load_settings
from app.shell.worker.kafka_io import require_topic, started

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    _add_runs(sub)
    log = sub.add_parser(
        "log",
        help="print a run's recorded events in order (ids and message kinds, never values)",
        description=(
            "Print run RUN's recorded events from the per-run log, in sequence order (committed "
            "events only). Events removed by `runs delete` are skipped. One line per event: "
            "sequence, eventId, timestamp, type, trust, nodeId, causationId, and for A2UI v0.9 "
            "bodies the surfaceId and the message kinds; --json prints the whole events."
        ),
    )
    log.add_argument("run", metavar="RUN", help="the runId")
    log.add_argument(
        "--from",
        dest="from_sequence",
        type=_sequence,
        default=0,
        metavar="SEQ",
        help="start at this sequence (default 0)",
    )
    log.add_argument("--json", action="store_true", help="JSON Lines: one recorded event a line")
    log.add_argument("--bootstrap", help="override KAFKA_BOOTSTRAP")
    log.set_defaults(func=_run_log)


def _add_runs(sub: Any) -> None:
    runs = sub.add_parser(
        "runs",
        help="operate on whole runs (delete)",
        description="Operate on a whole run: `runs delete RUN` removes its recorded events.",
    )
    runs_sub = runs.add_subparsers(dest="runs_command", metavar="ACTION")
    delete = runs_sub.add_parser(
        "delete",
        help="tombstone every log key of a run (compaction then removes them on Apache Kafka)",
        description=(
            "Write a tombstone for every live log key RUN#seq of run RUN, on the run's "
            "partition. Apache Kafka's log cleaner then removes the events (tansu never "
            "compacts). A worker that restores the partition drops the run, which then starts "
            "again at sequence 0 (docs/operations.md). Asks for confirmation on a terminal; "
            "elsewhere --yes is required."
        ),
    )
    delete.add_argument("run", metavar="RUN", help="the runId")
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    delete.add_argument("--bootstrap", help="override KAFKA_BOOTSTRAP")
    delete.set_defaults(func=_run_delete)
    runs.set_defaults(func=lambda _args: (runs.print_help(sys.stderr), 2)[1])


def _sequence(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a sequence (an integer >= 0)")
    return int(text)


# -- runs delete ------------------------------------------------------------------------------


def _run_delete(args: argparse.Namespace) -> int:
    settings = load_settings()
    bootstrap = client_command(args, settings)
    if not args.yes and not sys.stdin.isatty():
        raise OperatorError(
            f"runs delete {args.run} removes its recorded events for good: "
            "pass --yes to confirm (no terminal to ask)"
        )
    topic = topic_names(settings)["log"]
    partition = partition_for_run(args.run, settings.partitions)
    records = read_committed(bootstrap, topic, [partition])
    keys = tombstone_keys(((r.key, r.value) for r in records), args.run)
    if not keys:
        print(
            f"run {args.run}: no recorded events in {topic} partition {partition}; "
            "nothing to delete"
        )
        return 0
    if not args.yes:
        answer = input(
            f"Delete the {len(keys)} recorded events of run {args.run} from {topic} "
            f"partition {partition}? [y/N] "
        )
        if answer.strip().lower() not in ("y", "yes"):
            print("not deleted", file=sys.stderr)
            return 1
    asyncio.run(_tombstone(bootstrap, topic, partition, keys))
    asyncio.run(_forget_state(bootstrap, topic_names(settings)["runstate"], partition, args.run))
    print(
        f"run {args.run}: wrote {len(keys)} tombstones to {topic} partition {partition} "
        f"({keys[0].decode()} .. {keys[-1].decode()}); Apache Kafka's log cleaner removes "
        "the events (tansu never compacts). Restart the workers for the run to start again "
        "at sequence 0 (docs/operations.md)."
    )
    return 0


async def _tombstone(bootstrap: str, topic: str, partition: int, keys: list[bytes]) -> None:
    async with started(AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")) as producer:
        futures = [await producer.send(topic, None, key=key, partition=partition) for key in keys]
        await asyncio.gather(*futures)


async def _forget_state(bootstrap: str, topic: str, partition: int, run: str) -> None:
    """The run's tombstone on the validator's run-state changelog too, so that a worker
    restoring from it drops the run even when its checkpoint is past the log's tombstones
    (docs/pipeline.md "Run state"). A deployment without that topic has nothing to forget."""
    try:
        await require_topic(bootstrap, topic)
    except OperatorError:
        return
    await _tombstone(bootstrap, topic, partition, [run.encode()])


# -- log --------------------------------------------------------------------------------------


def _run_log(args: argparse.Namespace) -> int:
    settings = load_settings()
    bootstrap = client_command(args, settings)
    topic = topic_names(settings)["log"]
    partition = partition_for_run(args.run, settings.partitions)
    records = read_committed(bootstrap, topic, [partition])
    events = run_events(((r.key, r.value) for r in records), args.run, args.from_sequence)
    for event in events:
        print(orjson.dumps(event).decode() if args.json else event_line(event))
    if not events:
        print(
            f"run {args.run}: no recorded events"
            + (f" from sequence {args.from_sequence}" if args.from_sequence else ""),
            file=sys.stderr,
        )
    return 0
