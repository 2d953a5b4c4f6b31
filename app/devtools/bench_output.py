"""What every ``a2ui-stream bench NAME`` shares: the baseline check, the output contract (a
table for people, or with ``--json`` one JSON object of all figures for machines), and the
cleanup of the topics a bench made.

Shell module.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
from aiokafka.admin import AIOKafkaAdminClient

__all__ = [
    "baseline_missing",
    "delete_topics",
    "emit",
    "load_average",
    "load_text",
    "pct",
    "process_cpu_seconds",
]


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


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages (``/proc/loadavg``; ``os.getloadavg`` where
    there is no /proc). Printed beside a bench's figures: on a shared machine a figure means
    little without the load it was measured under."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return [round(x, 2) for x in os.getloadavg()]


def process_cpu_seconds(pid: int) -> float | None:
    """The CPU seconds (user + system) process ``pid`` has used so far; None once it is gone.

    To the nanosecond where Linux keeps per-thread run times (the sum of
    ``/proc/PID/task/*/schedstat``), otherwise ``/proc/PID/stat``'s utime + stime in clock
    ticks (10 ms each: a short pass of a fast process could use less than one, and read as
    0; CI's bench pipeline pass-through did). Threads that have exited no longer count in the
    first: our processes' threads (asyncio's executor) live as long as the process."""
    task = Path(f"/proc/{pid}/task")
    try:
        return sum(int((t / "schedstat").read_text().split()[0]) for t in task.iterdir()) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_text(load: dict[str, list[float]]) -> str:
    """``{"start": [...], "end": [...]}`` as one line for a table."""
    return "load average (1, 5, 15 min) at start {} / at end {}".format(
        *(" ".join(f"{x:.2f}" for x in load[k]) for k in ("start", "end"))
    )


def code_version() -> str:
    """The commit the workers run (with ``-dirty`` when the tree has changes), or unknown."""
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=10"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank, no interpolation); values not empty."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def delete_topics(bootstrap: str, prefixes: tuple[str, ...]) -> None:
    """Delete a bench run's topics, those named with one of ``prefixes`` (its unique topic
    prefix or app id), nothing else: a 1M-envelope run leaves gigabytes on the broker
    otherwise, and a broker left with thousands of topics slows every later run on it."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        await admin.start()
        names = [t for t in await admin.list_topics() if t.startswith(prefixes)]
        if names:
            await admin.delete_topics(names)
    except Exception as exc:  # the figures stand; the topics just stay
        print(
            f"bench: could not delete the run's topics ({type(exc).__name__}); "
            f"prefix {prefixes[0]}",
            file=sys.stderr,
        )
    finally:
        with contextlib.suppress(Exception):
            await admin.close()
