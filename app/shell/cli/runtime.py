"""Runtime commands: ``up``, ``worker``, ``broker``, ``topics`` and ``config``.

Shell module: starts brokers and workers, talks to the cluster's admin API, prints for people.
``topics`` lives in ``app.shell.cli.topics``; it is registered here, in its place between
``broker`` and ``config``.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import os
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from app.core.http.guard import is_loopback_bind
from app.shell.cli import topics
from app.shell.cli.broker import Broker, probe_transactions, start_broker, watch_and_remove
from app.shell.cli.client import checked_bootstrap
from app.shell.errors import OperatorError
from app.shell.settings import Settings, load_settings, shown_value
from app.shell.settings_table import VARIABLES
from app.shell.worker.kafka_io import await_group_coordinator, parse_bootstrap, probe_bootstrap
from app.shell.worker.topics_admin import desired_for, ensure_topics, leader_topic

__all__ = ["add_parser", "run_config"]


def add_parser(sub: Any) -> None:
    """The runtime commands: up, worker, broker, topics, config."""
    _add_up(sub)
    _add_worker(sub)
    _add_broker(sub)
    topics.add_parser(sub)  # between broker and config, as `a2ui-stream --help` lists them
    _add_config(sub)


def _add_up(sub: Any) -> None:
    """``a2ui-stream up``: broker, topics and a worker in the foreground."""
    up = sub.add_parser(
        "up",
        help="start the embedded broker, apply the topics and run a worker (foreground)",
        description=(
            "Try a2ui-stream on this machine: start a broker (the embedded tansu broker, or the "
            "one in KAFKA_BOOTSTRAP if set), create the topics and run a worker in the "
            "foreground. Once the worker answers it prints where to publish, the bootstrap "
            "address for other shells and the viewer's address. The HTTP API needs no token "
            "here and answers this machine only. Ctrl-C stops the worker and the broker it "
            "started."
        ),
    )
    up.add_argument(
        "--broker",
        choices=("embedded", "kafka", "auto"),
        default="embedded",
        help="embedded: tansu, installed with a2ui-stream (the default); kafka: a local Apache "
        "Kafka (needs Java); auto: KAFKA_BOOTSTRAP, else Docker, else a local Kafka, else tansu",
    )
    up.set_defaults(func=_run_up)


def _add_worker(sub: Any) -> None:
    """``a2ui-stream worker``: a worker against KAFKA_BOOTSTRAP."""
    worker = sub.add_parser(
        "worker",
        help="run a worker against KAFKA_BOOTSTRAP (needs HTTP tokens; creates missing topics)",
        description=(
            "Run a worker against the Kafka cluster in KAFKA_BOOTSTRAP: it decides admission "
            "records, projects surfaces to subscribers and serves OpenWOP over HTTP with the "
            "viewer at /ui/. Missing topics are created first.\n\n"
            "Tokens are needed: every run endpoint and the viewer's run pages answer 401 until "
            "A2UI_STREAM_HTTP_TOKENS holds one or more bearer tokens (comma-separated); clients "
            "send 'Authorization: Bearer <token>', and the viewer asks for it. "
            "(`a2ui-stream up` is the one mode without tokens, for this machine only.) Several "
            "workers of one deployment share A2UI_STREAM_GATEWAY_KEY. `a2ui-stream config` "
            "lists every setting."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    worker.add_argument("--bootstrap", help="override KAFKA_BOOTSTRAP (host:port[,host:port])")
    worker.set_defaults(func=_run_worker)


def _add_broker(sub: Any) -> None:
    """``a2ui-stream broker``: a broker on its own, as the tests start one."""
    broker = sub.add_parser(
        "broker",
        help="start a Kafka broker on its own and keep it running",
        description=(
            "Start a Kafka broker on its own (as the tests do) and print its bootstrap address, "
            "for a worker or a test run started separately. Runs in the foreground until "
            "Ctrl-C; with --detach it leaves the broker running and says how to stop it."
        ),
    )
    broker.add_argument(
        "--kind",
        choices=("auto", "kafka", "tansu", "docker"),
        default="auto",
        help="auto (default): KAFKA_BOOTSTRAP if set (nothing is started), else Docker, else a "
        "local Apache Kafka (Java), else tansu; or name one",
    )
    broker.add_argument(
        "--detach",
        action="store_true",
        help="leave the broker running and exit (its temporary files go when it stops)",
    )
    broker.add_argument("--pid-file", metavar="FILE", help="write the broker's PID here")
    broker.add_argument(
        "--data-dir",
        metavar="DIR",
        help="local Apache Kafka: keep config, logs and data in DIR, and start again from it "
        "next time",
    )
    broker.set_defaults(func=_run_broker)


def _add_config(sub: Any) -> None:
    """``a2ui-stream config``: every setting with its effective value."""
    config = sub.add_parser(
        "config",
        help="list every environment variable with its effective value",
        description=(
            "Every setting is an environment variable; this prints them all. Credentials (the "
            "HTTP tokens) are shown as set or unset, never their values."
        ),
    )
    config.set_defaults(func=run_config)


# -- config -----------------------------------------------------------------------------------


def run_config(args: argparse.Namespace) -> int:
    load_settings()  # validates; a bad value exits 2 with the variable's name
    width = max(len(name) for name, _, _ in VARIABLES)
    for name, default, meaning in VARIABLES:
        shown = shown_value(name, os.environ.get(name), default)
        print(f"{name:<{width}}  {shown}\n{'':<{width}}  {meaning}")
    return 0


# -- broker -----------------------------------------------------------------------------------


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _say(message: str, *, err: bool = False) -> None:
    """Print once the Faust worker runs: it redirects sys.stdout and sys.stderr into its log
    (as WARNING lines), so this writes to the process's own streams."""
    stream = sys.__stderr__ if err else sys.__stdout__
    if stream is not None:
        stream.write(message + "\n")
        stream.flush()


def _wait_for_ctrl_c() -> None:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass


def _run_broker(args: argparse.Namespace) -> int:
    from pathlib import Path

    data_dir = Path(args.data_dir) if args.data_dir else None
    if data_dir is not None and data_dir.exists() and not data_dir.is_dir():
        raise OperatorError(f"--data-dir {data_dir} is a file: name a directory (new or kept)")
    if args.detach and args.kind == "docker":
        raise OperatorError(
            "a Docker broker cannot be detached (testcontainers removes its container when this "
            "command exits): run it in the foreground, or use `docker compose up kafka`"
        )
    if os.environ.get("KAFKA_BOOTSTRAP", "").strip() and args.kind == "auto":
        probe_bootstrap(
            parse_bootstrap(os.environ["KAFKA_BOOTSTRAP"]),
            advice="Unset KAFKA_BOOTSTRAP to start a broker here (--kind picks which), or set "
            "it to a running broker.",
        )
    broker = start_broker(args.kind, log=_log, data_dir=data_dir)
    if args.pid_file and broker.pid is not None:
        with open(args.pid_file, "w", encoding="utf-8") as handle:
            handle.write(f"{broker.pid}\n")
    print(broker.bootstrap, flush=True)
    _log(f"broker: {broker.summary()}")
    if args.detach:
        if broker.pid is None:
            _log("broker: nothing was started here (KAFKA_BOOTSTRAP names a running broker)")
        else:
            watch_and_remove(broker)  # its temporary directory goes when it is stopped
            _log(f"broker: detached; stop it with: kill {broker.pid}")
        return 0
    _log("broker: running; Ctrl-C stops it")
    try:
        _wait_for_ctrl_c()
    finally:
        broker.stop()
    return 0


# -- worker and up ----------------------------------------------------------------------------


def _check_web_port(settings: Settings) -> None:
    """Refuse, before anything starts, a web address this worker could not listen on: Faust
    would print the banner and then an OSError inside a long traceback (issue 19 item 2)."""
    if settings.web_port == 0:
        return  # any free port
    host = settings.web_host or "0.0.0.0"
    where = f"{host}:{settings.web_port}"
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp binds
            probe.bind((host, settings.web_port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise OperatorError(
                f"the web port {where} is in use (another a2ui-stream worker or `up`?): stop "
                f"it, or choose another port, e.g. A2UI_STREAM_WEB_PORT={settings.web_port + 1}"
            ) from None
        if exc.errno == errno.EACCES:
            raise OperatorError(
                f"no permission to listen on {where} (ports below 1024 need root): choose "
                "another port with A2UI_STREAM_WEB_PORT"
            ) from None
        raise OperatorError(
            f"cannot listen on {where} ({exc.strerror or exc}): A2UI_STREAM_WEB_HOST must be an "
            "address of this machine (127.0.0.1 by default)"
        ) from None


def _web_base(settings: Settings) -> str:
    host = settings.web_host
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return (
        f"http://[{host}]:{settings.web_port}"
        if ":" in host
        else f"http://{host}:{settings.web_port}"
    )


def answers(base: str, token: str | None = None) -> bool:
    """The worker at ``base`` answers HTTP and its run index has read the log: /health is 200
    and a run path is past its 503 (404 for a run that does not exist; ``token``, one of the
    worker's own, on a worker that requires one). What a person may then do, they can: a curl
    right after does not fail."""
    probe = urllib.request.Request(f"{base}/runs/a2ui-stream-ready-probe")
    if token is not None:
        probe.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(f"{base}/health", timeout=3) as response:
            if response.status != 200:
                return False
        urllib.request.urlopen(probe, timeout=20).close()
    except urllib.error.HTTPError as exc:
        return exc.code == 404 or (exc.code == 401 and token is None)
    except OSError:
        return False
    return True


def _when_answering(base: str, then: Callable[[], None], token: str | None = None) -> None:
    """Call ``then`` (in a thread of its own) once the worker at ``base`` answers."""

    def watch() -> None:
        while not answers(base, token):
            time.sleep(0.25)
        then()

    threading.Thread(target=watch, name="a2ui-stream-ready", daemon=True).start()


def _run_worker(args: argparse.Namespace) -> int:
    settings = load_settings()
    _check_web_port(settings)
    bootstrap = checked_bootstrap(args, settings)
    if settings.http_auth and not settings.http_tokens:
        _log(
            "worker: WARNING A2UI_STREAM_HTTP_TOKENS is not set: every run endpoint and the "
            "viewer's run pages answer 401 until it holds a token (see a2ui-stream worker --help)"
        )
    base = _web_base(settings)
    return _start_worker(
        _transactions_for(settings, bootstrap),
        bootstrap,
        on_ready=lambda: _say(
            f"worker: ready, answering at {base} (/health, /ui/, OpenWOP)", err=True
        ),
    )


def _transactions_for(settings: Settings, bootstrap: str) -> Settings:
    """With A2UI_STREAM_TRANSACTIONS=auto, ask the broker first: one that plainly refuses them
    (tansu) gets a validator without them and one warning line here, instead of an ERROR from
    the Kafka client each time the validator starts. A broker that does not answer in time
    keeps auto: the validator decides."""
    if settings.transactions != "auto" or probe_transactions(bootstrap) is not False:
        return settings
    _log(
        "worker: this broker does not grant Kafka transactions, so the validator runs without "
        "them (exactly-once rests on source-offset idempotency, docs/pipeline.md)"
    )
    return replace(settings, transactions="off")


def _start_worker(
    settings: Settings, bootstrap: str, *, on_ready: Callable[[], None] | None = None
) -> int:
    import faust

    from app.shell.worker.faust_app import create_app

    # Faust's leader-election topic is Faust's, but the worker declares no topic itself
    # (topic_allow_declare=False): created here, or Faust's consumer logs it as missing.
    result = asyncio.run(ensure_topics(bootstrap, (*desired_for(settings), leader_topic(settings))))
    if result.create:
        _log("worker: created topics " + ", ".join(s.name for s in result.create))
    for drift in result.drift:
        _log(
            f"worker: WARNING topic drift: {drift.topic} {drift.what}={drift.actual}, "
            f"expected {drift.expected}"
        )
    # a fresh Kafka creates its offsets topic on the first request for a coordinator: ask
    # before the consumers do, or each logs COORDINATOR_NOT_AVAILABLE at ERROR meanwhile
    asyncio.run(await_group_coordinator(bootstrap, f"{settings.app_id}-validator"))
    app, _topics = create_app(settings, bootstrap)
    if on_ready is not None:
        token = settings.http_tokens[0] if settings.http_tokens else None
        _when_answering(_web_base(settings), on_ready, token)
    worker = faust.Worker(app, loglevel=settings.log_level, quiet=True)
    worker.execute_from_commandline()  # returns when the worker stops (Ctrl-C / SIGTERM)
    return 0


def _run_up(args: argparse.Namespace) -> int:
    settings = load_settings()
    fast = _embedded(settings if settings.fast_groups else _with_fast_groups(settings))
    _check_web_port(fast)  # before anything starts
    choice = {"embedded": "tansu", "kafka": "kafka", "auto": None}[args.broker]
    if settings.kafka_bootstrap and args.broker in ("embedded", "auto"):
        choice = "external"
        probe_bootstrap(parse_bootstrap(settings.kafka_bootstrap))
    broker: Broker = start_broker(choice, log=_log)
    try:
        if not broker.features.transactions and fast.transactions == "auto":
            fast = replace(fast, transactions="off")  # the banner says transactions=no
        names = {spec.id: spec.name for spec in desired_for(fast)}
        base = _web_base(fast)
        banner = [
            "",
            f"a2ui-stream is up: {broker.summary()}",
            f"  publish admission records {{runId, envelope}} to topic {names['admission']}"
            f" (key = runId) at {broker.bootstrap}",
            f"  recorded events:  topic {names['log']}",
            f"  dead letters:     topic {names['deadletter']}",
            f"  worker web:       {base}/health",
            f"  OpenWOP HTTP:     {base}/.well-known/openwop"
            + (
                " (no token needed in this embedded mode; this machine only)"
                if not fast.http_auth
                else " (A2UI_STREAM_WEB_HOST is not loopback: tokens required,"
                " A2UI_STREAM_HTTP_TOKENS)"
            ),
            f"  surface viewer:   {base}/ui/",
            f"  in another shell: export KAFKA_BOOTSTRAP={broker.bootstrap}",
            "                    and run .venv/bin/a2ui-stream (README, 'Your first surface')",
            "  stop: Ctrl-C (stops the worker and the broker it started)",
            "",
        ]
        _log("up: starting the worker; the addresses follow once it answers")
        return _start_worker(fast, broker.bootstrap, on_ready=lambda: _say("\n".join(banner)))
    finally:
        broker.stop()
        _log("up: stopped")


def _with_fast_groups(settings: Settings) -> Settings:
    # Single-process laptop mode: short group timeouts so the worker is ready in seconds.
    return replace(settings, fast_groups=True)


def _embedded(settings: Settings) -> Settings:
    # The embedded laptop mode is the one place the HTTP API runs without tokens (issue 6
    # item 7), and only on a loopback address; there the web server also answers only
    # loopback Host names (DNS rebinding) and same-origin JSON requests (CSRF): issue 14.
    if not is_loopback_bind(settings.web_host):
        return settings
    return replace(settings, http_auth=False)
