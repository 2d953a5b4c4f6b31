"""The CPU-time sampler (app/devtools/cpu_profile.py): it charges samples to the stack that
used the CPU, not to one that waited, and writes the folded stacks and the summary at exit."""

from __future__ import annotations

import gc
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from app.devtools.cpu_profile import Sampler, gc_summary, summarize


def _spin(cpu_seconds: float) -> int:
    end = time.process_time() + cpu_seconds
    n = 0
    while time.process_time() < end:
        n += 1
    return n


def test_samples_go_to_the_stack_that_used_the_cpu_not_to_one_that_slept() -> None:
    sampler = Sampler(interval=0.002)
    sampler.start()
    try:
        time.sleep(0.3)  # waits: ITIMER_PROF does not advance
        _spin(0.3)
    finally:
        sampler.stop()
    spinning = sum(n for stack, n in sampler.stacks.items() if ":_spin" in stack)
    sleeping = sum(
        n for stack, n in sampler.stacks.items() if ":_spin" not in stack and "sleep" in stack
    )
    assert sampler.samples == sum(sampler.stacks.values()) > 0
    assert spinning > 0
    assert spinning >= 0.8 * sampler.samples, sampler.stacks.most_common(5)
    assert sleeping == 0


def test_collector_time_is_counted_by_generation_and_only_while_sampling() -> None:
    sampler = Sampler(interval=0.002)
    sampler.start()
    try:
        for _ in range(3):
            ring: list[object] = []
            ring.append(ring)  # a cycle: only the collector frees it
            del ring
            gc.collect()  # a full collection (generation 2)
    finally:
        sampler.stop()
    assert sampler.gc_collections[2] >= 3
    assert sampler.gc_seconds[2] > 0
    counted = list(sampler.gc_collections)
    gc.collect()  # after stop: no longer counted
    assert sampler.gc_collections == counted
    text = gc_summary(sampler.gc_seconds, sampler.gc_collections)
    assert text.startswith("garbage collector (CPU seconds, collections):")
    assert f"all  {sum(sampler.gc_seconds):8.3f} s {sum(counted):7d}" in text


def test_summary_counts_self_and_inclusive_samples_once_per_stack() -> None:
    stacks = Counter({"m:main;m:a;m:b": 3, "m:main;m:a": 1, "m:main;m:rec;m:rec": 2})
    text = summarize(stacks, 0.005)
    assert text.startswith("6 samples of 5 ms CPU (0.0 s)")
    self_part, inclusive_part = text.split("inclusive:")
    assert "      3  50.0%  m:b" in self_part
    assert "      2  33.3%  m:rec" in self_part  # its own samples, not counted twice
    assert "      6 100.0%  m:main" in inclusive_part
    assert "      4  66.7%  m:a" in inclusive_part
    assert "      2  33.3%  m:rec" in inclusive_part  # a recursion counts once per stack


def test_a_command_run_under_it_leaves_its_folded_stacks_and_summary(tmp_path: Path) -> None:
    script = tmp_path / "busy.py"
    script.write_text(
        "import time\n"
        "def busy():\n"
        "    end = time.process_time() + 0.2\n"
        "    while time.process_time() < end:\n"
        "        pass\n"
        "busy()\n",
        encoding="utf-8",
    )
    out = tmp_path / "prof" / "busy.folded"
    done = subprocess.run(
        [sys.executable, "-m", "app.devtools.cpu_profile", str(out), "--", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    folded = out.read_text(encoding="utf-8").splitlines()
    assert any(line.split(" ")[0].endswith("__main__:busy") for line in folded)
    assert all(line.rsplit(" ", 1)[1].isdigit() for line in folded)
    summary = out.with_suffix(".txt").read_text(encoding="utf-8")
    assert "__main__:busy" in summary
    assert "garbage collector (CPU seconds, collections):" in summary


def test_it_says_how_to_call_it() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app.devtools.cpu_profile", "out.folded"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "usage: python -m app.devtools.cpu_profile OUT.folded --" in done.stderr
