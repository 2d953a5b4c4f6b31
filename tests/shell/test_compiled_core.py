"""app/compiled_core.py: the mypyc-compiled admission core is used only where an entry point
installs it, only while it matches its sources, and it decides exactly as the pure-Python
modules do (scripts/compile_core.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest

from app.compiled_core import core_build
from app.core.admission.decision import Admitted, decide, encode_event
from app.core.admission.policy import HostPolicy
from app.devtools.fault_kit import RULES, corpus

REPO = Path(__file__).resolve().parents[2]
COMPILED = (REPO / "app" / "core" / "compiled.json").exists()

_PROBE = (
    "from app.compiled_core import install; build = install(); "
    "import app.core.admission.decision as a; print(build, a.__file__)"
)


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
    for built in (root / "app" / "core").rglob("*.so"):
        built.unlink()
    build, module = _probe(root)
    assert build == "source" and module.endswith("admission/decision.py")


@pytest.mark.skipif(not COMPILED, reason="the core is not compiled here (make compile)")
def test_compiled_modules_are_used_only_while_their_sources_are_unchanged(tmp_path: Path) -> None:
    root = _copy_of_app(tmp_path)
    build, module = _probe(root)
    assert build == "compiled" and module.endswith(".so")
    # A2UI_STREAM_CORE=source forces the sources.
    build, module = _probe(root, A2UI_STREAM_CORE="source")
    assert build == "source" and module.endswith("admission/decision.py")
    # Any edit to any compiled source: ALL of them come from source (they call each other
    # natively, so a mix would run old code).
    fold = root / "app" / "core" / "admission" / "fold.py"
    fold.write_text(fold.read_text() + "\n# edited\n")
    build, module = _probe(root)
    assert build == "source" and module.endswith("admission/decision.py")
    recorded = json.loads((root / "app" / "core" / "compiled.json").read_text())
    assert "admission.fold" in recorded and "admission.decision" in recorded


_DECIDE_ALL = """
import orjson, sys
from app.core.admission.decision import Admitted, decide, encode_event
from app.core.admission.policy import HostPolicy
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
    assert core_build() in ("compiled", "source")


_PLAN_ALL = """
import orjson, sys
from app.compiled_core import install
build = install()
from app.core.runlog.keys import partition_for_run
from app.core.admission.policy import HostPolicy
from app.core.admission.validator import SourceRecord
from app.core.admission.validator_batch import PartitionState, Topics, plan_batch
from app.devtools.fault_kit import RULES, corpus
topics = Topics("log", "dead", "resumes", 3, 1_048_576, changelog="changelog")
batch = {p: [] for p in range(3)}
for rec in corpus(runs=20, per_run=150, seed=5):
    p = partition_for_run(rec.run, 3)
    batch[p].append(SourceRecord("adm", p, len(batch[p]), rec.key, rec.value))
states = {p: {} for p in range(3)}
nxt = {p: 0 for p in range(3)}
out = []
while any(nxt[p] < len(batch[p]) for p in range(3)):
    cut = {p: batch[p][nxt[p]:nxt[p] + 97] for p in range(3)}
    owned = {p: PartitionState(states[p], nxt[p]) for p in range(3)}
    plans = plan_batch(cut, owned, gathered=1, generation=1, policy=HostPolicy(), rules=RULES,
                       now="2026-11-30T00:00:00Z", topics=topics)
    for plan in plans:
        states[plan.partition].update(plan.runs)
        nxt[plan.partition] = plan.next_offset
        out += [[s.topic, s.partition, s.key, s.value, s.headers] for s in plan.sends]
        out.append(list(plan.counts))
shown = orjson.dumps({"build": build, "out": out}, default=lambda b: b.decode("latin-1"))
sys.stdout.write(shown.decode())
"""


def _plan_all(**env: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _PLAN_ALL],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return orjson.loads(done.stdout)


def test_the_compiled_batch_step_plans_as_the_sources_do() -> None:
    """The validator's whole step (``plan_batch``: intake, the admission order, routing, the
    headers) over the same 3,000 mixed records, raw bytes included, cut into batches, in a
    process that installs the compiled core and in one forced to the sources: equal sends
    (topic, partition, key, value bytes, headers) and outcome counts."""
    compiled = _plan_all()
    source = _plan_all(A2UI_STREAM_CORE="source")
    assert source["build"] == "source"
    assert compiled["build"] == ("compiled" if COMPILED else "source")
    assert compiled["out"] == source["out"]
    topics = [row[0] for row in source["out"] if row and isinstance(row[0], str)]
    assert topics.count("log") > 1500 and topics.count("dead") > 300, Counter(topics)


_IMPORT_FIRST = (
    "import app.core.admission.fold; from app.compiled_core import install; build = install(); "
    "import app.core.admission.decision as a; print(build, a.__file__)"
)


@pytest.mark.skipif(not COMPILED, reason="the core is not compiled here (make compile)")
def test_a_plain_import_and_a_late_install_use_the_sources() -> None:
    """Without ``install()`` the compiled modules are never found (they are not beside the
    sources); after a core module was imported, ``install()`` keeps the sources (a compiled
    module would call into a source one)."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import app.core.admission.decision as a; print('none', a.__file__)",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split()[1].endswith("admission/decision.py")
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_FIRST], cwd=REPO, capture_output=True, text=True, check=True
    )
    build, module = done.stdout.split()
    assert build == "source" and module.endswith("admission/decision.py")


_CLI = """
import sys
from app.shell.cli import main
status = main(["check", sys.argv[1]])
import app.core.admission.decision as a
print(status, a.__file__)
"""


@pytest.mark.skipif(not COMPILED, reason="the core is not compiled here (make compile)")
def test_the_command_installs_the_compiled_core() -> None:
    """``a2ui-stream`` (app.shell.cli.main, also ``python -m app.shell.cli``) is an entry
    point: ``check`` decides with the compiled modules."""
    example = REPO / "examples" / "envelope-v2.json"
    done = subprocess.run(
        [sys.executable, "-c", _CLI, str(example)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    status, module = done.stdout.split()[-2:]
    assert module.endswith(".so"), done.stderr
    assert status in ("0", "1")
