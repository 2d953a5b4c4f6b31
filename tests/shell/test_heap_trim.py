"""The heap trimmer (app/shell/worker/heap_trim.py): when it trims, and that a trim gives a
fragmented heap back to the system on this machine's glibc."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

from app.shell.worker.heap_trim import HeapTrimmer, glibc

MIB = 1024 * 1024


@dataclass
class Info:
    fordblks: int


@dataclass
class LibcDouble:
    """``mallinfo2`` reads the next free-bytes level; ``malloc_trim`` is counted."""

    free: list[int]
    trimmed: list[int] = field(default_factory=list)

    def mallinfo2(self) -> Info:
        return Info(self.free.pop(0))

    def malloc_trim(self, pad: int) -> int:
        self.trimmed.append(pad)
        return 1


def test_trims_when_the_free_bytes_and_the_resident_growth_both_reach_the_threshold() -> None:
    free = [10, 40, 40, 40, 20, 35, 40, 40]  # MiB free in the arenas at each step
    # MiB resident: read once per step, and once more after a trim
    resident = [100, 100, 60, 70, 95, 64, 130, 100, 90, 80, 111, 85]
    libc = LibcDouble([n * MIB for n in free])
    reads = [n * MIB for n in resident]
    trimmer = HeapTrimmer(30 * MIB, libc, resident=lambda: reads.pop(0))
    trimmed = [trimmer.step() for _ in free]
    # 10 free: nothing to give back. 40 free and no trim yet: trimmed (100 -> 60). From then
    # on the resident set must have grown 30 over its low since the last trim: 70 is 10 over
    # 60, 95 is 35 (-> 64); 130 is 66 over 64 but only 20 are free; 100 is 36 over 64 (-> 90);
    # the low follows the resident set down to 80, and 111 is 31 over it (-> 85).
    assert trimmed == [False, True, False, True, False, True, False, True]
    assert libc.trimmed == [0, 0, 0, 0] and not reads
    assert trimmer.returned == (40 + 31 + 10 + 26) * MIB
    lines = trimmer.render_metrics()
    assert "a2ui_process_heap_trims_total 4" in lines
    assert f"a2ui_process_heap_free_bytes {40 * MIB}" in lines
    assert f"a2ui_process_heap_trimmed_bytes_total {107 * MIB}" in lines


def test_off_at_zero_and_without_glibc() -> None:
    off = HeapTrimmer(0, LibcDouble([100 * MIB]))
    assert not off.step() and off.render_metrics() == []
    assert not HeapTrimmer(MIB, None).step()


# Fragments the heap as a catch-up does (many mid-sized chunks, one in 50 kept, so the free
# ones lie between chunks in use and none at the heap's top), then runs one trimmer step.
FRAGMENT = """
import json, sys
from app.shell.worker.heap_trim import HeapTrimmer, glibc, resident_bytes
size = int("2000")  # not a constant: the compiler would fold b"x" * 2000 into one object
chunks = [b"x" * size for _ in range(60_000)]
kept = chunks[::50]
del chunks
before = resident_bytes()
trimmer = HeapTrimmer(int(sys.argv[1]), glibc())
trimmer.step()
print(json.dumps({"before": before, "after": resident_bytes(), "trims": trimmer.trims,
                  "returned": trimmer.returned, "kept": len(kept)}))
"""


def _fragmented(threshold: int) -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", FRAGMENT, str(threshold)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, int] = json.loads(out.stdout)
    return result


@pytest.mark.skipif(glibc() is None, reason="glibc's mallinfo2 and malloc_trim only")
def test_a_trim_gives_a_fragmented_heap_back() -> None:
    trimmed = _fragmented(32 * MIB)
    # about 118 MB were freed between chunks still in use
    assert trimmed["trims"] == 1
    assert trimmed["before"] - trimmed["after"] > 80 * MIB
    assert trimmed["returned"] > 80 * MIB
    # the same heap untrimmed keeps them: what glibc does without the trimmer
    kept = _fragmented(0)
    assert kept["trims"] == 0
    assert kept["before"] - kept["after"] < 10 * MIB
