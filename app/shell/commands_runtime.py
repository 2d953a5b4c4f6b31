"""Runtime commands: ``up``, ``worker``, ``broker``, ``topics`` and ``config``.

Shell module: starts brokers and workers, talks to the cluster's admin API, prints for people.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
from typing import Any

from app.core.http_guard import is_loopback_bind
from app.core.topic_plan import TopicPlan
from app.shell.broker import Broker, start_broker
from app.shell.errors import OperatorError
from app.shell.settings import VARIABLES, Settings, load_settings, shown_value
from app.shell.topics_admin import desired_for, ensure_topics

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    up = sub.add_parser(
        "up",
        help="start the embedded broker, apply the topics and run a worker (foreground)",
        description=(
            "Start a broker (KAFKA_BOOTSTRAP if set, else the embedded tansu broker), apply the "
            "topics and run a worker in the foreground. Ctrl-C stops everything it started."
        ),
    )
    up.add_argument(
        "--broker",
        choices=("embedded", "kafka", "auto"),
        default="embedded",
        help="embedded: tansu from PyPI (default); kafka: local Apache Kafka (needs Java); "
        "auto: the harness order (KAFKA_BOOTSTRAP, Docker, local Kafka, tansu)",
    )
    up.set_defaults(func=_run_up)

    worker = sub.add_parser(
        "worker",
        help="run a worker against KAFKA_BOOTSTRAP (creates missing topics first)",
        description="Run the Faust worker against the cluster in KAFKA_BOOTSTRAP.",
    )
    worker.add_argument("--bootstrap", help="override KAFKA_BOOTSTRAP (host:port[,host:port])")
    worker.set_defaults(func=_run_worker)

    broker = sub.add_parser(
        "broker",
        help="start a broker with the test harness and keep it running",
        description=(
            "Start a broker the way the tests do and print its bootstrap address. Runs in the "
            "foreground until Ctrl-C; with --detach it prints and leaves the broker running "
            "(stop it by the PID written to --pid-file)."
        ),
    )
    broker.add_argument("--kind", choices=("auto", "kafka", "tansu", "docker"), default="auto")
    broker.add_argument("--detach", action="store_true", help="leave the broker running and exit")
    broker.add_argument("--pid-file", help="write the broker's PID here")
    broker.add_argument("--data-dir", help="local Apache Kafka: keep config, logs and data here")
    broker.set_defaults(func=_run_broker)

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
    apply = topics_sub.add_parser("apply", help="create what is missing, report drift")
    apply.add_argument("--bootstrap", help="override KAFKA_BOOTSTRAP")
    apply.set_defaults(func=_run_topics_apply)
    listing = topics_sub.add_parser("list", help="print the desired topics and their configs")
    listing.set_defaults(func=_run_topics_list)
    topics.set_defaults(func=lambda _args: (topics.print_help(sys.stderr), 2)[1])

    config = sub.add_parser(
        "config",
        help="list every environment variable with its effective value",
        description=(
            "Every setting is an environment variable; this prints them all. Credentials (the "
            "HTTP tokens) are shown as set or unset, never their values."
        ),
    )
    config.set_defaults(func=_run_config)


# -- topics -----------------------------------------------------------------------------------


def _bootstrap(args: argparse.Namespace, settings: Settings) -> str:
    bootstrap = getattr(args, "bootstrap", None) or settings.kafka_bootstrap
    if not bootstrap:
        raise OperatorError(
            "no broker: set KAFKA_BOOTSTRAP=host:port (or pass --bootstrap), "
            "or run `a2ui-stream up` to start the embedded broker"
        )
    return bootstrap


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
    result = asyncio.run(ensure_topics(_bootstrap(args, settings), desired_for(settings)))
    _print_plan(result)
    return 1 if result.drift else 0


def _run_topics_list(args: argparse.Namespace) -> int:
    for spec in desired_for(load_settings()):
        config = ", ".join(f"{k}={v}" for k, v in sorted(spec.config.items()))
        print(
            f"{spec.name}  partitions={spec.partitions}  replication={spec.replication}  {config}"
        )
    return 0


# -- config -----------------------------------------------------------------------------------


def _run_config(args: argparse.Namespace) -> int:
    load_settings()  # validates; a bad value exits 2 with the variable's name
    width = max(len(name) for name, _, _ in VARIABLES)
    for name, default, meaning in VARIABLES:
        shown = shown_value(name, os.environ.get(name), default)
        print(f"{name:<{width}}  {shown}\n{'':<{width}}  {meaning}")
    return 0


# -- broker -----------------------------------------------------------------------------------


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _wait_for_ctrl_c() -> None:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass


def _run_broker(args: argparse.Namespace) -> int:
    from pathlib import Path

    data_dir = Path(args.data_dir) if args.data_dir else None
    broker = start_broker(args.kind, log=_log, data_dir=data_dir)
    if args.pid_file and broker.pid is not None:
        with open(args.pid_file, "w", encoding="utf-8") as handle:
            handle.write(f"{broker.pid}\n")
    print(broker.bootstrap, flush=True)
    _log(f"broker: {broker.summary()}")
    if args.detach:
        return 0
    _log("broker: running; Ctrl-C stops it")
    try:
        _wait_for_ctrl_c()
    finally:
        broker.stop()
    return 0


# -- worker and up ----------------------------------------------------------------------------


def _run_worker(args: argparse.Namespace) -> int:
    settings = load_settings()
    return _start_worker(settings, _bootstrap(args, settings))


def _start_worker(settings: Settings, bootstrap: str) -> int:
    import faust

    from app.shell.faust_app import create_app

    result = asyncio.run(ensure_topics(bootstrap, desired_for(settings)))
    if result.create:
        _log("worker: created topics " + ", ".join(s.name for s in result.create))
    for drift in result.drift:
        _log(
            f"worker: WARNING topic drift: {drift.topic} {drift.what}={drift.actual}, "
            f"expected {drift.expected}"
        )
    app, _topics = create_app(settings, bootstrap)
    worker = faust.Worker(app, loglevel=settings.log_level, quiet=True)
    worker.execute_from_commandline()  # returns when the worker stops (Ctrl-C / SIGTERM)
    return 0


def _run_up(args: argparse.Namespace) -> int:
    settings = load_settings()
    choice = {"embedded": "tansu", "kafka": "kafka", "auto": None}[args.broker]
    if settings.kafka_bootstrap and args.broker == "embedded":
        choice = "external"
    broker: Broker = start_broker(choice, log=_log)
    fast = _embedded(settings if settings.fast_groups else _with_fast_groups(settings))
    try:
        specs = desired_for(fast)
        asyncio.run(ensure_topics(broker.bootstrap, specs))
        names = {spec.id: spec.name for spec in specs}
        print(
            "\n".join(
                [
                    "",
                    f"a2ui-stream is up: {broker.summary()}",
                    f"  publish admission records {{runId, envelope}} to topic {names['admission']}"
                    f" (key = runId) at {broker.bootstrap}",
                    f"  recorded events:  topic {names['log']}",
                    f"  dead letters:     topic {names['deadletter']}",
                    f"  worker web:       http://{fast.web_host}:{fast.web_port}/health",
                    f"  OpenWOP HTTP:     http://{fast.web_host}:{fast.web_port}/.well-known/openwop"
                    + (
                        " (no token needed in this embedded mode; this machine only)"
                        if not fast.http_auth
                        else " (A2UI_STREAM_WEB_HOST is not loopback: tokens required,"
                        " A2UI_STREAM_HTTP_TOKENS)"
                    ),
                    f"  surface viewer:   http://{fast.web_host}:{fast.web_port}/ui/",
                    f"  in another shell: export KAFKA_BOOTSTRAP={broker.bootstrap}",
                    "  stop: Ctrl-C (stops the worker and the broker it started)",
                    "",
                ]
            ),
            flush=True,
        )
        return _start_worker(fast, broker.bootstrap)
    finally:
        broker.stop()
        _log("up: stopped")


def _with_fast_groups(settings: Settings) -> Settings:
    from dataclasses import replace

    # Single-process laptop mode: short group timeouts so the worker is ready in seconds.
    return replace(settings, fast_groups=True)


def _embedded(settings: Settings) -> Settings:
    from dataclasses import replace

    # The embedded laptop mode is the one place the HTTP API runs without tokens (issue 6
    # item 7), and only on a loopback address; there the web server also answers only
    # loopback Host names (DNS rebinding) and same-origin JSON requests (CSRF): issue 14.
    if not is_loopback_bind(settings.web_host):
        return settings
    return replace(settings, http_auth=False)
