"""``a2ui-stream publish [FILE|-] [--wait SECONDS]``: publish admission records to the admission
topic (key = runId), and say what became of each one.

Shell module. It is what a producer's code does, for people trying a2ui-stream by hand.

Records are sent as they are, up to ``A2UI_STREAM_MAX_RECORD_BYTES`` (the producer's request
limit follows the setting; aiokafka's own is 1 MiB). A larger line is the worker's
``record_too_large`` anyway, so nothing is sent and the line is named (issue 19 item 3).
Each record gets a line on stdout: where it was published, and with ``--wait`` its outcome:
admitted (sequence), refused (code, rule, pointer, message), deduplicated (the validator
passed it and recorded nothing: its correlationId was recorded before), or none yet.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from app.shell.cli.client import client_command
from app.shell.errors import OperatorError
from app.shell.settings import Settings, load_settings
from app.shell.wire import SOURCE_HEADER
from app.shell.worker.kafka_io import read_topic, require_topic, started
from app.shell.worker.topics_admin import desired_for

__all__ = ["add_parser", "request_limit"]

# Room beyond the record's value in one produce request: its key (a runId, 256 bytes at most),
# the record batch's own framing and headers. The admission topic's max.message.bytes (4.5 MiB)
# leaves the same room above the 4 MiB the setting allows (topics/topics.json).
_REQUEST_ROOM = 64 * 1024

Where = tuple[int, int]  # (partition, offset) on the admission topic


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "publish",
        help="publish admission records (JSON Lines) to the admission topic, key = runId",
        description=(
            "Publish each line of FILE (or stdin), an admission record {runId, envelope}, to the "
            "admission topic with key = its runId, and print one line per record: where it was "
            "published. With --wait, wait up to that many seconds for each record's outcome "
            "from the worker and print it instead: admitted with its sequence, refused with "
            "code, rule and pointer, or deduplicated. Exit status 1 when any was refused. "
            "Records larger than A2UI_STREAM_MAX_RECORD_BYTES are not sent (the worker would "
            "refuse them): the command names them and publishes nothing."
        ),
    )
    parser.add_argument("file", nargs="?", default="-", help="JSON Lines file, or - for stdin")
    parser.add_argument("--bootstrap", help="override KAFKA_BOOTSTRAP")
    parser.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait for the outcomes from the worker (0, the default: do not wait)",
    )
    parser.set_defaults(func=_run)


def request_limit(max_record_bytes: int) -> int:
    """The producer's max_request_size for records of up to ``max_record_bytes``."""
    return max_record_bytes + _REQUEST_ROOM


def _lines(path: str) -> list[bytes]:
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise OperatorError(f"cannot read {path}: {exc.strerror}") from exc
    return [line for line in data.splitlines() if line.strip()]


def _check_sizes(path: str, lines: list[bytes], max_bytes: int) -> None:
    over = [(n, len(line)) for n, line in enumerate(lines, start=1) if len(line) > max_bytes]
    if not over:
        return
    first, size = over[0]
    more = f" (and {len(over) - 1} more)" if len(over) > 1 else ""
    raise OperatorError(
        f"{path}: record {first} is {size:,} bytes{more}, over A2UI_STREAM_MAX_RECORD_BYTES="
        f"{max_bytes:,}, which the worker refuses (record_too_large); nothing was published.\n"
        "Make it smaller, or raise A2UI_STREAM_MAX_RECORD_BYTES (at most 4 MiB) here and on "
        "the worker alike."
    )


def _key(line: bytes) -> bytes | None:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    run_id = record.get("runId") if isinstance(record, dict) else None
    return run_id.encode() if isinstance(run_id, str) else None


async def _publish(bootstrap: str, topic: str, lines: list[bytes], max_bytes: int) -> list[Where]:
    await require_topic(bootstrap, topic)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=5,
        max_request_size=request_limit(max_bytes),
    )
    async with started(producer):
        futures = [await producer.send(topic, line, key=_key(line)) for line in lines]
        sent = await asyncio.gather(*futures)
        return [(meta.partition, meta.offset) for meta in sent]


async def _decided_up_to(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The validator group's committed offset per admission partition: every record below it
    has been decided (its outcome, if any, is written before or with the commit)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    async with started(admin):
        offsets = await admin.list_consumer_group_offsets(group)
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic}


async def _outcomes(
    bootstrap: str, settings: Settings, wanted: set[Where], timeout: float
) -> dict[Where, str]:
    topics = {spec.id: spec.name for spec in desired_for(settings)}
    group = f"{settings.app_id}-validator"
    found: dict[Where, str] = {}
    deadline = time.monotonic() + timeout
    while True:
        decided = await _decided_up_to(bootstrap, group, topics["admission"])
        for topic_id in ("log", "deadletter"):
            for record in await read_topic(
                bootstrap, topics[topic_id], isolation="read_committed", stable=5
            ):
                source = dict(record.headers or ()).get(SOURCE_HEADER)
                if source is None or record.value is None:
                    continue
                partition, _, offset = source.decode().partition(":")
                where = (int(partition), int(offset))
                if where in wanted:
                    found[where] = _describe(topic_id, orjson.loads(record.value))
        for where in wanted - set(found):
            if decided.get(where[0], -1) > where[1]:  # passed, and nothing was written
                found[where] = (
                    "deduplicated  its correlationId was recorded before; nothing new recorded"
                )
        if len(found) == len(wanted) or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.5)


def _describe(topic_id: str, value: dict[str, Any]) -> str:
    if topic_id == "log":
        return f"admitted  run={value['runId']} sequence={value['sequence']}"
    return (
        f"refused   {value['code']} rule={value['rule']} path={value['path'] or '/'}: "
        f"{value['message']}"
    )


def _run(args: argparse.Namespace) -> int:
    settings = load_settings()
    topic = next(spec.name for spec in desired_for(settings) if spec.id == "admission")
    lines = _lines(args.file)
    if not lines:
        raise OperatorError(f"{args.file}: no records (expected one JSON admission record a line)")
    _check_sizes(args.file, lines, settings.max_record_bytes)
    bootstrap = client_command(args, settings)
    sent = asyncio.run(_publish(bootstrap, topic, lines, settings.max_record_bytes))
    print(f"published {len(sent)} records to {topic}", file=sys.stderr)
    if args.wait <= 0:
        for index, (partition, offset) in enumerate(sent):
            run = _key(lines[index])
            print(
                f"{index}: published {topic} {partition}:{offset}"
                f" (run {run.decode() if run else '-'}); outcome not awaited"
            )
        print("add --wait 30 to wait for each outcome from the worker", file=sys.stderr)
        return 0
    found = asyncio.run(_outcomes(bootstrap, settings, set(sent), args.wait))
    refused = False
    for index, where in enumerate(sent):
        outcome = found.get(where) or (
            f"no outcome within {args.wait:g} s: is a worker running with these settings "
            "(A2UI_STREAM_APP_ID, A2UI_STREAM_TOPIC_PREFIX)?"
        )
        refused = refused or outcome.startswith("refused")
        print(f"{index}: {outcome}")
    return 1 if refused else 0
