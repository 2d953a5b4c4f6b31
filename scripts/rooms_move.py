"""Put the product shell into rooms by role (issue 20 item 1; STYLE.md "The shape").

    python3 scripts/rooms_move.py            # from anywhere inside the repository

What it does, mechanically, and only what is still to do (run it again: it does nothing more;
run it on a newer main: it moves what is still flat and rewrites what still names old paths):

1. ``git mv`` every module of ``MOVES`` (``app/shell/<flat>.py``) to its room:
   ``app/shell/worker/``, ``app/shell/http/``, ``app/shell/cli/`` or ``app/devtools/``; a moved
   file's relative imports become absolute and its ``Path(__file__).resolve().parents[N]`` is
   deepened by the levels it moved down. The rooms' ``__init__.py`` (and ``cli/__main__.py``,
   so ``python -m app.shell.cli`` still runs) are written when absent.
2. Rewrites every reference to a moved module in the tracked text files (app/, tests/,
   scripts/, docs/, .ci/, viewer/, README.md, Makefile, pyproject.toml, Dockerfile,
   docker-compose.yml):
   dotted names (imports, ``python -m``, monkeypatch targets, importlib strings),
   ``from app.shell import <module>`` (split per room) and paths ``app/shell/<module>.py``
   (also as ``shell/<module>.py``, relative to app/).
3. Renames the private names imported across modules to public ones (``RENAMES``), in the
   module that defines the name and in every file that imports it from there.
4. Points the tests that import the fault kit through ``tests/integration/pipeline_kit.py``'s
   re-exports at the kit's real home (``app.devtools.fault_kit``).
5. Sorts the imports and formats the touched Python files (ruff, from .venv when present) and
   stages every path it touched (``git add`` of those paths only). It never commits.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SELF = Path(__file__).resolve()

# old dotted module -> new dotted module. Borderline ones, and why (the README says the same):
#   broker: `a2ui-stream up` and `a2ui-stream broker` start it (the zero-setup embedded broker),
#     so it is product; only the CLI uses it in the product, so it is in the CLI's room.
#   subscriber_client: `a2ui-stream subscribe` (and the fault suite); the worker never uses it.
#   topics_admin: runtime (the projector ensures subscriber topics; every room names topics
#     with desired_for), so the worker's.
#   principals_file: read once by the worker's composition root for the HTTP API and viewer
#     only, so HTTP's. gateway_key and schema_files: the validator's policy and the HTTP
#     gateway both use the key, several rooms load schemas, so they are shared (shell top).
#   faust_app: the worker process (the loops' service host) and so the worker's; it is the
#     one worker module that may import http/ (it mounts the routes).
MOVES = {
    # the worker: the aiokafka loops and what they need
    "app.shell.validator_loop": "app.shell.worker.validator_loop",
    "app.shell.projector_loop": "app.shell.worker.projector_loop",
    "app.shell.run_index": "app.shell.worker.run_index",
    "app.shell.run_store": "app.shell.worker.run_store",
    "app.shell.validator_store": "app.shell.worker.validator_store",
    "app.shell.assignor": "app.shell.worker.assignor",
    "app.shell.ownership": "app.shell.worker.ownership",
    "app.shell.kafka_io": "app.shell.worker.kafka_io",
    "app.shell.faust_app": "app.shell.worker.faust_app",
    "app.shell.metrics": "app.shell.worker.metrics",
    "app.shell.topics_admin": "app.shell.worker.topics_admin",
    # HTTP: the dispatcher and handlers, the viewer's pages
    "app.shell.http_api": "app.shell.http.api",
    "app.shell.http_forward": "app.shell.http.forward",
    "app.shell.http_gateway": "app.shell.http.gateway",
    "app.shell.http_streams": "app.shell.http.streams",
    "app.shell.viewer": "app.shell.http.viewer",
    "app.shell.principals_file": "app.shell.http.principals_file",
    # the CLI: the commands (cli.py becomes the package; its dotted name does not change)
    "app.shell.cli": "app.shell.cli",
    "app.shell.commands_runtime": "app.shell.cli.runtime",
    "app.shell.commands_publish": "app.shell.cli.publish",
    "app.shell.commands_subscribe": "app.shell.cli.subscribe",
    "app.shell.commands_ops": "app.shell.cli.ops",
    "app.shell.commands_state": "app.shell.cli.state",
    "app.shell.check_command": "app.shell.cli.check",
    "app.shell.broker": "app.shell.cli.broker",
    "app.shell.subscriber_client": "app.shell.cli.subscriber_client",
    # devtools: they use the product; the product never imports them
    "app.shell.bench_admission": "app.devtools.bench_admission",
    "app.shell.bench_output": "app.devtools.bench_output",
    "app.shell.bench_pipeline": "app.devtools.bench_pipeline",
    "app.shell.bench_projection": "app.devtools.bench_projection",
    "app.shell.bench_scale": "app.devtools.bench_scale",
    "app.shell.bench_sse": "app.devtools.bench_sse",
    "app.shell.fault_accounting": "app.devtools.fault_accounting",
    "app.shell.fault_kit": "app.devtools.fault_kit",
    "app.shell.fault_scenarios": "app.devtools.fault_scenarios",
    "app.shell.fault_subscribers": "app.devtools.fault_subscribers",
    "app.shell.soak_command": "app.devtools.soak_command",
}
# Staying at app/shell/ (shared by the rooms): settings, errors, log_safety, schema_files,
# gateway_key, and the new wire and clock modules. Any other module still flat there is named
# when the script ends: a module newer than this table, to place by hand (or add here).
SHARED = {"__init__", "settings", "errors", "log_safety", "schema_files", "gateway_key"}
SHARED |= {"wire", "clock"}
PACKAGES = {"app.shell.cli"}  # a module that becomes a package: its file is the __init__.py

# (defining module, old name, new name): private names that other modules import.
RENAMES = [
    ("app.shell.cli.broker", "_free_port", "free_port"),
    ("app.shell.cli.broker", "_local_kafka_possible", "local_kafka_possible"),
    ("app.shell.cli.runtime", "_run_config", "run_config"),
    ("app.shell.worker.faust_app", "_state_metrics", "state_metrics"),
    ("app.devtools.bench_pipeline", "_pct", "pct"),
    ("app.devtools.bench_pipeline", "_produce", "produce"),
    ("app.devtools.bench_pipeline", "_worker_env", "worker_env"),
    ("app.devtools.bench_projection", "_v1_component", "v1_component"),
]

ROOM_INITS = {
    "app/shell/worker/__init__.py": '''\
"""The worker's room: the aiokafka loops as thin drivers (validator, projector, the read
side's run index), their stores, the assignor, the ownership map, Kafka I/O, topic admin,
metrics and the Faust app that hosts them.

May import: app.core, the shared shell modules (app.shell.settings, errors, log_safety,
schema_files, gateway_key, wire, clock) and this room; only ``faust_app`` (the worker
process, which mounts the HTTP routes) also imports app.shell.http. Never app.shell.cli or
app.devtools (tests/shell/test_layers.py).
"""
''',
    "app/shell/http/__init__.py": '''\
"""The HTTP room: the dispatcher and handlers of the one route table (app.core.routes), the
SSE/poll streams, forwarding to a partition's owner, the admission gateway and the viewer's
pages.

May import: app.core, the shared shell modules, this room and app.shell.worker (the handlers
read what the worker's read side holds: the run index, its store, the ownership map). Never
app.shell.cli or app.devtools (tests/shell/test_layers.py).
"""
''',
    "app/devtools/__init__.py": '''\
"""Developer tooling that uses the product: the benchmarks (``a2ui-stream bench``), the fault
scenarios and their kit, the soak (``a2ui-stream soak``).

May import anything of the product. The product never imports it: only app.shell.cli
reaches it, by imports inside the functions that run those commands
(tests/shell/test_layers.py).
"""
''',
    "app/shell/cli/__main__.py": '''\
"""``python -m app.shell.cli``: the ``a2ui-stream`` command (the worker processes that the
tests and benchmarks start run it so)."""

import sys

from app.shell.cli import main

sys.exit(main())
''',
}

TEXT_SUFFIXES = {
    ".py",
    ".md",
    ".toml",
    ".sh",
    ".yml",
    ".yaml",
    ".cfg",
    ".txt",
    ".json",
    ".js",
    ".mjs",
    "",
}
TEXT_ROOTS = ("app/", "tests/", "scripts/", "docs/", ".ci/", "viewer/")
TEXT_FILES = {"README.md", "Makefile", "pyproject.toml", "Dockerfile", "docker-compose.yml"}


def git(*args: str, capture: bool = False) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, check=True, text=True, capture_output=capture)
    return done.stdout if capture else ""


def path_of(module: str) -> Path:
    if module in PACKAGES:
        return ROOT / module.replace(".", "/") / "__init__.py"
    return ROOT / (module.replace(".", "/") + ".py")


def flat_path_of(module: str) -> Path:
    return ROOT / (module.replace(".", "/") + ".py")


def depth(path: Path) -> int:
    return len(path.relative_to(ROOT).parts)


def absolutize(text: str, package: str) -> str:
    """``from . import x`` / ``from .x import y`` in a module of ``package`` -> absolute."""

    def repl(match: re.Match[str]) -> str:
        dots, rest = match.group(2), match.group(3)
        base = package.split(".")
        if len(dots) > 1:
            base = base[: -(len(dots) - 1)]
        target = ".".join(base + ([rest] if rest else []))
        return f"{match.group(1)}from {target} import"

    return re.sub(r"(?m)^(\s*)from (\.+)([\w.]*) import", repl, text)


def deepen(text: str, levels: int) -> str:
    if levels == 0:
        return text
    return re.sub(
        r"(Path\(__file__\)\.resolve\(\)\.parents\[)(\d+)\]",
        lambda m: f"{m.group(1)}{int(m.group(2)) + levels}]",
        text,
    )


def move(touched: set[Path]) -> None:
    for old, new in MOVES.items():
        src, dst = flat_path_of(old), path_of(new)
        if src == dst:
            continue
        if not src.exists():
            if not dst.exists():
                print(f"  note: {old} is neither flat nor moved (gone from main?)")
            continue
        if dst.exists():
            here, there = src.relative_to(ROOT), dst.relative_to(ROOT)
            sys.exit(f"both {here} and {there} exist: merge them by hand, then run again")
        dst.parent.mkdir(parents=True, exist_ok=True)
        git("mv", str(src.relative_to(ROOT)), str(dst.relative_to(ROOT)))
        text = dst.read_text(encoding="utf-8")
        text = absolutize(text, old.rsplit(".", 1)[0])
        text = deepen(text, depth(dst) - depth(src))
        dst.write_text(text, encoding="utf-8")
        touched.add(dst)
        print(f"  moved {src.relative_to(ROOT)} -> {dst.relative_to(ROOT)}")
    for rel, text in ROOM_INITS.items():
        target = ROOT / rel
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            touched.add(target)
            print(f"  wrote {rel}")


def text_files() -> list[Path]:
    found = []
    for rel in git("ls-files", "-z", capture=True).split("\0"):
        if not rel:
            continue
        path = ROOT / rel
        if path == SELF or "viewer_dist" in path.parts or not path.is_file():
            continue
        if (rel.startswith(TEXT_ROOTS) and path.suffix in TEXT_SUFFIXES) or rel in TEXT_FILES:
            found.append(path)
    return found


_NAME_MOVES = {old.rsplit(".", 1)[1]: new for old, new in MOVES.items() if old != new}
_DOTTED = re.compile(
    r"\bapp\.shell\.(" + "|".join(sorted(_NAME_MOVES, key=len, reverse=True)) + r")\b"
)
_PATH_MOVES = {
    old.rsplit(".", 1)[1]: str(path_of(new).relative_to(ROOT))
    for old, new in MOVES.items()
    if path_of(new) != flat_path_of(old)
}
_PATHED = re.compile(
    r"\bapp/shell/(" + "|".join(sorted(_PATH_MOVES, key=len, reverse=True)) + r")\.py\b"
)
# The same paths relative to app/ (as tests that walk app/ spell them: "shell/<module>.py").
_APP_RELATIVE = re.compile(
    r"(?<![\w/.])shell/(" + "|".join(sorted(_PATH_MOVES, key=len, reverse=True)) + r")\.py\b"
)
_FROM_SHELL = re.compile(r"(?m)^([ \t]*)from app\.shell import (\([^)]*\)|[^\n]*)")


def split_from_shell(match: re.Match[str]) -> str:
    """``from app.shell import a, b as c``: each moved module from its room."""
    indent, body = match.group(1), match.group(2)
    names = [n.strip() for n in body.strip("()").replace("\n", " ").split(",") if n.strip()]
    if "#" in body or not any(n.split(" as ")[0].strip() in _NAME_MOVES for n in names):
        return match.group(0)
    stays, lines = [], []
    for item in names:
        name, _, alias = (part.strip() for part in item.partition(" as "))
        if name not in _NAME_MOVES:
            stays.append(item)
            continue
        package, leaf = _NAME_MOVES[name].rsplit(".", 1)
        shown = alias or name
        alias_part = "" if shown == leaf else f" as {shown}"
        lines.append(f"{indent}from {package} import {leaf}{alias_part}")
    if stays:
        lines.insert(0, f"{indent}from app.shell import {', '.join(stays)}")
    return "\n".join(lines)


def rewrite(touched: set[Path]) -> None:
    for path in text_files():
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        new = _FROM_SHELL.sub(split_from_shell, text) if path.suffix == ".py" else text
        new = _DOTTED.sub(lambda m: _NAME_MOVES[m.group(1)], new)
        new = _PATHED.sub(lambda m: _PATH_MOVES[m.group(1)], new)
        new = _APP_RELATIVE.sub(lambda m: _PATH_MOVES[m.group(1)].removeprefix("app/"), new)
        if new != text:
            path.write_text(new, encoding="utf-8", errors="surrogateescape")
            touched.add(path)


def _imports_name(tree: ast.Module, module: str, name: str) -> bool:
    return any(
        isinstance(node, ast.ImportFrom)
        and node.module == module
        and any(a.name == name for a in node.names)
        for node in ast.walk(tree)
    )


def rename(touched: set[Path]) -> None:
    py = [p for p in text_files() if p.suffix == ".py"]
    for module, old, new in RENAMES:
        definer = path_of(module)
        if not definer.exists():
            print(f"  note: {module} not found; {old} not renamed")
            continue
        pattern = re.compile(rf"(?<![\w]){re.escape(old)}\b")
        for path in py:
            text = path.read_text(encoding="utf-8")
            if old not in text:
                continue
            if path != definer and not _imports_name(ast.parse(text), module, old):
                continue
            new_text = pattern.sub(new, text)
            if new_text != text:
                path.write_text(new_text, encoding="utf-8")
                touched.add(path)


KIT = ROOT / "tests/integration/pipeline_kit.py"
KIT_MODULE = "tests.integration.pipeline_kit"
FAULT_KIT = MOVES["app.shell.fault_kit"]


def unkit(touched: set[Path]) -> None:
    """Tests import what the fault kit defines from the fault kit, not via pipeline_kit."""
    if not KIT.exists():
        return
    reexported = set()
    for node in ast.parse(KIT.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module == FAULT_KIT:
            reexported |= {a.asname or a.name for a in node.names}
    for path in (ROOT / "tests").rglob("*.py"):
        if path == KIT:
            continue
        text = path.read_text(encoding="utf-8")
        if KIT_MODULE not in text:
            continue
        lines = text.splitlines(keepends=True)
        edits = []
        for node in ast.walk(ast.parse(text)):
            if not (isinstance(node, ast.ImportFrom) and node.module == KIT_MODULE):
                continue
            moved = [a for a in node.names if a.name in reexported]
            if not moved:
                continue
            kept = [a for a in node.names if a.name not in reexported]
            indent = " " * node.col_offset

            def spell(aliases: list[ast.alias]) -> str:
                return ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in aliases)

            new = f"{indent}from {FAULT_KIT} import {spell(moved)}\n"
            if kept:
                new += f"{indent}from {KIT_MODULE} import {spell(kept)}\n"
            assert node.end_lineno is not None
            edits.append((node.lineno - 1, node.end_lineno, new))
        for start, end, new in sorted(edits, reverse=True):
            lines[start:end] = [new]
        if edits:
            path.write_text("".join(lines), encoding="utf-8")
            touched.add(path)


def tidy(touched: set[Path]) -> None:
    ruff = ROOT / ".venv/bin/ruff"
    command = str(ruff) if ruff.exists() else shutil.which("ruff")
    rels = [str(p.relative_to(ROOT)) for p in sorted(touched) if p.exists()]
    files = [rel for rel in rels if rel.endswith(".py") and rel.startswith(("app/", "tests/"))]
    if not files:
        return
    if command is None:
        print("  ruff not found: run `ruff check --select I --fix` and `ruff format` yourself")
        return
    subprocess.run([command, "check", "--select", "I", "--fix", "--quiet", *files], cwd=ROOT)
    subprocess.run([command, "format", "--quiet", *files], cwd=ROOT, check=True)


def main() -> None:
    touched: set[Path] = set()
    print("rooms_move: moving")
    move(touched)
    print("rooms_move: rewriting references")
    rewrite(touched)
    rename(touched)
    unkit(touched)
    tidy(touched)
    if touched:
        git("add", "--", *sorted(str(p.relative_to(ROOT)) for p in touched))
    for path in sorted((ROOT / "app/shell").glob("*.py")):
        if path.stem not in SHARED:
            print(f"  note: app/shell/{path.name} is in no room (not in MOVES): place it by hand")
    print(f"rooms_move: {len(touched)} files touched and staged (nothing committed)")


if __name__ == "__main__":
    main()
