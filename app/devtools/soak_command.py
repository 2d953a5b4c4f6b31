"""``a2ui-stream soak [--minutes N] [--size N] [--scenarios a,b] [--json]``: the fault
scenarios (``app.devtools.fault_scenarios``, docs/reliability.md) run repeatedly against a real
broker for a set time, bigger than in CI, with the same accounting, and then the profile
fuzzing at soak size.

Shell module. It starts the broker the harness picks (docs/broker.md; ``A2UI_STREAM_BROKER``
forces one), runs passes over the chosen scenarios until the time is up (at least one whole
pass; a scenario is not started after the deadline), and prints one row per scenario with the
totals (or, with ``--json``, one JSON object with every run's report). It stops at the first
scenario that fails and keeps its worker logs. Exit status: 0 all clean, 1 anything lost,
duplicated, mis-ordered, decided wrongly, diverged or crashed (or the fuzzing failed), 2 usage.

The fuzzing hook: when ``tests/core/test_fuzz_profile.py`` is present (a source checkout),
soak runs it with pytest and ``A2UI_STREAM_FUZZ_EXAMPLES=--fuzz-examples`` (default 100,000;
0 skips it) and reports its status and duration.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from app.devtools.bench_output import emit
from app.devtools.fault_scenarios import SCENARIOS, Report
from app.shell.cli.broker import REPO_ROOT, start_broker

__all__ = ["add_parser", "run_fuzz"]

FUZZ_TEST = REPO_ROOT / "tests" / "core" / "test_fuzz_profile.py"
COUNTS = (
    "published",
    "admitted",
    "refused",
    "deduplicated",
    "lost",
    "pending",
    "duplicated",
    "twice",
    "misordered",
    "wrong",
    "crashes",
    "subscribers",
    "diverged",
)


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "soak",
        help="run the fault scenarios repeatedly against a real broker and print the accounting",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument(
        "--minutes", type=float, default=10.0, help="how long to keep running (default 10)"
    )
    parser.add_argument(
        "--size",
        type=int,
        default=20000,
        help="admission records per scenario run (default 20000)",
    )
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"comma-separated, from: {', '.join(SCENARIOS)} (default all)",
    )
    parser.add_argument("--seed", type=int, default=1, help="first seed (one more per pass)")
    parser.add_argument(
        "--fuzz-examples",
        type=int,
        default=100_000,
        help="profile fuzzing cases per fuzz test after the scenarios (default 100000, about "
        "20 min on 2 cores; 0 skips)",
    )
    parser.add_argument(
        "--keep-logs", action="store_true", help="keep the worker logs even when all is clean"
    )
    parser.add_argument(
        "--keep-going",
        action="store_true",
        help="run on after a failing scenario (default: stop at the first, keeping its logs)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=_run)


def _quiet_clients() -> None:
    """The Kafka clients log every failed reconnect while a scenario has the broker down
    (thousands of lines); the accounting, not their logs, is what a soak reports."""
    for name in ("aiokafka", "kafka"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _run(args: argparse.Namespace) -> int:
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown or not names or args.size < 200 or args.minutes < 0:
        print(
            f"a2ui-stream soak: scenarios must be from {', '.join(SCENARIOS)} "
            f"(unknown: {', '.join(unknown) or '-'}); --size >= 200; --minutes >= 0",
            file=sys.stderr,
        )
        return 2
    _quiet_clients()
    result = asyncio.run(
        soak(names, args.minutes, args.size, args.seed, args.keep_logs, args.keep_going)
    )
    result["fuzz"] = run_fuzz(args.fuzz_examples)
    result["ok"] = result["ok"] and result["fuzz"]["status"] in ("passed", "absent", "skipped")
    emit(result, args.json, _table)
    return 0 if result["ok"] else 1


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def soak(
    names: list[str],
    minutes: float,
    size: int,
    seed: int,
    keep_logs: bool = False,
    keep_going: bool = False,
) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="a2ui-soak-"))
    # With --keep-logs a local Apache Kafka keeps its log directory beside the worker logs, so
    # a failure can be read back from the topics (kafka.tools.DumpLogSegments).
    broker = start_broker(log=_say, data_dir=tmp / "broker" if keep_logs else None)
    _say(f"soak: {broker.summary()}")
    reports: list[Report] = []
    deadline = time.monotonic() + minutes * 60
    started = time.monotonic()
    failed: Report | None = None
    try:
        passes = 0
        while (failed is None or keep_going) and (passes == 0 or time.monotonic() < deadline):
            for name in names:
                if passes and time.monotonic() >= deadline:
                    break
                report = await SCENARIOS[name].run(broker, size, tmp, seed + passes)
                reports.append(report)
                _say(str(report))
                if not report.ok:
                    failed = failed or report
                    if not keep_going:
                        break
            passes += 1
    finally:
        broker.stop()
        keep = keep_logs or failed is not None
        if keep:
            _say(f"soak: worker logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return {
        "command": "soak",
        "ok": failed is None,
        "broker": broker.description,
        "machine": f"{platform.machine()} {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "size": size,
        "chosen": names,
        "minutes": round((time.monotonic() - started) / 60, 1),
        "passes": passes,
        "scenarios": _aggregate(reports),
        "totals": _totals(reports),
        "runs": [r.as_dict() for r in reports],
        "logs": str(tmp) if keep else None,
    }


def _aggregate(reports: list[Report]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for report in reports:
        row = out.setdefault(
            report.scenario,
            {
                "runs": 0,
                "failed": 0,
                "skipped": None,
                "faults": Counter(),
                **dict.fromkeys(COUNTS, 0),
            },
        )
        if report.skipped is not None:
            row["skipped"] = report.skipped
            continue
        row["runs"] += 1
        row["failed"] += not report.ok
        row["faults"].update(report.faults)
        data = report.as_dict()
        for name in COUNTS:
            row[name] += data[name]
    for row in out.values():
        row["faults"] = dict(row["faults"])
    return out


def _totals(reports: list[Report]) -> dict[str, Any]:
    ran = [r for r in reports if r.skipped is None]
    totals: dict[str, Any] = {name: sum(r.as_dict()[name] for r in ran) for name in COUNTS}
    totals["scenario_runs"] = len(ran)
    totals["failed_runs"] = sum(not r.ok for r in ran)
    totals["faults_injected"] = sum(sum(r.faults.values()) for r in ran)
    return totals


def run_fuzz(examples: int) -> dict[str, Any]:
    """Run the profile fuzzing (issue 8 part 3) with ``examples`` cases per test, if this is a
    source checkout that has it; never raises."""
    if examples <= 0:
        return {"status": "skipped", "examples": 0}
    if not FUZZ_TEST.exists():
        return {"status": "absent", "examples": examples, "test": str(FUZZ_TEST)}
    if importlib.util.find_spec("pytest") is None or importlib.util.find_spec("hypothesis") is None:
        return {"status": "absent", "examples": examples, "why": "pytest/hypothesis missing"}
    _say(f"soak: fuzzing the profile, {examples:,} cases per test ({FUZZ_TEST.name})")
    started = time.monotonic()
    done = subprocess.run(
        # --timeout=0: pytest-timeout's 600 s per test (pyproject) would cut a 100k-case test
        # short (measured: about 10 to 15 minutes here) and report it as a failure
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--timeout=0",
            str(FUZZ_TEST),
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "A2UI_STREAM_FUZZ_EXAMPLES": str(examples)},
        capture_output=True,
        text=True,
        check=False,
    )
    output = (done.stdout + done.stderr).strip()
    tail = output.splitlines()
    result: dict[str, Any] = {
        "status": "passed" if done.returncode == 0 else "failed",
        "examples": examples,
        "seconds": round(time.monotonic() - started, 1),
        "summary": tail[-1] if tail else "",
    }
    if done.returncode != 0:
        # A failure found after many minutes must not be lost with the process: keep pytest's
        # whole output (hypothesis prints the falsifying example there) and name the tests.
        kept = Path(tempfile.mkdtemp(prefix="a2ui-soak-fuzz-")) / "fuzz.log"
        kept.write_text(output + "\n")
        result["output"] = str(kept)
        result["failed_tests"] = [line.split()[1] for line in tail if line.startswith("FAILED ")]
        _say(f"soak: fuzzing failed; pytest's output kept in {kept}")
    return result


def _table(result: dict[str, Any]) -> str:
    runs, chosen = result["totals"]["scenario_runs"], len(result["chosen"])
    passes = f"{runs // chosen} whole pass(es)" + (
        f" and {runs % chosen} scenario(s) of another" if runs % chosen else ""
    )
    head = (
        f"soak: {runs} scenario runs ({passes}) in {result['minutes']} min, "
        f"{result['size']:,} records per scenario run, {result['broker']}, {result['machine']}"
    )
    rows, skipped = _rows(result)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [head]
    for r in rows:
        cells = [f"{r[0]:<{widths[0]}}"] + [
            f"{c:>{w}}" for c, w in zip(r[1:], widths[1:], strict=True)
        ]
        lines.append("  " + "  ".join(cells))
    lines += skipped
    faults = Counter[str]()
    for row in result["scenarios"].values():
        faults.update(row["faults"])
    lines.append("  faults injected: " + ", ".join(f"{k} x{v}" for k, v in faults.items()))
    lines += _fuzz_lines(result["fuzz"])
    verdict = "OK: nothing lost, duplicated, mis-ordered or diverged; no crash"
    lines.append("  " + (verdict if result["ok"] else "FAILED (see the problems above)"))
    if result.get("logs"):
        lines.append(f"  worker logs: {result['logs']}")
    return "\n".join(lines)


def _rows(result: dict[str, Any]) -> tuple[list[tuple[str, ...]], list[str]]:
    """The table's rows (a header, one per scenario, the total) and the skipped scenarios."""
    columns = ("runs", "failed", "faults", *COUNTS)
    rows: list[tuple[str, ...]] = [("scenario", *columns)]
    skipped: list[str] = []
    for name, row in result["scenarios"].items():
        if row["skipped"] is not None and not row["runs"]:
            skipped.append(f"  {name}: skipped ({row['skipped']})")
            continue
        counts = tuple(f"{row[c]:,}" for c in COUNTS)
        injected = str(sum(row["faults"].values()))
        rows.append((name, str(row["runs"]), str(row["failed"]), injected, *counts))
    totals = result["totals"]
    counts = tuple(f"{totals[c]:,}" for c in COUNTS)
    rows.append(
        (
            "total",
            str(totals["scenario_runs"]),
            str(totals["failed_runs"]),
            str(totals["faults_injected"]),
            *counts,
        )
    )
    return rows, skipped


def _fuzz_lines(fuzz: dict[str, Any]) -> list[str]:
    """The fuzzing's line, and where its output is when it failed."""
    lines = [
        f"  fuzzing: {fuzz['status']} ({fuzz.get('examples', 0):,} cases per test"
        + (f", {fuzz['seconds']}s: {fuzz['summary']}" if "seconds" in fuzz else "")
        + ")"
    ]
    if fuzz.get("output"):
        failed = ", ".join(fuzz.get("failed_tests", ())) or "see the output"
        lines.append(f"  fuzzing failed: {failed}; pytest's output: {fuzz['output']}")
    return lines
