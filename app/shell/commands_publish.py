"""``a2ui-stream publish [FILE|-] [--wait SECONDS]``: publish admission records to the admission
topic (key = runId), and optionally wait for each one's outcome in the log or dead letters.

Shell module. It is what a producer's code does, for people trying a2ui-stream by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer

from app.shell.commands_runtime import client_command
from app.shell.errors import OperatorError
from app.shell.kafka_io import read_topic, started
from app.shell.settings import load_settings
from app.shell.topics_admin import desired_for
from app.shell.validator_loop import SOURCE_HEADER

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "publish",
        help="publish admission records (JSON Lines) to the admission topic, key = runId",
        description=(
            "Publish each line of FILE (or stdin) to the admission topic with key = its runId. "
            "With --wait, wait up to that many seconds for each record's outcome and print it "
            "(admitted with its sequence, or refused with code, rule and pointer)."
        ),
    )
    parser.add_argument("file", nargs="?", default="-", help="JSON Lines file, or - for stdin")
    parser.add_argument("--bootstrap", help="override KAFKA_BOOTSTRAP")
    parser.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait for the outcomes (0: do not wait)",
    )
    parser.set_defaults(func=_run)


def _lines(path: str) -> list[bytes]:
    try:
        data = sys.stdin.buffer.read() if path == "-" else open(path, "rb").read()  # noqa: SIM115
    except OSError as exc:
        raise OperatorError(f"cannot read {path}: {exc.strerror}") from exc
    return [line for line in data.splitlines() if line.strip()]


def _key(line: bytes) -> bytes | None:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    run_id = record.get("runId") if isinstance(record, dict) else None
    return run_id.encode() if isinstance(run_id, str) else None


async def _publish(bootstrap: str, topic: str, lines: list[bytes]) -> list[tuple[int, int]]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    async with started(producer):
        futures = [await producer.send(topic, line, key=_key(line)) for line in lines]
        sent = await asyncio.gather(*futures)
        return [(meta.partition, meta.offset) for meta in sent]


async def _outcomes(
    bootstrap: str, topics: dict[str, str], wanted: set[tuple[int, int]], timeout: float
) -> dict[tuple[int, int], str]:
    found: dict[tuple[int, int], str] = {}
    deadline = time.monotonic() + timeout
    while True:
        for topic_id in ("log", "deadletter"):
            for record in await read_topic(bootstrap, topics[topic_id], isolation="read_committed"):
                source = dict(record.headers or ()).get(SOURCE_HEADER)
                if source is None or record.value is None:
                    continue
                partition, _, offset = source.decode().partition(":")
                where = (int(partition), int(offset))
                if where in wanted:
                    found[where] = _describe(topic_id, orjson.loads(record.value))
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
    bootstrap = client_command(args, settings)
    topics = {spec.id: spec.name for spec in desired_for(settings)}
    lines = _lines(args.file)
    if not lines:
        raise OperatorError(f"{args.file}: no records (expected one JSON admission record a line)")
    sent = asyncio.run(_publish(bootstrap, topics["admission"], lines))
    print(f"published {len(sent)} records to {topics['admission']}", file=sys.stderr)
    if args.wait <= 0:
        return 0
    found = asyncio.run(_outcomes(bootstrap, topics, set(sent), args.wait))
    refused = False
    for index, where in enumerate(sent):
        outcome = found.get(where, "no outcome yet (deduplicated, or the worker is behind)")
        refused = refused or outcome.startswith("refused")
        print(f"{index}: {outcome}")
    return 1 if refused else 0
