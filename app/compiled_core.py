"""Loads the mypyc-compiled modules of ``app/core`` only while they match their sources, for
the processes whose entry point asks for them.

``scripts/compile_core.py`` (run by ``make install``) builds the admission hot path of
``app/core`` with mypyc into extension modules in ``app/core/mypyc-build/`` (one folder per
room, as the sources are) and records the sha256 of each source in ``app/core/compiled.json``.
They are not beside the sources, so a plain ``import app.core.admission.decision`` always loads
the source and does no I/O of its own (tests/core/test_purity.py). An entry point (the
``a2ui-stream`` command, the test suite's conftest, the measuring scripts) calls ``install()``
first, before anything imports the core, and it decides once per process:

- every recorded source unchanged, every extension present: a finder on ``sys.meta_path``
  loads the compiled modules (and mypyc's shared runtime library, which is in the same
  directory);
- anything else (an edit, a missing file, ``A2UI_STREAM_CORE=source``, a compiled module
  already imported from source): nothing is installed and ALL of them are the sources.
  Compiled modules call each other natively, so it is all or nothing.

``install()`` returns which ("compiled" or "source"), as ``core_build()`` does afterwards;
``a2ui-stream bench admission`` prints it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec
from importlib.util import spec_from_file_location
from pathlib import Path
from types import ModuleType

__all__ = ["BUILD_DIR", "core_build", "install"]

_CORE = Path(__file__).resolve().parent / "core"
BUILD_DIR = _CORE / "mypyc-build"  # not a package name: never found by a plain import
_STAMP = _CORE / "compiled.json"


class _CoreFinder:
    """Resolves the compiled modules of ``app.core`` and mypyc's runtime library to their
    extension modules; every other import is left to the normal finders."""

    def __init__(self, modules: dict[str, Path]) -> None:
        self.modules = modules

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        found = self.modules.get(name)
        return None if found is None else spec_from_file_location(name, found)


def _extension(module: str) -> Path | None:
    """The extension of a module named under app.core (``admission.fold``), if built."""
    *room, name = module.split(".")
    for suffix in EXTENSION_SUFFIXES:
        candidate = BUILD_DIR.joinpath(*room, f"{name}{suffix}")
        if candidate.exists():
            return candidate
    return None


def _name(extension: Path) -> str:
    """The module name under app.core of a built extension (``admission/fold.*.so``)."""
    relative = extension.relative_to(BUILD_DIR)
    return ".".join([*relative.parent.parts, relative.name.split(".")[0]])


def _unchanged(recorded: dict[str, str]) -> bool:
    for module, sha in recorded.items():
        source = _CORE.joinpath(*module.split(".")).with_suffix(".py")
        if _extension(module) is None or not source.exists():
            return False
        if hashlib.sha256(source.read_bytes()).hexdigest() != sha:
            return False
    return True


_installed: list[str] = []  # this process's decision, once made


def core_build() -> str:
    """Which core this process uses: "compiled" once ``install()`` installed the compiled
    modules, else "source"."""
    return _installed[0] if _installed else "source"


def install() -> str:
    """Use the compiled core in this process if it matches its sources; returns "compiled" or
    "source". Call it before anything imports ``app.core``; later calls return the first
    answer."""
    if not _installed:
        _installed.append(_decide())
    return _installed[0]


def _decide() -> str:
    if os.environ.get("A2UI_STREAM_CORE", "") == "source" or not BUILD_DIR.is_dir():
        return "source"
    extensions = [p for p in BUILD_DIR.rglob("*.so")]
    try:
        recorded: dict[str, str] = json.loads(_STAMP.read_text())
    except (OSError, ValueError):
        return "source"
    compiled_names = {_name(p) for p in extensions if "__mypyc" not in p.name}
    if not recorded or set(recorded) != compiled_names or not _unchanged(recorded):
        return "source"
    if any(f"app.core.{name}" in sys.modules for name in recorded):
        return "source"  # too late: a compiled module would call into a source one
    modules: dict[str, Path] = {}
    for path in extensions:  # the runtime library keeps its top-level name
        name = _name(path)
        modules[name if "__mypyc" in name else f"app.core.{name}"] = path
    sys.meta_path.insert(0, _CoreFinder(modules))
    return "compiled"
