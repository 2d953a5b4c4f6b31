"""Reads the wire contract: every ``schemas/<name>.schema.json`` document, keyed by ``<name>``.

Shell (file I/O): imports the standard library and orjson only. The core never reads files; it
receives these documents as arguments (``PayloadRules.from_documents``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

__all__ = ["SCHEMA_DIR", "load_schema_documents"]

# schemas/ is a top-level data directory beside app/ (STYLE: "the wire is owned by data files").
SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas"
_SUFFIX = ".schema.json"


def load_schema_documents(directory: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every ``*.schema.json`` under ``directory`` (default: the repository's ``schemas/``),
    keyed by file stem, e.g. ``"ai-envelope"``."""
    folder = SCHEMA_DIR if directory is None else directory
    if not folder.is_dir():
        raise FileNotFoundError(
            f"schema directory {folder} not found: run from a checkout of a2ui-stream "
            "(pip install -e .) so schemas/ sits beside app/, or pass the directory explicitly"
        )
    documents: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*" + _SUFFIX)):
        document = orjson.loads(path.read_bytes())
        if not isinstance(document, dict):
            raise ValueError(f"{path} is not a JSON Schema object")
        documents[path.name[: -len(_SUFFIX)]] = document
    if not documents:
        raise FileNotFoundError(f"no *{_SUFFIX} files in {folder}")
    return documents
