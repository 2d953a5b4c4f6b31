"""app/compiled_core.py: the mypyc-compiled admission core is used only while it matches its
sources, and it decides exactly as the pure-Python modules do (scripts/compile_core.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

import app
from app.core.admission import Admitted, decide, encode_event
from app.core.policy import HostPolicy
from app.devtools.fault_kit import RULES, corpus

REPO = Path(__file__).resolve().parents[2]
COMPILED = (REPO / "app" / "core" / "compiled.json").exists()

_PROBE = "import app, app.core.admission as a; print(app.CORE_BUILD, a.__file__)"


def _probe(root: Path, **env: str) -> tuple[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root), **env},
        capture_output=True,
        text=True,
        check=True,
    )
    build, module = done.stdout.split()
    return build, module


def _copy_of_app(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "app", tmp_path / "app", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_without_compiled_modules_the_core_is_the_sources(tmp_path: Path) -> None:
    root = _copy_of_app(tmp_path)
    for built in (root / "app" / "core").glob("*.so"):
        built.unlink()
    build, module = _probe(root)
    assert build == "source" and module.endswith("admission.py")


@pytest.mark.skipif(not COMPILED, reason="the core is not compiled here (make compile)")
def test_compiled_modules_are_used_only_while_their_sources_are_unchanged(tmp_path: Path) -> None:
    root = _copy_of_app(tmp_path)
    build, module = _probe(root)
    assert build == "compiled" and module.endswith(".so")
    # A2UI_STREAM_CORE=source forces the sources.
    build, module = _probe(root, A2UI_STREAM_CORE="source")
    assert build == "source" and module.endswith("admission.py")
    # Any edit to any compiled source: ALL of them come from source (they call each other
    # natively, so a mix would run old code).
    fold = root / "app" / "core" / "fold.py"
    fold.write_text(fold.read_text() + "\n# edited\n")
    build, module = _probe(root)
    assert build == "source" and module.endswith("admission.py")
    recorded = json.loads((root / "app" / "core" / "compiled.json").read_text())
    assert "fold" in recorded and "admission" in recorded


_DECIDE_ALL = """
import orjson, sys
from app.core.admission import Admitted, decide, encode_event
from app.core.policy import HostPolicy
from app.devtools.fault_kit import RULES, corpus
states, out = {}, []
for rec in corpus(runs=20, per_run=150, seed=5):
    try:
        record = orjson.loads(rec.value)
    except orjson.JSONDecodeError:
        continue
    outcome = decide(record, states.get(rec.run), HostPolicy(), RULES, now="2026-11-30T00:00:00Z")
    if isinstance(outcome, Admitted):
        states[rec.run] = outcome.state
        out.append(encode_event(outcome).decode())
    else:
        out.append(repr(outcome))
sys.stdout.write(orjson.dumps(out).decode())
"""


def test_the_compiled_core_decides_as_the_sources_do() -> None:
    """The same 3,000 mixed records decided in this process (compiled when built) and in a
    process forced to the sources: byte-equal events, equal refusals."""
    states: dict = {}
    here: list[str] = []
    for rec in corpus(runs=20, per_run=150, seed=5):
        try:
            record = orjson.loads(rec.value)
        except orjson.JSONDecodeError:
            continue
        now = "2026-11-30T00:00:00Z"
        outcome = decide(record, states.get(rec.run), HostPolicy(), RULES, now=now)
        if isinstance(outcome, Admitted):
            states[rec.run] = outcome.state
            encoded = encode_event(outcome)
            assert isinstance(encoded, bytes)
            here.append(encoded.decode())
        else:
            here.append(repr(outcome))
    done = subprocess.run(
        [sys.executable, "-c", _DECIDE_ALL],
        cwd=REPO,
        env={**os.environ, "A2UI_STREAM_CORE": "source"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert orjson.loads(done.stdout) == here
    assert len(here) > 2000
    assert app.CORE_BUILD in ("compiled", "source")
