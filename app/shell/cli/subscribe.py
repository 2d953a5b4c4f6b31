"""``a2ui-stream subscribe`` and ``unsubscribe``: register a subscriber and tail its surfaces.

Shell module. ``subscribe`` prints one JSON line per validated surface it receives (the run,
the surface, its sequence, trust, whether it may render and act, and the surface itself), and
says on stderr when it asked for a resync and, once per failing state, which surface failed
re-validation (the rule, the JSON Pointer into the surface, the sequence; it is not rendered,
and the run's other surfaces keep coming). Ctrl-C stops it; the registration stays until
``unsubscribe`` (or ``--unsubscribe-on-exit``), and the command says so when it stops.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import sys
import uuid
from typing import Any

import orjson

from app.core.projection.frames import DEFAULT_FULL_EVERY
from app.core.projection.subscriber_view import InvalidSurface
from app.shell.cli.client import client_command
from app.shell.cli.subscriber_client import SubscriberClient
from app.shell.errors import OperatorError
from app.shell.settings import load_settings

__all__ = ["add_parser"]

_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def add_parser(sub: Any) -> None:
    _add_subscribe(sub)
    _add_unsubscribe(sub)


def _add_subscribe(sub: Any) -> None:
    subscribe = sub.add_parser(
        "subscribe",
        help="register a subscriber and print its validated surfaces (JSON Lines)",
        description=(
            "Register a subscriber for one or more runs (or every run), then read its topic: "
            "each full frame or RFC 6902 delta is applied, re-validated, and printed as one JSON "
            "line. A frame that fails is never printed: a resync is requested instead.\n\n"
            "The registration outlives this command: Ctrl-C stops reading, and the projector "
            "keeps writing the subscriber's topic, so `subscribe --id ID` can resume where it "
            "stopped. Remove it with `a2ui-stream unsubscribe ID`, or pass "
            "--unsubscribe-on-exit."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    subscribe.add_argument(
        "--run",
        action="append",
        dest="runs",
        metavar="RUN",
        help="a runId to follow (repeatable); default: every run",
    )
    subscribe.add_argument("--delta", action="store_true", help="receive RFC 6902 delta frames")
    subscribe.add_argument(
        "--full-every",
        type=int,
        default=DEFAULT_FULL_EVERY,
        metavar="N",
        help=(
            "check the held surface against a digest every N deltas; a full frame follows only "
            f"a mismatch (default {DEFAULT_FULL_EVERY})"
        ),
    )
    subscribe.add_argument(
        "--id", help="the subscriberId, to resume a registration (default: a new random one)"
    )
    subscribe.add_argument("--bootstrap", help="override KAFKA_BOOTSTRAP")
    subscribe.add_argument(
        "--unsubscribe-on-exit",
        action="store_true",
        help="remove the registration when stopped (otherwise it stays, and its topic fills)",
    )
    subscribe.set_defaults(func=_run_subscribe)


def _add_unsubscribe(sub: Any) -> None:
    unsubscribe = sub.add_parser(
        "unsubscribe",
        help="remove a subscriber's registration",
        description=(
            "Remove subscriber ID's registration: the projector stops writing its topic "
            "(a tombstone on the subscriptions topic)."
        ),
    )
    unsubscribe.add_argument("id", help="the subscriberId")
    unsubscribe.add_argument("--bootstrap", help="override KAFKA_BOOTSTRAP")
    unsubscribe.set_defaults(func=_run_unsubscribe)


def _subscriber_id(raw: str | None) -> str:
    sid = raw or f"cli-{uuid.uuid4().hex[:12]}"
    if not _ID.match(sid):
        raise OperatorError(f"--id {sid!r} must match ^[A-Za-z0-9._-]{{1,128}}$")
    return sid


def _run_subscribe(args: argparse.Namespace) -> int:
    if not 1 <= args.full_every <= 100_000:
        raise OperatorError("--full-every must be between 1 and 100000")
    settings = load_settings()
    client = SubscriberClient(
        client_command(args, settings),
        _subscriber_id(args.id),
        runs=args.runs,
        delta=args.delta,
        full_every=args.full_every,
        settings=settings,
        on_report=_print_report,
    )
    return asyncio.run(_tail(client, args.unsubscribe_on_exit))


def _print_report(report: InvalidSurface) -> None:
    # the ids and the message come from frames: control characters are escaped, so a report
    # is always one line of its own
    line = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", report.describe())
    print(f"not rendered: {line}", file=sys.stderr, flush=True)


async def _tail(client: SubscriberClient, unsubscribe: bool) -> int:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    await client.register()
    print(
        f"subscribed as {client.subscriber_id} (topic {client.topic}); Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
    resyncs = 0
    try:
        async for delivered in client.surfaces(stopping):
            held = delivered.surface
            print(
                orjson.dumps(
                    {
                        "runId": held.run_id,
                        "surfaceId": held.surface_id,
                        "sequence": held.sequence,
                        "frame": delivered.kind,
                        "trust": held.trust,
                        "renderable": held.renderable,
                        "actionsEnabled": held.actions_enabled,
                        "deleted": held.deleted,
                        "surface": held.content,
                    }
                ).decode(),
                flush=True,
            )
            if client.resyncs_requested != resyncs:
                resyncs = client.resyncs_requested
                print(f"resync requested ({resyncs} so far)", file=sys.stderr, flush=True)
    finally:
        if unsubscribe:
            await client.unregister()
            print(f"unsubscribed {client.subscriber_id}", file=sys.stderr, flush=True)
        else:
            # the registration outlives the command, and the projector keeps writing its topic
            print(
                f"stopped reading; {client.subscriber_id} stays registered (resume with --id "
                f"{client.subscriber_id}; remove it with: a2ui-stream unsubscribe "
                f"{client.subscriber_id})",
                file=sys.stderr,
                flush=True,
            )
    return 0


def _run_unsubscribe(args: argparse.Namespace) -> int:
    settings = load_settings()
    client = SubscriberClient(
        client_command(args, settings), _subscriber_id(args.id), settings=settings
    )
    asyncio.run(client.unregister())
    print(f"unsubscribed {client.subscriber_id}")
    return 0
