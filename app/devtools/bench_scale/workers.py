"""One worker process of the deployment under test (``Worker``) and what the bench reads of it:
its /metrics parsed, its RSS slope, the machine's memory, its data directory's size.
"""

from __future__ import annotations

import contextlib
import signal
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.devtools.bench_output import process_cpu_seconds
from app.shell.errors import OperatorError

__all__ = [
    "Worker",
    "by_partition",
    "decided_count",
    "machine_low_on_memory",
    "meminfo_mb",
    "metric_total",
    "parse_metrics",
    "rss_slope_kb",
    "say",
    "spread_of",
    "tree_mb",
]


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text lines as ``{'name{labels}': value}`` (comments skipped)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                out[name] = float(value)
    return out


def metric_total(metrics: dict[str, float], name: str) -> float:
    return sum(v for k, v in metrics.items() if k == name or k.startswith(name + "{"))


def by_partition(metrics: dict[str, float], name: str) -> dict[int, float]:
    prefix = name + '{partition="'
    return {int(k[len(prefix) : -2]): v for k, v in metrics.items() if k.startswith(prefix)}


def decided_count(metrics: dict[str, float]) -> int:
    names = (
        "a2ui_admitted_total",
        "a2ui_refused_total",
        "a2ui_deduplicated_total",
        "a2ui_redelivered_skipped_total",
    )
    return int(sum(metric_total(metrics, name) for name in names))


def rss_slope_kb(points: list[dict[str, Any]]) -> float | None:
    """RSS growth per envelope (KB), least squares over the curve's points."""
    xs = [float(p["envelopes"]) for p in points]
    if len(set(xs)) < 2:
        return None
    fit = statistics.linear_regression(xs, [float(p["rss_mb"]) * 1024 for p in points])
    return fit.slope


def spread_of(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def meminfo_mb(field: str = "MemAvailable") -> int:
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) // 1024
    raise OperatorError(f"bench scale: /proc/meminfo has no {field} (it needs Linux's /proc)")


def machine_low_on_memory(share: float) -> bool:
    """Less than ``share`` of this machine's memory available (it may be shared)."""
    return meminfo_mb() < share * meminfo_mb("MemTotal")


def tree_mb(root: Path) -> float:
    """Bytes of the files under ``root`` (a worker's data directory), in MB."""
    total = 0
    for path in root.rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file():
                total += path.stat().st_size
    return total / 1024 / 1024


# -- workers --------------------------------------------------------------------------------------


@dataclass(eq=False)
class Worker:
    """One ``a2ui-stream worker`` process of the deployment (restartable on the same port)."""

    name: str
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    decided_offset: int = 0  # this incarnation's decided count at the last rebase
    rss_peak_kb: int = 0
    killed_for: str = ""  # why the bench killed it, if it did so unasked

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.env['A2UI_STREAM_WEB_PORT']}"

    def start(self) -> None:
        with open(self.log_path, "ab") as log_file:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "app.shell.cli", "worker"],
                env=self.env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        self.decided_offset = 0

    def check(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            why = self.killed_for or f"it exited with status {self.proc.returncode}"
            raise OperatorError(
                f"bench scale: worker {self.name} is gone ({why}); its log is {self.log_path}"
            )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 60) -> bool:
        """SIGTERM and wait; SIGKILL after ``timeout`` s. True when it exited by itself."""
        if self.proc is None or self.proc.poll() is not None:
            return True
        self.proc.terminate()
        try:
            self.proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            self.kill()
            return False

    def _proc_file(self, name: str) -> str:
        assert self.proc is not None
        try:
            return Path(f"/proc/{self.proc.pid}/{name}").read_text()
        except OSError:
            return ""

    def rss_kb(self) -> int:
        for line in self._proc_file("status").splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def cpu_seconds(self) -> float:
        assert self.proc is not None
        return process_cpu_seconds(self.proc.pid) or 0.0


def say(message: str) -> None:
    print(f"bench scale: {message}", file=sys.stderr, flush=True)
