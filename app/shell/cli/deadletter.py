"""``a2ui-stream deadletter list|show|replay``: inspect refusals and re-submit them.

Shell module (the CLI's room): reads the dead-letter topic (read_committed), asks
``app.core.admission.ops`` what to print or re-submit, and publishes the re-submissions to the
admission topic. docs/operations.md has examples.
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

from app.core.admission.ops import (
    NotReplayable,
    Position,
    Resubmission,
    dead_letter_line,
    original_of,
    parse_position,
    replay_corrected,
    replay_original,
    select_dead_letters,
    source_of,
)
from app.shell.cli.client import client_command, read_committed, topic_names
from app.shell.errors import OperatorError
from app.shell.settings import Settings, load_settings
from app.shell.worker.kafka_io import started

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """``a2ui-stream deadletter list|show|replay``."""
    dl = sub.add_parser(
        "deadletter",
        help="inspect refusals and re-submit them (list, show, replay)",
        description=(
            "Dead letters are named by their SOURCE: the admission partition and offset of the "
            "refused record (P:O), as printed by `list`."
        ),
    )
    dl_sub = dl.add_subparsers(dest="deadletter_command", metavar="ACTION")
    _add_list(dl_sub)
    _add_show(dl_sub)
    _add_replay(dl_sub)
    dl.set_defaults(func=lambda _args: (dl.print_help(sys.stderr), 2)[1])


def _add_list(dl_sub: Any) -> None:
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


def _add_show(dl_sub: Any) -> None:
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


def _add_replay(dl_sub: Any) -> None:
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


def _position(text: str) -> Position:
    position = parse_position(text)
    if position is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not PARTITION:OFFSET (e.g. 2:17)")
    return position


def _letters(records: Sequence[Any]) -> list[tuple[Any, dict[str, Any]]]:
    return [(r, orjson.loads(r.value)) for r in records if r.value is not None]


def _run_list(args: argparse.Namespace) -> int:
    settings = load_settings()
    bootstrap = client_command(args, settings)
    # Every partition, even with --run: a record_key_mismatch dead letter sits on the partition
    # the record was (wrongly) published to, not on its run's.
    letters = [
        letter
        for _, letter in _letters(read_committed(bootstrap, topic_names(settings)["deadletter"]))
    ]
    for letter in select_dead_letters(letters, code=args.code, run=args.run):
        print(orjson.dumps(letter).decode() if args.json else dead_letter_line(letter))
    return 0


def _find(bootstrap: str, settings: Settings, source: Position) -> tuple[Any, dict[str, Any]]:
    """The dead letter refused at admission ``source``; it is on the same partition number of
    the dead-letter topic (the run topics are co-partitioned)."""
    topic = topic_names(settings)["deadletter"]
    if source[0] >= settings.partitions:
        raise OperatorError(
            f"partition {source[0]} does not exist: {topic} has "
            f"{settings.partitions} partitions (A2UI_STREAM_PARTITIONS)"
        )
    for record, letter in _letters(read_committed(bootstrap, topic, [source[0]])):
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
    topics = topic_names(settings)
    plans: list[Resubmission | NotReplayable]
    if args.source is not None:
        plans = [_source_plan(bootstrap, settings, args.source, args.file)]
    else:
        plans = _code_plans(bootstrap, topics["deadletter"], args.code, args.run)
        if not plans:
            print(
                f"no dead letters with code {args.code}"
                + (f" for run {args.run}" if args.run else ""),
                file=sys.stderr,
            )
            return 0
    return _resubmit(plans, bootstrap, topics["admission"], dry_run=args.dry_run)


def _source_plan(
    bootstrap: str, settings: Settings, source: Position, file: Path | None
) -> Resubmission:
    """``replay --source P:O``: that dead letter's original bytes, or the corrected record in
    ``file``; one that cannot be replayed is an ``OperatorError`` saying why."""
    record, letter = _find(bootstrap, settings, source)
    if file is not None:
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise OperatorError(f"cannot read {file}: {exc.strerror}") from exc
        plan = replay_corrected(letter, data)
    else:
        plan = replay_original(letter, record.key)
    if isinstance(plan, NotReplayable):
        raise OperatorError(f"not replayed: {plan.reason}")
    return plan


def _code_plans(
    bootstrap: str, topic: str, code: str, run: str | None
) -> list[Resubmission | NotReplayable]:
    """``replay --code C [--run R]``: the original bytes of every dead letter chosen."""
    found = _letters(read_committed(bootstrap, topic))  # all partitions, as in list
    chosen = {
        id(letter)
        for letter in select_dead_letters([letter for _, letter in found], code=code, run=run)
    }
    return [replay_original(letter, record.key) for record, letter in found if id(letter) in chosen]


def _resubmit(
    plans: list[Resubmission | NotReplayable], bootstrap: str, topic: str, *, dry_run: bool
) -> int:
    """Publish (or with ``dry_run`` print) the replayable plans to the admission ``topic``;
    1 when any was not replayed."""
    resubmit = [p for p in plans if isinstance(p, Resubmission)]
    skipped = [p for p in plans if isinstance(p, NotReplayable)]
    for skip in skipped:
        print(f"not replayed {skip.source[0]}:{skip.source[1]}: {skip.reason}", file=sys.stderr)
    if dry_run:
        for plan in resubmit:
            print(f"would re-submit {_describe(plan)}")
    else:
        sent = asyncio.run(_publish(bootstrap, topic, resubmit))
        for plan, (partition, offset) in zip(resubmit, sent, strict=True):
            print(f"re-submitted {_describe(plan)} as {topic} {partition}:{offset}")
    print(
        f"{'would re-submit' if dry_run else 're-submitted'} {len(resubmit)}, "
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
