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
flame graph tools read) and ``OUT.txt`` (the top functions by self and by inclusive samples).
``a2ui-stream bench pipeline`` runs its workers under it when ``A2UI_STREAM_PROFILE_DIR`` is
set (docs/benchmarks.md).
"""

from __future__ import annotations

import atexit
import runpy
import signal
import sys
from collections import Counter
from pathlib import Path
from types import FrameType

__all__ = ["Sampler", "main", "summarize"]

INTERVAL_S = 0.005


class Sampler:
    """Counts the main thread's stacks every ``interval`` seconds of process CPU time."""

    def __init__(self, interval: float = INTERVAL_S) -> None:
        self.interval = interval
        self.stacks: Counter[str] = Counter()
        self.samples = 0

    def start(self) -> None:
        signal.signal(signal.SIGPROF, self._on_sample)
        signal.setitimer(signal.ITIMER_PROF, self.interval, self.interval)

    def stop(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, signal.SIG_IGN)

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
        out.with_suffix(".txt").write_text(summarize(self.stacks, self.interval), encoding="utf-8")


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
