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


def test_trims_once_the_free_bytes_grew_by_the_threshold_over_their_low() -> None:
    levels = [10, 20, 41, 60, 45, 80, 50, 85]  # MiB free, read at each step
    libc = LibcDouble([n * MIB for n in levels])
    trimmer = HeapTrimmer(30 * MIB, libc)
    trimmed = [trimmer.step() for _ in levels]
    # No trim yet, so the low is 0 until 41 (31 over it): trimmed. A trimmed page still
    # counts as free, so 60 is only 19 over the new low (41) and 45 less; 80 is 39 over 41:
    # trimmed; the low then follows the free bytes down to 50, and 85 is 35 over it.
    assert trimmed == [False, False, True, False, False, True, False, True]
    assert libc.trimmed == [0, 0, 0]
    assert trimmer.trims == 3
    lines = trimmer.render_metrics()
    assert "a2ui_process_heap_trims_total 3" in lines
    assert f"a2ui_process_heap_free_bytes {85 * MIB}" in lines


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
