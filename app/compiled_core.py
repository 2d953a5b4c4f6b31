"""Loads the mypyc-compiled modules of ``app/core`` only while they match their sources.

``scripts/compile_core.py`` (run by ``make install``) builds the admission hot path of
``app/core`` with mypyc into extension modules beside the sources and records the sha256 of
each source in ``app/core/compiled.json``. Python would import an extension module in
preference to its ``.py`` even after the source was edited, so this finder, installed when
``app`` is imported, decides once per process:

- every recorded source unchanged, every extension present: the compiled modules are used
  (and mypyc's shared runtime library is found in ``app/core``);
- anything else (an edit, a missing file, ``A2UI_STREAM_CORE=source``): ALL of them are loaded
  from source. Compiled modules call each other natively, so it is all or nothing.

``CORE_BUILD`` says which ("compiled" or "source"); ``a2ui-stream bench admission`` prints it.
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

__all__ = ["CORE_BUILD", "install"]

_CORE = Path(__file__).resolve().parent / "core"
_STAMP = _CORE / "compiled.json"


class _CoreFinder:
    """Resolves mypyc's runtime library (``compiled``) or the compiled module names to their
    sources (``source``); every other import is left to the normal finders."""

    def __init__(self, runtime: dict[str, Path], sources: dict[str, Path]) -> None:
        self.runtime = runtime
        self.sources = sources

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        found = self.runtime.get(name) or self.sources.get(name)
        return None if found is None else spec_from_file_location(name, found)


def _extension(module: str) -> Path | None:
    for suffix in EXTENSION_SUFFIXES:
        candidate = _CORE / f"{module}{suffix}"
        if candidate.exists():
            return candidate
    return None


def _unchanged(recorded: dict[str, str]) -> bool:
    for module, sha in recorded.items():
        source = _CORE / f"{module}.py"
        if _extension(module) is None or not source.exists():
            return False
        if hashlib.sha256(source.read_bytes()).hexdigest() != sha:
            return False
    return True


def install() -> str:
    """Install the finder for this process; returns "compiled" or "source"."""
    extensions = [p for p in _CORE.iterdir() if p.suffix == ".so"] if _CORE.is_dir() else []
    if not extensions:
        return "source"
    try:
        recorded: dict[str, str] = json.loads(_STAMP.read_text())
    except (OSError, ValueError):
        recorded = {}
    compiled_names = {p.name.split(".")[0] for p in extensions if "__mypyc" not in p.name}
    wanted = os.environ.get("A2UI_STREAM_CORE", "") != "source"
    if wanted and recorded and set(recorded) == compiled_names and _unchanged(recorded):
        runtime = {p.name.split(".")[0]: p for p in extensions if "__mypyc" in p.name}
        sys.meta_path.insert(0, _CoreFinder(runtime, {}))
        return "compiled"
    sources = {
        f"app.core.{name}": _CORE / f"{name}.py"
        for name in compiled_names
        if (_CORE / f"{name}.py").exists()
    }
    sys.meta_path.insert(0, _CoreFinder({}, sources))
    return "source"


CORE_BUILD = install()
