"""A CPU-time sampler for a Python process: where its CPU goes, not where it waits.

Devtool (never imported by the product). py-spy and friends sample wall-clock time; on a
shared 2-core machine a busy process's stacks then count the time it waited for a core. This
samples on ``ITIMER_PROF``, which fires every ``interval`` of CPU time the process used (all
its threads), and records the main thread's Python stack at that moment. Time in C code
(orjson, the compiled core, aiokafka's record parser) is charged to the Python frame that
called it, which is the granularity a decision needs here.

Run a command under it (argv as for ``python``)::

    python -m app.devtools.cpu_profile OUT.folded -- -m app.shell.cli worker

At exit it writes ``OUT.folded`` (one ``frame;frame;... count`` line per stack, the format
flame graph tools read) and ``OUT.txt`` (the top functions by self and by inclusive samples,
and the CPU time spent in CPython's cyclic garbage collector by generation, timed with
``gc.callbacks``: a sample cannot see the collector, whose time is charged to whatever Python
frame allocated the object that triggered it).
``a2ui-stream bench pipeline`` runs its workers under it when ``A2UI_STREAM_PROFILE_DIR`` is
set (docs/benchmarks.md).
"""

from __future__ import annotations

import atexit
import gc
import runpy
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from types import FrameType

__all__ = ["Sampler", "gc_summary", "main", "summarize"]

INTERVAL_S = 0.005


class Sampler:
    """Counts the main thread's stacks every ``interval`` seconds of process CPU time."""

    def __init__(self, interval: float = INTERVAL_S) -> None:
        self.interval = interval
        self.stacks: Counter[str] = Counter()
        self.samples = 0
        self.gc_seconds = [0.0, 0.0, 0.0]  # process CPU inside the collector, by generation
        self.gc_collections = [0, 0, 0]
        self._gc_started = 0.0

    def start(self) -> None:
        signal.signal(signal.SIGPROF, self._on_sample)
        signal.setitimer(signal.ITIMER_PROF, self.interval, self.interval)
        gc.callbacks.append(self._on_gc)

    def stop(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, signal.SIG_IGN)
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.process_time()
            return
        generation = info["generation"]
        self.gc_seconds[generation] += time.process_time() - self._gc_started
        self.gc_collections[generation] += 1

    def _on_sample(self, signum: int, frame: FrameType | None) -> None:
        names: list[str] = []
        while frame is not None:
            code = frame.f_code
            module = frame.f_globals.get("__name__", "?")
            names.append(f"{module}:{code.co_name}")
            frame = frame.f_back
        names.reverse()
        self.stacks[";".join(names)] += 1
        self.samples += 1

    def write(self, out: Path) -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        lines = [f"{stack} {count}" for stack, count in self.stacks.most_common()]
        out.write_text("\n".join(lines) + "\n", encoding="utf-8")
        summary = summarize(self.stacks, self.interval)
        summary += "\n" + gc_summary(self.gc_seconds, self.gc_collections)
        out.with_suffix(".txt").write_text(summary, encoding="utf-8")


def gc_summary(seconds: list[float], collections: list[int]) -> str:
    """The collector's share: CPU seconds and collections per generation, and in all."""
    lines = ["garbage collector (CPU seconds, collections):"]
    for generation, (spent, count) in enumerate(zip(seconds, collections, strict=True)):
        lines.append(f"  gen{generation} {spent:8.3f} s {count:7d}")
    lines.append(f"  all  {sum(seconds):8.3f} s {sum(collections):7d}")
    return "\n".join(lines) + "\n"


def summarize(stacks: Counter[str], interval: float, top: int = 40) -> str:
    """The ``top`` functions by self samples and by inclusive samples (a function counted
    once per stack however often it recurs)."""
    total = sum(stacks.values())
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for stack, count in stacks.items():
        frames = stack.split(";")
        own[frames[-1]] += count
        for name in set(frames):
            inclusive[name] += count

    def rows(counts: Counter[str]) -> list[str]:
        return [
            f"  {n:7d} {100 * n / max(total, 1):5.1f}%  {name}"
            for name, n in counts.most_common(top)
        ]

    lines = [f"{total} samples of {interval * 1000:g} ms CPU ({total * interval:.1f} s)", ""]
    lines += ["self:", *rows(own), "", "inclusive:", *rows(inclusive)]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(
            "usage: python -m app.devtools.cpu_profile OUT.folded -- (-m MODULE | SCRIPT) [ARGS]",
            file=sys.stderr,
        )
        return 2
    out, command = Path(argv[0]), argv[2:]
    sampler = Sampler()

    def finish() -> None:
        sampler.stop()
        sampler.write(out)

    atexit.register(finish)
    sampler.start()
    if command[0] == "-m":
        sys.argv = [command[1], *command[2:]]
        runpy.run_module(command[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = command
        runpy.run_path(command[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
