"""Compile the admission hot path of ``app/core`` with mypyc (docs/admission.md, "Speed").

    python scripts/compile_core.py           # build the extensions in place (make install does)
    python scripts/compile_core.py --remove  # delete them: the pure-Python modules are used

The modules stay plain Python: the compiled ones are the same sources, built by mypyc (part of
mypy, in the dev extra) with the C compiler into ``app/core/mypyc-build/<room>/*.so`` (not beside
them: a plain import always finds the source), plus ``app/core/compiled.json`` recording the
sha256 of each source it was built from, by module name under ``app.core`` (``admission.fold``).
An entry point that calls ``app.compiled_core.install()`` loads the compiled modules only while
every recorded hash still matches its source; after any edit it loads all of them from source
until this script runs again.
Without mypyc or a C compiler it says so and leaves the pure-Python core in place (exit 0).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "app" / "core"
BUILD = CORE / "mypyc-build"  # app.compiled_core.BUILD_DIR
# The decision's hot path (bench admission) and the validator's step around it (intake, the
# admission order, the batch plan). payload_rules is mostly jsonschema_rs already. Each name is
# the module's under app.core (its room and module: app/core/admission/fold.py is admission.fold).
MODULES = (
    "admission.decision",
    "admission.decision_outcomes",
    "admission.decision_steps",
    "admission.children",
    "admission.cross_field",
    "admission.fold",
    "admission.intake",
    "admission.limits",
    "admission.limits_envelope",
    "runlog.pmap",
    "common.pointer",
    "admission.policy",
    "admission.redaction",
    "admission.refusal",
    "admission.rules",
    "runlog.run_state",
    "admission.validator",
    "admission.validator_outputs",
    "admission.validator_steps",
    "admission.validator_batch",
    "admission.validator_changelog",
    "admission.validator_forks",
)
STAMP = CORE / "compiled.json"


def source(module: str) -> Path:
    """The source of a module named under app.core (``admission.fold``)."""
    return CORE.joinpath(*module.split(".")).with_suffix(".py")


def built_files() -> list[Path]:
    # (and the builds of before mypyc-build/: beside the sources, a plain import would load them)
    found = [p for p in CORE.rglob("*.so") if BUILD not in p.parents]
    found += list(ROOT.glob("*__mypyc*.so"))
    return found + (list(BUILD.rglob("*.so")) if BUILD.is_dir() else [])


def remove() -> None:
    for path in built_files():
        path.unlink()
    if BUILD.is_dir():
        shutil.rmtree(BUILD)
    STAMP.unlink(missing_ok=True)


def digest(module: str) -> str:
    return hashlib.sha256(source(module).read_bytes()).hexdigest()


def compile_core() -> int:
    try:
        import mypyc  # noqa: F401
    except ImportError:
        print("compile_core: mypyc is not installed (pip install mypy): pure-Python core")
        remove()
        return 0
    if shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None:
        print("compile_core: no C compiler found: pure-Python core")
        remove()
        return 0
    remove()
    sources = [str(source(m).relative_to(ROOT)) for m in MODULES]
    with tempfile.TemporaryDirectory(prefix="a2ui-mypyc-") as build:
        # Build in a copy of the package: mypyc writes C sources and a build/ tree where it
        # runs, and setuptools there must not read this project's pyproject.toml.
        tree = Path(build) / "tree"
        shutil.copytree(
            ROOT / "app",
            tree / "app",
            ignore=shutil.ignore_patterns("*.so", "__pycache__", "viewer_dist"),
        )
        setup = tree / "setup_core.py"
        setup.write_text(
            "from setuptools import setup\n"
            "from mypyc.build import mypycify\n"
            f"setup(name='a2ui-stream-core', ext_modules=mypycify({sources!r}, opt_level='3'))\n"
        )
        command = [sys.executable, str(setup), "build_ext", "--inplace"]
        print(f"compile_core: mypyc {' '.join(MODULES)} (about a minute)", flush=True)
        done = subprocess.run(command, cwd=tree, capture_output=True, text=True)
        if done.returncode == 0:
            BUILD.mkdir(exist_ok=True)
            built_core = tree / "app" / "core"
            for built in built_core.rglob("*.so"):  # app/core/<room>/<module>.*.so
                (BUILD / built.relative_to(built_core)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(built, BUILD / built.relative_to(built_core))
            # mypyc's shared runtime library lands at the root of the tree: keep it beside the
            # modules, where app/compiled_core.py finds it (the root is not on sys.path)
            for lib in tree.glob("*__mypyc*.so"):
                shutil.copy2(lib, BUILD / lib.name)
    if done.returncode != 0:
        print(done.stdout[-4000:] + done.stderr[-4000:], file=sys.stderr)
        print("compile_core: mypyc failed (above): pure-Python core", file=sys.stderr)
        remove()
        return 0
    STAMP.write_text(json.dumps({m: digest(m) for m in MODULES}, indent=1) + "\n")
    print(f"compile_core: compiled {len(MODULES)} modules of app/core")
    return 0


def main(argv: list[str]) -> int:
    if argv[1:] == ["--remove"]:
        remove()
        print("compile_core: removed the compiled modules: pure-Python core")
        return 0
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    return compile_core()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
