"""Record keys and the run partitioner (topics/topics.json, docs/topics.md).

Pure: standard library only.

Co-partitioning rule: the admission record of run R is keyed by R, so Kafka's default
partitioner puts it on ``murmur2(R) mod N``. Every log record of R is keyed ``R#<sequence>``
(unique per recorded event, so compaction keeps each one) and placed by ``partition_for_run``
on the same ``murmur2(R) mod N``. With equal partition counts the validator that owns admission
partition p owns log partition p, and one run never spans two partitions.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = [
    "log_key",
    "murmur2",
    "partition_for_run",
    "run_of_log_key",
    "sequence_of_log_key",
]

_SEPARATOR = "#"


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (the Java client's ``Utils.murmur2``), as a signed 32-bit int."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    full = length - (length & 3)
    for i in range(0, full, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    extra = length & 3
    if extra >= 3:
        h ^= data[full + 2] << 16
    if extra >= 2:
        h ^= data[full + 1] << 8
    if extra >= 1:
        h ^= data[full]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=65536)
def partition_for_run(run_id: str, partitions: int) -> int:
    """The partition of run ``run_id``: Kafka's default ``toPositive(murmur2(key)) % N``.
    Cached: runIds repeat on every record of a run, and murmur2 in Python costs ~5 µs."""
    if partitions < 1:
        raise ValueError("partitions must be >= 1")
    return (murmur2(run_id.encode("utf-8")) & 0x7FFFFFFF) % partitions


def log_key(run_id: str, sequence: int) -> bytes:
    """The per-run log key: unique per recorded event (``runId#sequence``)."""
    return f"{run_id}{_SEPARATOR}{sequence}".encode()


def run_of_log_key(key: bytes) -> str:
    """The runId inside a log key (the part before the last ``#``)."""
    return key.decode("utf-8").rpartition(_SEPARATOR)[0]


def sequence_of_log_key(key: bytes) -> int:
    """The sequence a per-run log key names (``log_key``'s ``sequence``)."""
    return int(key.decode("utf-8").rpartition(_SEPARATOR)[2])
