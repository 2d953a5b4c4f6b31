"""``a2ui-stream topics apply|list``: the topics of topics/topics.json, created and checked.

Shell module (the CLI's room): asks the cluster's admin API (``app.shell.worker.topics_admin``)
to create what is missing and prints the plan for people; ``list`` needs no broker.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from app.core.runlog.topic_plan import TopicPlan
from app.shell.cli.client import client_command
from app.shell.settings import load_settings
from app.shell.worker.topics_admin import desired_for, ensure_topics

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """``a2ui-stream topics apply|list``."""
    topics = sub.add_parser(
        "topics",
        help="create missing topics and report drift (topics/topics.json)",
        description=(
            "apply: create every topic in topics/topics.json that is missing, and report drift "
            "(a wrong partition count or config) with exit status 1. Running it twice changes "
            "nothing the second time. list: print the desired topics."
        ),
    )
    topics_sub = topics.add_subparsers(dest="topics_command", metavar="ACTION")
    apply = topics_sub.add_parser(
        "apply",
        help="create what is missing, report drift",
        description=(
            "Create every topic of topics/topics.json that the cluster in KAFKA_BOOTSTRAP "
            "lacks (names from A2UI_STREAM_TOPIC_PREFIX, partitions from "
            "A2UI_STREAM_PARTITIONS), and report drift: an existing topic with another "
            "partition count or config. Exit status 1 on drift; it never changes a topic that "
            "exists."
        ),
    )
    apply.add_argument("--bootstrap", help="override KAFKA_BOOTSTRAP")
    apply.set_defaults(func=_run_topics_apply)
    listing = topics_sub.add_parser(
        "list",
        help="print the desired topics and their configs",
        description="Print the topics these settings define, with partitions and configs "
        "(no broker needed).",
    )
    listing.set_defaults(func=_run_topics_list)
    topics.set_defaults(func=lambda _args: (topics.print_help(sys.stderr), 2)[1])


def _print_plan(result: TopicPlan, out: Any = sys.stdout) -> None:
    for spec in result.create:
        config = ", ".join(f"{k}={v}" for k, v in sorted(spec.config.items()))
        print(f"created  {spec.name}  partitions={spec.partitions}  {config}", file=out)
    for name in result.ok:
        print(f"ok       {name}", file=out)
    for name in result.unchecked:
        print(f"unchecked {name}: this broker does not describe topic configs", file=out)
    for drift in result.drift:
        print(
            f"DRIFT    {drift.topic}: {drift.what} is {drift.actual}, expected {drift.expected}",
            file=out,
        )
    if result.drift:
        print(
            "topics apply never changes an existing topic (a partition change would break "
            "co-partitioning): fix the drift by hand or recreate the topic.",
            file=out,
        )
    elif not result.create:
        print("nothing to do: every topic exists as defined", file=out)


def _run_topics_apply(args: argparse.Namespace) -> int:
    settings = load_settings()
    result = asyncio.run(ensure_topics(client_command(args, settings), desired_for(settings)))
    _print_plan(result)
    return 1 if result.drift else 0


def _run_topics_list(args: argparse.Namespace) -> int:
    for spec in desired_for(load_settings()):
        config = ", ".join(f"{k}={v}" for k, v in sorted(spec.config.items()))
        print(
            f"{spec.name}  partitions={spec.partitions}  replication={spec.replication}  {config}"
        )
    return 0
