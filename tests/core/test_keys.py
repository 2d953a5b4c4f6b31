"""Keys and the run partitioner: co-partitioning rests on these (docs/topics.md)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.core.runlog.keys import (
    log_key,
    murmur2,
    partition_for_run,
    run_of_log_key,
    sequence_of_log_key,
)


def test_murmur2_known_vectors() -> None:
    # Vectors from Kafka's UtilsTest.testMurmur2 (Java client), as signed ints.
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


@given(st.text(min_size=1, max_size=64), st.integers(min_value=0, max_value=10**9))
def test_log_key_round_trips_and_keeps_the_run(run_id: str, sequence: int) -> None:
    key = log_key(run_id, sequence)
    assert run_of_log_key(key) == run_id
    assert sequence_of_log_key(key) == sequence


@given(st.text(min_size=1, max_size=64), st.integers(min_value=1, max_value=64))
def test_partition_is_in_range_and_stable(run_id: str, partitions: int) -> None:
    p = partition_for_run(run_id, partitions)
    assert 0 <= p < partitions
    assert p == partition_for_run(run_id, partitions)
