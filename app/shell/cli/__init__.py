"""The ``a2ui-stream`` command: one entry point, a subcommand per capability.

Shell module. Each subcommand lives in its own module and registers itself with
``add_parser(subparsers)``; this file only assembles them and maps errors to exit codes
(0 success, 1 the command's own "not clean" result, 2 usage or operator errors, 70 a bug).
Every error ends as one or two lines that say what to do (``app.shell.errors.report``); the
traceback only with ``--debug``, which is accepted anywhere on the command line.

The CLI's room (app/shell/cli/): the commands, the broker harness that ``up`` and ``broker``
start, the subscriber client. May import: app.core, the shared shell modules and
app.shell.worker; app.devtools (``bench``, ``soak``) only inside functions, when the command
line asks for them (tests/shell/test_layers.py).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from app import __version__
from app.compiled_core import install
from app.shell.errors import report

__all__ = ["build_parser", "main"]

# Modules that contribute subcommands; each has add_parser(subparsers). Optional ones (landing
# with later issues) are skipped when absent, so the CLI never advertises a missing command.
_COMMAND_MODULES = (
    "app.shell.cli.runtime",  # up, worker, broker, topics, config
    "app.shell.cli.check",  # check
    "app.shell.cli.publish",  # publish
    "app.shell.cli.subscribe",  # subscribe, unsubscribe
    "app.shell.cli.deadletter",  # deadletter
    "app.shell.cli.ops",  # runs, log
    "app.shell.cli.state",  # state rebuild
)
# Developer tooling (app.devtools; the product never imports it, tests/shell/test_layers.py):
# imported only when the command line names no product command, so `a2ui-stream worker` and
# `up` run without it and `a2ui-stream --help`, `soak` and `bench ...` have it.
_DEVTOOLS_MODULES = (
    "app.devtools.soak_command",  # soak
)
_BENCH_MODULES = (
    "app.devtools.bench_admission",
    "app.devtools.bench_pipeline",
    "app.devtools.bench_projection",
    "app.devtools.bench_sse",
    "app.devtools.bench_scale",
)

_DESCRIPTION = """\
a2ui-stream: a Kafka host for agent-generated UI (OpenWOP ui.a2ui-surface envelopes).

Start here (the README's "Your first surface" walks through it with examples/):
  a2ui-stream up              embedded broker + topics + worker, in the foreground (Ctrl-C stops)
  a2ui-stream check FILE      decide admission records offline, exactly as the worker would

Configuration is by environment variables; `a2ui-stream config` lists them with their values.
Exit status: 0 done, 1 the command's own "not clean" (refused records, topic drift), 2 a usage
or configuration error (the message says what to change), 70 a bug.
"""

# What `soak` says in --help: its module's docstring is written for developers (module
# paths, issue numbers), so the users' text is set here (issue 19 item 5). `bench scale`
# has its own (bench_scale.DESCRIPTION and EPILOG).
_USER_DESCRIPTIONS = {
    ("soak",): (
        "Run the fault scenarios (docs/reliability.md: workers and the broker killed, "
        "subscribers paused, resync storms, producers retrying) repeatedly against a real "
        "broker for a set time, bigger than in CI, with the same accounting, then the hostile-"
        "input fuzzing. Prints one row per scenario with the totals (--json: one JSON object). "
        "Exit status 0 all clean, 1 anything lost, duplicated, mis-ordered, decided wrongly or "
        "crashed, 2 usage."
    ),
}


def _load(name: str) -> object | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise


def build_parser(words: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line's parser; given the command line (``words``), without the
    developer tooling's commands when it names a product command."""
    parser = argparse.ArgumentParser(
        prog="a2ui-stream",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"a2ui-stream {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an error, print the traceback too (also accepted after the command)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        module = _load(name)
        if module is not None:
            module.add_parser(sub)  # type: ignore[attr-defined]
    if words is None or _command_of(words) not in sub.choices:
        _add_devtools(sub)
    for path, text in _USER_DESCRIPTIONS.items():
        command = _subcommand(parser, path)
        if command is not None:
            command.description = text
            command.formatter_class = argparse.HelpFormatter
    return parser


def _command_of(words: Sequence[str]) -> str | None:
    """The subcommand named (the first word that is no option: no global option takes a
    value), or None."""
    return next((word for word in words if not word.startswith("-")), None)


def _add_devtools(sub: Any) -> None:
    for name in _DEVTOOLS_MODULES:
        module = _load(name)
        if module is not None:
            module.add_parser(sub)  # type: ignore[attr-defined]
    bench = sub.add_parser(
        "bench",
        help="run a committed benchmark and print its figures with their baseline",
        description="Benchmarks print a table for people; --json prints one JSON object.",
    )
    bench_sub = bench.add_subparsers(dest="bench", metavar="NAME")
    for name in _BENCH_MODULES:
        module = _load(name)
        if module is not None:
            module.register(bench_sub)  # type: ignore[attr-defined]
    bench.set_defaults(func=lambda args: _missing_subcommand(bench))


def _subcommand(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Any:
    for name in path:
        found = [
            a.choices.get(name)
            for a in parser._actions  # noqa: SLF001 - argparse has no public way to walk them
            if isinstance(a, argparse._SubParsersAction)  # noqa: SLF001
        ]
        if not found or found[0] is None:
            return None
        parser = found[0]
    return parser


def _missing_subcommand(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    # The entry point: the compiled core (app/compiled_core.py) is installed here, before any
    # command imports app.core (this module and app.shell.errors import none of it).
    install()
    words = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in words  # before or after the command: people add it to what failed
    words = [word for word in words if word != "--debug"]
    parser = build_parser(words)
    args = parser.parse_args(words)
    args.debug = debug
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(func(args))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one or two lines that say what to do; the traceback with --debug
        return report(exc, debug=debug)


if __name__ == "__main__":
    sys.exit(main())
