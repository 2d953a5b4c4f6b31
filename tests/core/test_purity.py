"""The dependency rule of STYLE.md, checked: ``app.core`` imports nothing that does I/O, reads
the clock, the environment or randomness, and never the shell, the devtools or the async/Kafka
stack (the rooms of the shell and devtools: tests/shell/test_layers.py); and importing it, in
a fresh process, does no I/O (no finder installed, no environment read, no file opened)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "app" / "core"

FORBIDDEN_MODULES = {
    "faust",
    "mode",
    "aiokafka",
    "kafka",
    "asyncio",
    "app.shell",
    "app.devtools",
    "socket",
    "subprocess",
    "os",
    "time",
    "random",
    "secrets",
    "uuid",
    "pathlib",
    "io",
    "shutil",
    "tempfile",
    "threading",
    "multiprocessing",
    "urllib",
    "http",
    "requests",
    "sys",
    "logging",
    "glob",
}
FORBIDDEN_CALLS = {"open", "input", "print", "exec", "eval", "__import__"}
FORBIDDEN_ATTRS = {
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("date", "today"),
}

# every module of the core's rooms (app/core/<room>/*.py) and the package's own __init__
CORE_FILES = sorted(p for p in CORE.rglob("*.py") if "mypyc-build" not in p.parts)


def _forbidden(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in FORBIDDEN_MODULES)


def _problems(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if _forbidden(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and _forbidden(node.module):
            found.append(f"from {node.module} import ...")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in FORBIDDEN_CALLS
        ):
            found.append(f"{node.func.id}() at line {node.lineno}")
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and (node.value.id, node.attr) in FORBIDDEN_ATTRS
        ):
            found.append(f"{node.value.id}.{node.attr} at line {node.lineno}")
    return found


def _relative(path: Path) -> str:
    return path.relative_to(CORE).as_posix()


def test_purity_core_files_found() -> None:
    names = {_relative(p) for p in CORE_FILES}
    found = {"admission/decision.py", "admission/fold.py", "admission/redaction.py"}
    assert found | {"runlog/run_state.py", "admission/policy.py"} <= names
    # the core is in rooms: no module beside app/core/__init__.py, each room a package
    assert {p.name for p in CORE.glob("*.py")} == {"__init__.py"}
    rooms = {p.parent for p in CORE_FILES if p.parent != CORE}
    assert rooms and all((room / "__init__.py").exists() for room in rooms)


@pytest.mark.parametrize("path", CORE_FILES, ids=_relative)
def test_purity_core_module_imports_nothing_impure(path: Path) -> None:
    assert _problems(path) == []


def test_purity_checker_catches_violations(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os\nfrom app.shell import cli\nimport faust.app\nfrom datetime import datetime\n"
        "x = datetime.now()\nopen('f')\n",
        encoding="utf-8",
    )
    problems = _problems(bad)
    assert len(problems) == 5, problems


# Importing the core does no I/O of its own either: ``app`` and every ``app.core`` module, in a
# fresh process, leave ``sys.meta_path`` as it was, read no environment variable, open no file
# but their own sources, and never load the compiled-core finder (app/compiled_core.py: only an
# entry point installs it) nor a compiled module.
_IMPORT_ALL = """
import os, sys
tree = __import__("pathlib").Path("app/core")
files = [p for p in tree.rglob("*.py") if "mypyc-build" not in p.parts]
parts = [p.relative_to(tree).with_suffix("").parts for p in files]
names = sorted(".".join(q[:-1] if q[-1] == "__init__" else q) for q in parts if q != ("__init__",))
opened, environ = [], []

class Spy(dict):
    def __getitem__(self, key):
        environ.append(key)
        return super().__getitem__(key)
    def get(self, key, default=None):
        environ.append(key)
        return super().get(key, default)
    def __contains__(self, key):
        environ.append(key)
        return super().__contains__(key)

def hook(event, args):
    if event == "open" and isinstance(args[0], str) and not args[0].endswith((".py", ".pyc")):
        opened.append(args[0])
    elif event in ("os.listdir", "os.scandir") and "mypyc" in str(args[0]):
        opened.append(str(args[0]))

finders = list(sys.meta_path)
os.environ = Spy(os.environ)
sys.addaudithook(hook)
import app, app.core
for name in names:
    __import__("app.core." + name)
os.environ = dict(os.environ)
core = [m for n, m in sys.modules.items() if n.startswith("app.core.")]
print(repr({
    "finders": sys.meta_path == finders,
    "loader": "app.compiled_core" in sys.modules,
    "compiled": sorted(m.__name__ for m in core if not m.__file__.endswith(".py")),
    "modules": len(core) >= len(names),
    "environ": sorted(set(environ)),
    "opened": opened,
}))
"""


def test_purity_importing_the_core_does_no_io() -> None:
    env = {**os.environ, "A2UI_STREAM_CORE": "compiled"}  # no entry point: nothing to read it
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL],
        cwd=CORE.parents[1],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert ast.literal_eval(done.stdout.strip()) == {
        "finders": True,
        "loader": False,
        "compiled": [],
        "modules": True,
        "environ": [],
        "opened": [],
    }
