"""What every bench shares: a process's CPU seconds, to better than a clock tick."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from app.devtools.bench_output import process_cpu_seconds


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_millisecond_of_cpu_is_seen() -> None:
    # CI's bench pipeline read 0.0 us per envelope for a pass-through that used less than one
    # 10 ms clock tick (/proc/PID/stat): the reading must see less than a tick.
    before, start = process_cpu_seconds(os.getpid()), time.thread_time()
    while time.thread_time() - start < 0.001:  # one millisecond of this thread's CPU
        pass
    after = process_cpu_seconds(os.getpid())
    assert before is not None and after is not None
    assert after > before


def test_a_process_that_is_gone_reads_none() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert process_cpu_seconds(proc.pid) is None
