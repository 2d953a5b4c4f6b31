"""Operators' commands: ``deadletter list|show|replay``, ``runs delete`` and ``log``.

Shell module: reads the dead-letter and log topics (read_committed), asks ``app.core.ops`` what
to print, re-submit or tombstone, and performs the sends. docs/operations.md has examples.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer

from app.core.keys import partition_for_run
from app.core.ops import (
    NotReplayable,
    Position,
    Resubmission,
    dead_letter_line,
    event_line,
    original_of,
    parse_position,
    replay_corrected,
    replay_original,
    run_events,
    select_dead_letters,
    source_of,
    tombstone_keys,
)
from app.shell.cli.client import client_command
from app.shell.errors import OperatorError
from app.shell.settings import Settings, load_settings
from app.shell.worker.kafka_io import read_topic, require_topic, started
from app.shell.worker.topics_admin import desired_for

__all__ = ["add_parser"]

_READ_TIMEOUT = 120.0  # seconds to read a topic (or one partition of it) to its end


def add_parser(sub: Any) -> None:
    _add_deadletter(sub)
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


def _add_deadletter(sub: Any) -> None:
    dl = sub.add_parser(
        "deadletter",
        help="inspect refusals and re-submit them (list, show, replay)",
        description=(
            "Dead letters are named by their SOURCE: the admission partition and offset of the "
            "refused record (P:O), as printed by `list`."
        ),
    )
    dl_sub = dl.add_subparsers(dest="deadletter_command", metavar="ACTION")

    listing = dl_sub.add_parser(
        "list",
        help="one line per dead letter: source P:O, time, code, rule, path, runId, message",
        description=(
            "Print every dead letter (refused admission record), one line each: its source "
            "P:O (the admission partition and offset), time, code, rule, JSON Pointer, runId "
            "and message. --code and --run narrow it; --json prints the whole records."
        ),
    )
    listing.add_argument("--code", help="only this refusal code (e.g. envelope_invalid)")
    listing.add_argument("--run", help="only this runId")
    listing.add_argument("--json", action="store_true", help="JSON Lines: the dead-letter records")
    listing.add_argument("--bootstrap", help="override KAFKA_BOOTSTRAP")
    listing.set_defaults(func=_run_list)

    show = dl_sub.add_parser(
        "show",
        help="the whole dead letter refused at admission P:O, and its original bytes",
        description=(
            "Print the dead letter of the admission record at P:O (as `deadletter list` names "
            "it) and the original bytes it keeps, saying whether they were kept as received "
            "or with registered secrets redacted."
        ),
    )
    show.add_argument(
        "source",
        metavar="P:O",
        type=_position,
        help="the admission partition:offset of the refused record",
    )
    show.add_argument("--bootstrap", help="override KAFKA_BOOTSTRAP")
    show.set_defaults(func=_run_show)

    replay = dl_sub.add_parser(
        "replay",
        help="re-submit dead letters to the admission topic (key = runId)",
        description=(
            "Re-submit to the admission topic, key = runId. With --source P:O --file F: the "
            "corrected admission record {runId, envelope} in F for that dead letter. Without "
            "--file: the original bytes of the dead letter(s) (e.g. every dead letter of a code "
            "after a policy change); a dead letter whose original was SR-1 redacted or emptied "
            "is not replayed (it would record the marker, not the value): correct it with --file."
            " A replay is a new admission record with its own outcome (admitted, refused again, "
            "or deduplicated by correlationId)."
        ),
    )
    which = replay.add_mutually_exclusive_group(required=True)
    which.add_argument("--code", help="every dead letter of this code")
    which.add_argument(
        "--source",
        type=_position,
        metavar="P:O",
        help="the one dead letter refused at admission P:O",
    )
    replay.add_argument("--run", help="with --code: only this runId")
    replay.add_argument(
        "--file",
        type=Path,
        metavar="CORRECTED.json",
        help="with --source: a corrected admission record {runId, envelope}",
    )
    replay.add_argument("--dry-run", action="store_true", help="print, do not publish")
    replay.add_argument("--bootstrap", help="override KAFKA_BOOTSTRAP")
    replay.set_defaults(func=_run_replay)

    dl.set_defaults(func=lambda _args: (dl.print_help(sys.stderr), 2)[1])


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


def _position(text: str) -> Position:
    position = parse_position(text)
    if position is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not PARTITION:OFFSET (e.g. 2:17)")
    return position


def _sequence(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a sequence (an integer >= 0)")
    return int(text)


def _topics(settings: Settings) -> dict[str, str]:
    return {spec.id: spec.name for spec in desired_for(settings)}


def _read(bootstrap: str, topic: str, partitions: list[int] | None = None) -> list[Any]:
    async def read() -> list[Any]:
        await require_topic(bootstrap, topic)  # a missing topic is said, not read as empty
        return await read_topic(
            bootstrap,
            topic,
            isolation="read_committed",
            partitions=partitions,
            timeout=_READ_TIMEOUT,
        )

    return asyncio.run(read())


def _letters(records: Sequence[Any]) -> list[tuple[Any, dict[str, Any]]]:
    return [(r, orjson.loads(r.value)) for r in records if r.value is not None]


# -- deadletter -------------------------------------------------------------------------------


def _run_list(args: argparse.Namespace) -> int:
    settings = load_settings()
    bootstrap = client_command(args, settings)
    # Every partition, even with --run: a record_key_mismatch dead letter sits on the partition
    # the record was (wrongly) published to, not on its run's.
    letters = [letter for _, letter in _letters(_read(bootstrap, _topics(settings)["deadletter"]))]
    for letter in select_dead_letters(letters, code=args.code, run=args.run):
        print(orjson.dumps(letter).decode() if args.json else dead_letter_line(letter))
    return 0


def _find(bootstrap: str, settings: Settings, source: Position) -> tuple[Any, dict[str, Any]]:
    """The dead letter refused at admission ``source``; it is on the same partition number of
    the dead-letter topic (the run topics are co-partitioned)."""
    topic = _topics(settings)["deadletter"]
    if source[0] >= settings.partitions:
        raise OperatorError(
            f"partition {source[0]} does not exist: {topic} has "
            f"{settings.partitions} partitions (A2UI_STREAM_PARTITIONS)"
        )
    for record, letter in _letters(_read(bootstrap, topic, [source[0]])):
        if source_of(letter) == source:
            return record, letter
    raise OperatorError(
        f"no dead letter for admission record {source[0]}:{source[1]} in {topic}"
        " (`a2ui-stream deadletter list` names them)"
    )


def _run_show(args: argparse.Namespace) -> int:
    settings = load_settings()
    record, letter = _find(client_command(args, settings), settings, args.source)
    original = original_of(letter)
    print(
        f"dead letter at {record.topic} {record.partition}:{record.offset}"
        f" (admission record {args.source[0]}:{args.source[1]})"
    )
    print(orjson.dumps(letter, option=orjson.OPT_INDENT_2).decode())
    if original.emptied:
        state = "EMPTIED: a registered secret survived redaction, so nothing was kept"
    elif original.redacted:
        state = "REDACTED: registered SR-1 secrets are replaced by [REDACTED:<secretId>]"
    else:
        state = "as received, not redacted"
    print(
        f"original bytes: {original.size} received (sha256 {original.sha256}), "
        f"{len(original.data)} kept, {state}; decoded as UTF-8 with replacement:"
    )
    print(original.text)
    return 0


def _run_replay(args: argparse.Namespace) -> int:
    if args.file is not None and args.source is None:
        raise OperatorError("--file replaces ONE dead letter: name it with --source P:O")
    if args.run is not None and args.code is None:
        raise OperatorError("--run narrows --code; with --source the dead letter is already one")
    settings = load_settings()
    bootstrap = client_command(args, settings)
    topics = _topics(settings)
    plans: list[Resubmission | NotReplayable]
    if args.source is not None:
        record, letter = _find(bootstrap, settings, args.source)
        if args.file is not None:
            try:
                data = args.file.read_bytes()
            except OSError as exc:
                raise OperatorError(f"cannot read {args.file}: {exc.strerror}") from exc
            plan = replay_corrected(letter, data)
        else:
            plan = replay_original(letter, record.key)
        if isinstance(plan, NotReplayable):
            raise OperatorError(f"not replayed: {plan.reason}")
        plans = [plan]
    else:
        found = _letters(_read(bootstrap, topics["deadletter"]))  # all partitions, as in list
        chosen = {
            id(letter)
            for letter in select_dead_letters(
                [letter for _, letter in found], code=args.code, run=args.run
            )
        }
        plans = [
            replay_original(letter, record.key) for record, letter in found if id(letter) in chosen
        ]
        if not plans:
            print(
                f"no dead letters with code {args.code}"
                + (f" for run {args.run}" if args.run else ""),
                file=sys.stderr,
            )
            return 0
    resubmit = [p for p in plans if isinstance(p, Resubmission)]
    skipped = [p for p in plans if isinstance(p, NotReplayable)]
    for skip in skipped:
        print(f"not replayed {skip.source[0]}:{skip.source[1]}: {skip.reason}", file=sys.stderr)
    if args.dry_run:
        for plan in resubmit:
            print(f"would re-submit {_describe(plan)}")
    else:
        sent = asyncio.run(_publish(bootstrap, topics["admission"], resubmit))
        for plan, (partition, offset) in zip(resubmit, sent, strict=True):
            print(f"re-submitted {_describe(plan)} as {topics['admission']} {partition}:{offset}")
    print(
        f"{'would re-submit' if args.dry_run else 're-submitted'} {len(resubmit)}, "
        f"not replayed {len(skipped)}",
        file=sys.stderr,
    )
    return 1 if skipped else 0


def _describe(plan: Resubmission) -> str:
    what = "corrected record" if plan.corrected else "original bytes"
    return (
        f"{plan.source[0]}:{plan.source[1]} ({what}, {len(plan.value)} B, run {plan.run_id or '-'})"
    )


async def _publish(bootstrap: str, topic: str, plans: list[Resubmission]) -> list[Position]:
    if not plans:
        return []
    async with started(AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")) as producer:
        # key = runId and the default partitioner: the run's partition, as for any producer.
        futures = [await producer.send(topic, plan.value, key=plan.key) for plan in plans]
        return [((m := await f).partition, m.offset) for f in futures]


# -- runs delete ------------------------------------------------------------------------------


def _run_delete(args: argparse.Namespace) -> int:
    settings = load_settings()
    bootstrap = client_command(args, settings)
    if not args.yes and not sys.stdin.isatty():
        raise OperatorError(
            f"runs delete {args.run} removes its recorded events for good: "
            "pass --yes to confirm (no terminal to ask)"
        )
    topic = _topics(settings)["log"]
    partition = partition_for_run(args.run, settings.partitions)
    records = _read(bootstrap, topic, [partition])
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
    asyncio.run(_forget_state(bootstrap, _topics(settings)["runstate"], partition, args.run))
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
    topic = _topics(settings)["log"]
    partition = partition_for_run(args.run, settings.partitions)
    records = _read(bootstrap, topic, [partition])
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
