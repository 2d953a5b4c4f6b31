"""Giving the heap a worker freed back to the operating system (glibc's ``malloc_trim``).

Shell module, run in every worker process (``faust_app``). It imports only the standard
library.

Why (docs/scale.md, "RSS after a catch-up"): a worker that reads history (one that joins a
deployment, or restarts, and reads its partitions' log into its run store) allocates and
frees far more than it keeps. glibc keeps what is freed in its arenas, between chunks still in
use, so nothing returns to the system: measured with gdb on a worker that had joined a second
one, glibc's main arena held 180 MB of which 45 MB were in use (RSS 260 MB, one worker alone
203 MB); ``malloc_trim(0)`` took RSS to 135 MB. glibc trims only the top of a heap on its own,
never free pages between chunks in use; ``malloc_trim`` hands those back (``madvise``).

Every ``INTERVAL_S`` the trimmer reads the process's resident set and the free bytes glibc's
arenas hold (``mallinfo2``), and trims when both are at least ``A2UI_STREAM_HEAP_TRIM_MB``:
the free bytes (there is something to give back) and the growth of the resident set over its
lowest level since the last trim (something was touched since; a trimmed page still counts as
free in ``mallinfo2``, and a free chunk reused and freed again is resident again, so the free
bytes alone cannot say). A trim took 8.5 ms to give back 75 MB and 12.5 ms for 108 MB
(``bench scale``, docs/scale.md), and happens at most once per that much growth. Not glibc
(musl, macOS): nothing to do, no gauges.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import time
from collections.abc import Callable
from typing import Any

__all__ = ["INTERVAL_S", "HeapTrimmer", "glibc", "resident_bytes"]

INTERVAL_S = 5.0


class _Mallinfo2(ctypes.Structure):
    # glibc's struct mallinfo2 (2.33+): every field a size_t
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def glibc() -> Any | None:
    """This process's glibc with ``mallinfo2`` and ``malloc_trim`` typed, or None."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.mallinfo2.restype = _Mallinfo2
        libc.mallinfo2.argtypes = []
        libc.malloc_trim.restype = ctypes.c_int
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):
        return None
    return libc


def resident_bytes() -> int:
    """This process's resident set (``/proc/self/statm``), 0 where there is none."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class HeapTrimmer:
    """Trims the heap once ``threshold_bytes`` lie free in it and the resident set has grown by
    as much over its low since the last trim (0: never). ``libc``: what ``glibc()`` returns;
    ``resident``: the resident set's reader (tests pass doubles of both)."""

    def __init__(
        self,
        threshold_bytes: int,
        libc: Any | None,
        resident: Callable[[], int] = resident_bytes,
    ) -> None:
        self.threshold = threshold_bytes
        self.libc = libc if threshold_bytes > 0 else None
        self.resident = resident
        self.low = 0  # the resident set's lowest since the last trim (none yet: all of it)
        self.free = 0
        self.trims = 0
        self.returned = 0  # resident bytes the trims took away, summed
        self.seconds = 0.0

    def step(self) -> bool:
        """Read the free bytes and the resident set; trim when both say so. True if it did."""
        if self.libc is None:
            return False
        self.free = int(self.libc.mallinfo2().fordblks)
        before = self.resident()
        self.low = min(self.low, before)
        if self.free < self.threshold or before - self.low < self.threshold:
            return False
        started = time.perf_counter()
        self.libc.malloc_trim(0)
        self.seconds += time.perf_counter() - started
        self.low = self.resident()
        self.returned += max(0, before - self.low)
        self.trims += 1
        return True

    async def run(self, stopping: asyncio.Event) -> None:
        if self.libc is None:
            return
        while not stopping.is_set():
            try:
                await asyncio.wait_for(stopping.wait(), INTERVAL_S)
            except TimeoutError:
                self.step()

    def render_metrics(self) -> list[str]:
        if self.libc is None:
            return []
        return [
            "# HELP a2ui_process_heap_free_bytes Bytes glibc's arenas hold free (trimmed or not).",
            "# TYPE a2ui_process_heap_free_bytes gauge",
            f"a2ui_process_heap_free_bytes {self.free}",
            "# HELP a2ui_process_heap_trims_total Times freed heap went back (malloc_trim).",
            "# TYPE a2ui_process_heap_trims_total counter",
            f"a2ui_process_heap_trims_total {self.trims}",
            "# HELP a2ui_process_heap_trimmed_bytes_total Resident bytes the trims gave back.",
            "# TYPE a2ui_process_heap_trimmed_bytes_total counter",
            f"a2ui_process_heap_trimmed_bytes_total {self.returned}",
            "# HELP a2ui_process_heap_trim_seconds_total Time spent trimming.",
            "# TYPE a2ui_process_heap_trim_seconds_total counter",
            f"a2ui_process_heap_trim_seconds_total {self.seconds:.6f}",
        ]
