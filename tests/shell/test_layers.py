"""The rooms of STYLE.md ("The shape"), checked: which part of ``app`` may import which.

Every ``import`` and ``from ... import`` of every module under app/ is read with ``ast``, at
module level (what runs when the module is imported, class bodies and ``if TYPE_CHECKING:``
included) and inside functions (what runs when they are called). A module belongs to a room:

=========  ======================================================================
core       app/core/: pure (tests/core/test_purity.py checks the rest of that rule)
shared     app/shell/*.py: settings (and settings_table), errors, log_safety,
           schema_files, gateway_key, wire, clock: what every room of the shell reads
worker     app/shell/worker/: the aiokafka loops, their stores, Kafka I/O, the Faust app
http       app/shell/http/: the route dispatcher and handlers, the viewer's pages
cli        app/shell/cli/: the commands, the broker harness, the subscriber client
devtools   app/devtools/: benchmarks, fault scenarios, soak
app        app/__init__.py, app/compiled_core.py: the version and the compiled core's loader
=========  ======================================================================

and may import (``ALLOWED``; its own room always):

=========  ===========================================  ==========================================
room       may import                                   why
=========  ===========================================  ==========================================
core       nothing else                                 pure: time, ids and schemas come as values
shared     core                                         read by every room, so it reads no room
worker     core, shared, app                            the loops drive the core; faust_app alone
           (faust_app also: http)                       also mounts the HTTP routes: the worker
                                                        process is their host (composition root)
http       core, shared, worker                         handlers read what the worker's read side
                                                        holds (run index, its store, ownership)
cli        core, shared, worker, app                    commands start the worker, use Kafka I/O
           (inside functions only: devtools)            and topic admin; bench and soak run
                                                        devtools when asked, never on import
devtools   everything                                   it uses the product; nothing imports it
app        core                                         the compiled core's loader
=========  ===========================================  ==========================================

Not needed today and so not allowed: worker -> cli, http -> cli, cli -> http (the CLI starts
the worker, which mounts HTTP), the product -> devtools at module level. A new direction
means editing the table here, with its reason.

Also: no module imports another module's private name (``from x import _name``): what is
shared is public, in the module that owns it.

Inside the core, its rooms (``CORE_ORDER``, app/core/<room>/) form a line: a room imports only
the rooms before it, and a module imports a module of its own room by its module path, never
through the names the room's ``__init__`` re-exports (it imports every module of the room, so
that import would meet the half-initialized package; ``from app.core.<room> import <module>``
is a module import and fine):

==========  ================================  ================================================
room        may import                        why
==========  ================================  ================================================
common      nothing else                      JSON Pointers, the specs' reference payloads
runlog      common                            keys, topics, run state and lifecycle, owners
admission   common, runlog                    the rules, the decision and the fold's guard
                                              over a run's state, the validator's step
projection  common, runlog, admission         surfaces are folded with the fold's kinds, the
                                              projector's batch shares the validator's Refetch
http        every other room                  HTTP values over admission, projection and runs
==========  ================================  ================================================
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"

ALLOWED: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "shared": frozenset({"core"}),
    "worker": frozenset({"core", "shared", "app"}),
    "http": frozenset({"core", "shared", "worker"}),
    "cli": frozenset({"core", "shared", "worker", "app"}),
    "devtools": frozenset({"core", "shared", "worker", "http", "cli", "app"}),
    "app": frozenset({"core"}),
}
SHARED = {"__init__", "settings", "errors", "log_safety", "schema_files", "gateway_key", "wire"}
SHARED |= {"clock", "settings_table"}
# (module, room) pairs beyond the table, each with its reason.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("app.shell.worker.faust_app", "http"): "the worker process mounts the HTTP routes",
}
# Rooms that may import these rooms inside functions only (lazily, when a command asks).
LAZY_ONLY: dict[str, frozenset[str]] = {"cli": frozenset({"devtools"})}


def room_of(module: str) -> str | None:
    """The room of a dotted module name inside app, or None for anything outside app."""
    parts = module.split(".")
    if parts[0] != "app":
        return None
    if len(parts) == 1 or parts[1] in ("compiled_core", "__version__", "CORE_BUILD"):
        return "app"
    if parts[1] in ("core", "devtools"):
        return parts[1]
    if parts[1] == "shell":
        if len(parts) > 2 and parts[2] in ("worker", "http", "cli"):
            return parts[2]
        return "shared"
    return "app"


@dataclass(frozen=True)
class Imported:
    target: str  # the dotted module (or module.name for ``from module import name``)
    line: int
    lazy: bool  # inside a function
    names: tuple[str, ...]  # the names of a ``from ... import``


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, source: str, *, is_package: bool = False) -> list[Imported]:
    tree = ast.parse(source)
    found: list[Imported] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                found.extend(Imported(a.name, child.lineno, lazy, ()) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                target = _absolute(module, child, is_package)
                names = tuple(a.name for a in child.names)
                found.append(Imported(target, child.lineno, lazy, names))
            visit(child, inner)

    visit(tree, False)
    return found


def violations(module: str, source: str, *, is_package: bool = False) -> list[str]:
    """What ``module`` (its ``source``) imports against the table, or privately."""
    here = room_of(module)
    problems = []
    for imp in imports_of(module, source, is_package=is_package):
        where = f"{module}:{imp.line}"
        private = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
        if private and imp.target.split(".")[0] in ("app", "tests"):
            problems.append(f"{where} imports private {', '.join(private)} from {imp.target}")
        targets = [imp.target] + [f"{imp.target}.{n}" for n in imp.names]
        rooms = {room_of(t) for t in targets} - {None, here}
        for there in sorted(r for r in rooms if r is not None):
            if there in ALLOWED[here or "app"] or (module, there) in EXCEPTIONS:
                continue
            if imp.lazy and there in LAZY_ONLY.get(here or "", frozenset()):
                continue
            how = "inside a function" if imp.lazy else "at module level"
            problems.append(f"{where} ({here}) imports {imp.target} ({there}) {how}")
    return problems


APP_FILES = sorted(p for p in APP.rglob("*.py") if "viewer_dist" not in p.parts)
TEST_FILES = sorted((ROOT / "tests").rglob("*.py"))


def test_layers_every_app_module_has_a_room() -> None:
    rooms = {room_of(_module_name(p)) for p in APP_FILES}
    assert rooms == set(ALLOWED), rooms
    # A new module at app/shell/ is shared by every room only if it is added here on purpose.
    shared = {p.stem for p in (APP / "shell").glob("*.py")}
    assert shared == SHARED, f"place in a room, or add to SHARED: {shared ^ SHARED}"


@pytest.mark.parametrize("path", APP_FILES, ids=lambda p: str(p.relative_to(APP)))
def test_layers_app_module_imports_follow_the_table(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert violations(_module_name(path), source, is_package=path.name == "__init__.py") == []


def test_layers_no_test_imports_a_private_name() -> None:
    found = []
    for path in TEST_FILES:
        module = _module_name(path)
        for imp in imports_of(module, path.read_text(encoding="utf-8")):
            private = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
            if private and imp.target.split(".")[0] in ("app", "tests"):
                found.append(f"{module}:{imp.line} {imp.target} {private}")
    assert found == []


def test_layers_only_the_cli_names_devtools_modules() -> None:
    """importlib reads a name the import checks above cannot see: only the CLI may spell one."""
    spelled = []
    for path in APP_FILES:
        module = _module_name(path)
        if room_of(module) in ("devtools", "cli"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.startswith("app.devtools")
            ):
                spelled.append(f"{module}:{node.lineno} {node.value!r}")
    assert spelled == []


def test_layers_the_product_runs_without_devtools() -> None:
    """Every product module imported, and the CLI's parser built for a product command (as
    ``a2ui-stream worker`` and ``up`` build it): no app.devtools module is loaded."""
    product = [
        _module_name(p)
        for p in APP_FILES
        if room_of(_module_name(p)) not in ("devtools",) and p.name != "__main__.py"
    ]
    code = (
        "import importlib, sys\n"
        f"for name in {product!r}:\n"
        "    importlib.import_module(name)\n"
        "from app.shell.cli import build_parser\n"
        "for command in ('worker', 'up', 'broker', 'check', 'publish'):\n"
        "    build_parser([command, '--help'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('app.devtools')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


CORE_ORDER = ("common", "runlog", "admission", "projection", "http")
CORE_FILES = sorted(p for p in (APP / "core").rglob("*.py") if "mypyc-build" not in p.parts)


def core_room_of(module: str) -> str | None:
    """The room of a dotted name inside app.core (``app.core.admission.fold``: admission)."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["app", "core"] and len(parts) > 2 else None


def core_violations(module: str, source: str, *, is_package: bool = False) -> list[str]:
    """What a core module imports against ``CORE_ORDER``, or from its own room's re-exports."""
    here = core_room_of(module)
    if here is None:  # app/core/__init__.py: the core's docstring, nothing to import
        return [f"{module} imports {i.target}" for i in imports_of(module, source)]
    problems = []
    for imp in imports_of(module, source, is_package=is_package):
        targets = [imp.target] + [f"{imp.target}.{n}" for n in imp.names]
        rooms = {core_room_of(t) for t in targets if t.startswith("app.core.")}
        for there in sorted(r for r in rooms if r is not None):
            where = f"{module}:{imp.line}"
            if there not in CORE_ORDER:
                problems.append(f"{where} imports {imp.target}: {there} is no room of the core")
            elif CORE_ORDER.index(there) > CORE_ORDER.index(here):
                problems.append(f"{where} ({here}) imports {imp.target} ({there}), a later room")
        modules = {m.stem for m in (APP / "core" / here).glob("*.py")}
        names = set(imp.names) - modules  # ``from app.core.projection import frames``: a module
        if imp.target == f"app.core.{here}" and names and not is_package:
            problems.append(
                f"{module}:{imp.line} imports {sorted(names)} from its own room's package"
            )
    return problems


def test_layers_the_core_rooms_are_the_order() -> None:
    rooms = {p.parent.name for p in CORE_FILES if p.parent != APP / "core"}
    assert rooms == set(CORE_ORDER), rooms


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(APP)))
def test_layers_core_rooms_import_only_earlier_rooms(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    name, is_package = _module_name(path), path.name == "__init__.py"
    assert core_violations(name, source, is_package=is_package) == []


CORE_BAD = [
    ("app.core.runlog.keys", "from app.core.admission.fold import apply\n", "a later room"),
    ("app.core.admission.fold", "def f():\n    import app.core.http.errors\n", "a later room"),
    ("app.core.projection.frames", "from app.core import fold\n", "no room"),
    ("app.core.projection.frames", "from app.core.projection import Surface\n", "own room"),
]


@pytest.mark.parametrize(("module", "source", "expected"), CORE_BAD, ids=[b[0] for b in CORE_BAD])
def test_layers_core_checker_catches_violations(module: str, source: str, expected: str) -> None:
    problems = core_violations(module, source)
    assert len(problems) == 1 and expected in problems[0], problems


def test_layers_core_checker_allows_what_the_order_allows() -> None:
    assert core_violations("app.core.http.actions", "from app.core.runlog import keys\n") == []
    assert (
        core_violations("app.core.admission.fold", "from app.core.admission.rules import X\n") == []
    )
    assert (
        core_violations("app.core.admission.fold", "from app.core.admission import rules\n") == []
    )
    init = "from app.core.projection.frames import plan_frames\n"
    assert core_violations("app.core.projection", init, is_package=True) == []


# The checker itself: each line below breaks one rule and is found.
BAD = [
    ("app.shell.worker.run_index", "from app.shell.http.api import HttpApi\n", "(http)"),
    ("app.shell.worker.metrics", "def f():\n    from app.shell.cli import main\n", "(cli)"),
    ("app.shell.http.api", "from app.shell.cli.broker import Broker\n", "(cli)"),
    ("app.shell.http.streams", "def f():\n    import app.devtools.bench_sse\n", "(devtools)"),
    ("app.shell.cli.runtime", "from app.devtools import fault_kit\n", "module level"),
    ("app.shell.settings", "from app.shell.worker.kafka_io import read_topic\n", "(worker)"),
    ("app.core.admission.fold", "from app.devtools.bench_output import emit\n", "(devtools)"),
    ("app.shell.cli.ops", "from app.shell.cli.broker import _free_port\n", "private _free_port"),
    ("app.shell.worker.run_index", "from . import _helpers\n", "private _helpers"),
    ("app.shell.worker.validator_loop", "class C:\n    from app.shell import http\n", "(http)"),
]


@pytest.mark.parametrize(("module", "source", "expected"), BAD, ids=[b[0] for b in BAD])
def test_layers_checker_catches_violations(module: str, source: str, expected: str) -> None:
    problems = violations(module, source)
    assert len(problems) == 1 and expected in problems[0], problems


def test_layers_checker_allows_what_the_table_allows() -> None:
    assert violations("app.shell.cli.__init__", "def f():\n    import app.devtools.soak\n") == []
    assert (
        violations("app.shell.http.api", "from app.shell.worker.run_index import RunIndex\n") == []
    )
    assert (
        violations("app.shell.worker.faust_app", "from app.shell.http.api import HttpApi\n") == []
    )
    assert (
        violations("app.devtools.bench_sse", "from app.shell.cli.broker import free_port\n") == []
    )
    assert violations("app.shell.worker.kafka_io", "from __future__ import annotations\n") == []
