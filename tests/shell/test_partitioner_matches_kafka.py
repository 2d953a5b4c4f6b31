"""Our run partitioner equals Kafka's default partitioner on the runId (co-partitioning)."""

from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner
from hypothesis import given
from hypothesis import strategies as st

from app.core.runlog.keys import partition_for_run


@given(st.text(min_size=1, max_size=80), st.integers(min_value=1, max_value=48))
def test_same_partition_as_the_default_partitioner(run_id: str, n: int) -> None:
    partitions = list(range(n))
    expected = DefaultPartitioner()(run_id.encode("utf-8"), partitions, partitions)
    assert partition_for_run(run_id, n) == expected
