"""The dependency rule of STYLE.md, checked: ``app.core`` imports nothing that does I/O, reads
the clock, the environment or randomness, and never the shell, the devtools or the async/Kafka
stack (the rooms of the shell and devtools: tests/shell/test_layers.py)."""

from __future__ import annotations

import ast
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

CORE_FILES = sorted(CORE.glob("*.py"))


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


def test_purity_core_files_found() -> None:
    names = {p.name for p in CORE_FILES}
    assert {"admission.py", "fold.py", "redaction.py", "run_state.py", "policy.py"} <= names


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: p.name)
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
