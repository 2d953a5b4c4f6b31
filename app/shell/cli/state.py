"""``a2ui-stream state rebuild``: the validator's run-state changelog rebuilt from the log.

Shell module: reads the log, dead-letter and changelog partitions (read_committed) and the
validator group's committed offsets, asks ``app.core.admission.validator_restore`` for the replayed
state and what to write, and performs the sends. The log is the source of truth; the changelog is a
cache of it (docs/pipeline.md "Restore"), so rebuilding it is always safe with the workers
stopped, and never needed for correctness: a worker that finds it absent or not matching the
log replays the log by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from app.core.admission.validator_batch import Send
from app.core.admission.validator_restore import catch_up, restore_partition
from app.core.runlog.run_snapshot import CHECKPOINT_KEY
from app.shell.cli.client import client_command
from app.shell.errors import OperatorError
from app.shell.settings import Settings, load_settings
from app.shell.worker.kafka_io import read_topic, require_topic, started
from app.shell.worker.topics_admin import desired_for

__all__ = ["add_parser"]

_READ_TIMEOUT = 300.0  # seconds to read one partition of a topic to its end


def add_parser(sub: Any) -> None:
    state = sub.add_parser(
        "state",
        help="the validator's run-state changelog (rebuild it from the log)",
        description=(
            "The validator keeps each run's admission state in a compacted changelog topic "
            "(a2ui.runs.state) and restores a partition from it instead of replaying the log. "
            "`state rebuild` rewrites it from the log."
        ),
    )
    state_sub = state.add_subparsers(dest="state_command", metavar="ACTION")
    rebuild = state_sub.add_parser(
        "rebuild",
        help="rewrite the run-state changelog from the log (with every worker stopped)",
        description=(
            "Replay the log and dead-letter partitions as a worker's restore does when the "
            "changelog cannot say, and write the result to the run-state changelog: every run's "
            "state, a tombstone for each run it holds that the log no longer has, and each "
            "partition's checkpoint. Workers do the same by themselves when the changelog is "
            "missing, unreadable or does not match the log; use this after restoring the log "
            "from a backup, or to drop a changelog you do not trust. Stop every worker first: "
            "it refuses while the validator group has members. Asks for confirmation on a "
            "terminal; elsewhere --yes is required."
        ),
    )
    rebuild.add_argument(
        "--partition",
        type=int,
        action="append",
        metavar="P",
        help="only this partition (repeatable; default: every partition)",
    )
    rebuild.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    rebuild.add_argument("--bootstrap", help="override KAFKA_BOOTSTRAP")
    rebuild.set_defaults(func=_run_rebuild)
    state.set_defaults(func=lambda _args: (state.print_help(sys.stderr), 2)[1])


def _run_rebuild(args: argparse.Namespace) -> int:
    settings = load_settings()
    bootstrap = client_command(args, settings)
    partitions = sorted(set(args.partition or range(settings.partitions)))
    wrong = [p for p in partitions if not 0 <= p < settings.partitions]
    if wrong:
        raise OperatorError(
            f"partition {wrong[0]} does not exist: A2UI_STREAM_PARTITIONS is "
            f"{settings.partitions} (partitions 0..{settings.partitions - 1})"
        )
    if not args.yes:
        if not sys.stdin.isatty():
            raise OperatorError(
                "state rebuild rewrites the run-state changelog: pass --yes to confirm "
                "(no terminal to ask)"
            )
        answer = input(f"Rebuild the run-state changelog of partitions {partitions}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("not rebuilt", file=sys.stderr)
            return 1
    for line in asyncio.run(_rebuild(bootstrap, settings, partitions)):
        print(line)
    return 0


async def _rebuild(bootstrap: str, settings: Settings, partitions: Sequence[int]) -> list[str]:
    names = {spec.id: spec.name for spec in desired_for(settings)}
    group = f"{settings.app_id}-validator"
    for topic_id in ("log", "deadletter", "runstate"):
        await require_topic(bootstrap, names[topic_id])
    members = await _members(bootstrap, group)
    if members:
        raise OperatorError(
            f"the validator group {group} has {members} member(s): stop every worker of this "
            "deployment first (a running validator writes the changelog too)"
        )
    lines = []
    async with started(AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")) as producer:
        for partition in partitions:
            lines.append(await _rebuild_partition(bootstrap, names, group, partition, producer))
    return lines


async def _rebuild_partition(
    bootstrap: str, names: dict[str, str], group: str, partition: int, producer: Any
) -> str:
    log, dead, held = await asyncio.gather(
        *(
            read_topic(
                bootstrap,
                names[t],
                isolation="read_committed",
                partitions=[partition],
                timeout=_READ_TIMEOUT,
            )
            for t in ("log", "deadletter", "runstate")
        )
    )
    committed = await _committed(bootstrap, group, names["admission"], partition)
    restored = restore_partition(
        partition,
        committed,
        log,
        dead,
        log_end=log[-1].offset + 1 if log else 0,
        dead_end=dead[-1].offset + 1 if dead else 0,
    )
    topic = names["runstate"]
    writes = list(catch_up(topic, partition, None, restored))  # every run and the checkpoint
    gone = {r.key for r in held if r.key not in (None, CHECKPOINT_KEY)} - {
        run_id.encode() for run_id in restored.runs
    }
    writes[-1:-1] = [Send(topic, partition, key, None, ()) for key in sorted(gone)]
    for part in (writes[:-1], writes[-1:]):  # the checkpoint once the states are written
        futures = [
            await producer.send(s.topic, s.value, key=s.key, partition=s.partition) for s in part
        ]
        await asyncio.gather(*futures)
    return (
        f"partition {partition}: {len(restored.runs)} runs from {len(log)} log records; wrote "
        f"{len(writes) - len(gone) - 1} run states, {len(gone)} tombstones and the checkpoint "
        f"(next offset {restored.start}) to {topic}"
    )


async def _members(bootstrap: str, group: str) -> int:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        [response] = await admin.describe_consumer_groups([group])
        _, _, _state, _, _, found = response.groups[0]
        return len(found)
    finally:
        await admin.close()


async def _committed(bootstrap: str, group: str, admission: str, partition: int) -> int:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        return await consumer.committed(TopicPartition(admission, partition)) or 0
    finally:
        await consumer.stop()
