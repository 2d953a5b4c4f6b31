"""What every ``a2ui-stream bench NAME`` shares: the baseline check and the output contract
(a table for people, or with ``--json`` one JSON object of all figures for machines).

Shell module.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Sequence
from typing import Any

import orjson

__all__ = ["baseline_missing", "emit"]


def baseline_missing(bench: str, modules: Sequence[str], what: str) -> bool:
    """True (after saying what to install) when a baseline package is not installed."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        print(
            f"a2ui-stream bench {bench}: the baseline needs {what} "
            f"({', '.join(missing)} not installed); install the test extra: "
            "pip install -e '.[test]'",
            file=sys.stderr,
        )
    return bool(missing)


def emit(result: dict[str, Any], as_json: bool, table: Callable[[dict[str, Any]], str]) -> int:
    if as_json:
        sys.stdout.buffer.write(orjson.dumps(result) + b"\n")
        sys.stdout.flush()
    else:
        print(table(result))
    return 0
