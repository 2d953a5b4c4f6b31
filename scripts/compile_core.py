"""Compile the admission hot path of ``app/core`` with mypyc (docs/admission.md, "Speed").

    python scripts/compile_core.py           # build the extensions in place (make install does)
    python scripts/compile_core.py --remove  # delete them: the pure-Python modules are used

The modules stay plain Python: the compiled ones are the same sources, built by mypyc (part of
mypy, in the dev extra) with the C compiler into ``app/core/mypyc-build/*.so`` (not beside
them: a plain import always finds the source), plus ``app/core/compiled.json`` recording the
sha256 of each source it was built from. An entry point that calls
``app.compiled_core.install()`` loads the compiled modules only while every recorded hash still
matches its source; after any edit it loads all of them from source until this script runs
again.
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
# admission order, the batch plan). payload_rules is mostly jsonschema_rs already.
MODULES = (
    "admission.decision",
    "admission.children",
    "admission.cross_field",
    "admission.fold",
    "admission.intake",
    "admission.limits",
    "runlog.pmap",
    "common.pointer",
    "admission.policy",
    "admission.redaction",
    "admission.refusal",
    "admission.rules",
    "runlog.run_state",
    "admission.validator",
    "admission.validator_batch",
)
STAMP = CORE / "compiled.json"


def built_files() -> list[Path]:
    # (and the builds of before mypyc-build/: beside the sources, a plain import would load them)
    found = [p for p in CORE.glob("*.so") if p.name.split(".")[0] in MODULES]
    found += list(CORE.glob("*__mypyc*.so")) + list(ROOT.glob("*__mypyc*.so"))
    return found + (list(BUILD.glob("*.so")) if BUILD.is_dir() else [])


def remove() -> None:
    for path in built_files():
        path.unlink()
    STAMP.unlink(missing_ok=True)


def digest(module: str) -> str:
    return hashlib.sha256((CORE / f"{module}.py").read_bytes()).hexdigest()


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
    sources = [str(Path("app") / "core" / f"{m}.py") for m in MODULES]
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
            for built in (tree / "app" / "core").glob("*.so"):
                shutil.copy2(built, BUILD / built.name)
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
