"""The read side's ownership edges (app.shell.worker.run_index.RunIndex): assignment changes that
arrive while an earlier one is being applied. The consumer is an in-memory double (its
``end_offsets`` is where the tail awaits the broker); the real-broker tests are in
tests/integration/test_run_index.py."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson
from aiokafka import TopicPartition

from app.shell.worker.run_index import RunIndex

LOG, DEAD = "t.runs.log", "t.runs.deadletter"


class TailConsumer:
    """What ``RunIndex._apply_changes`` calls: end offsets (awaited: ``during`` runs inside
    the n-th call, as a rebalance listener runs beside the tail), assign and seek."""

    def __init__(self, during: Callable[[int], None]) -> None:
        self.during = during
        self.calls = 0
        self.assignment: list[TopicPartition] = []
        self.seeks: dict[TopicPartition, int] = {}

    async def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        self.calls += 1
        self.during(self.calls)
        return {tp: 100 for tp in tps}

    def assign(self, tps: list[TopicPartition]) -> None:
        self.assignment = list(tps)
        self.seeks = {}  # as aiokafka's: a new assignment keeps no position

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks[tp] = offset


def _index(tmp_path: Path) -> RunIndex:
    index = RunIndex("127.0.0.1:9", LOG, DEAD, tmp_path / "store")
    index.warm_partitions()  # opens the store, as before start
    index.partitions = 6
    return index


async def test_a_revoke_that_comes_while_an_assignment_is_applied_stands(tmp_path: Path) -> None:
    # Found by bench scale (restart one of two, 70 s to ready): while the survivor applied the
    # assignment of every partition (one end-offsets round trip each), the rejoined worker took
    # 3-5 back; the survivor's tail then owned them again, read ~96k records of partitions it no
    # longer owned, and failed on the next change (KeyError).
    index = _index(tmp_path)
    index.assigned(frozenset({0, 3, 4, 5}))
    consumer = TailConsumer(lambda n: index.revoked(frozenset({3, 4, 5})) if n == 2 else None)
    await index._apply_changes(consumer)
    await index._apply_changes(consumer)
    assert index.owned == {0}
    assert {tp.partition for tp in consumer.assignment} == {0}
    assert set(index._targets) == {0}  # only an owned partition is waited on to be ready
    index.store.close()


async def test_an_assignment_after_a_revoke_is_applied(tmp_path: Path) -> None:
    # the other order: revoked, then assigned again while the first change is applied
    index = _index(tmp_path)
    index.assigned(frozenset({1, 2}))

    def during(n: int) -> None:
        if n == 1:
            index.revoked(frozenset({2}))
            index.assigned(frozenset({2}))

    consumer = TailConsumer(during)
    await index._apply_changes(consumer)
    if index._changed:
        await index._apply_changes(consumer)
    assert index.owned == {1, 2}
    assert {tp.partition for tp in consumer.assignment} == {1, 2}
    assert {tp.partition for tp in consumer.seeks} == {1, 2}
    index.store.close()


class FetchedRecord:
    """A fetched log record (the fields ``RunIndex._ingest`` reads)."""

    def __init__(self, offset: int, key: bytes, value: bytes, headers: list[Any]) -> None:
        self.offset, self.key, self.value, self.headers = offset, key, value, headers
        self.timestamp = 1_700_000_000_000


async def test_an_event_with_its_type_header_is_filed_without_being_parsed(
    tmp_path: Path,
) -> None:
    """Issue 16 (each record decoded at most once per process): the type comes from the
    ``a2ui-type`` header; only a record without it (written before the header) is parsed. A
    value that is not JSON shows which: with the header it is filed (and parsed only if ever
    read), without it it cannot be and is skipped."""
    index = _index(tmp_path)
    index.assigned(frozenset({0}))
    await index._apply_changes(TailConsumer(lambda n: None))
    typed = [("a2ui-source", b"0:7"), ("a2ui-type", b"ui.a2ui-surface")]
    older = orjson.dumps({"runId": "t/r", "sequence": 1, "type": "run.completed", "payload": {}})
    index._ingest(
        {
            TopicPartition(LOG, 0): [
                FetchedRecord(0, b"t/r#0", b"not json: never parsed here", typed),
                FetchedRecord(1, b"t/r#1", older, [("a2ui-source", b"0:8")]),
                FetchedRecord(2, b"t/r#2", b"not json, and no type header", []),
            ]
        }
    )
    stored = list(index.store.events(0, "t/r"))
    assert [(e.sequence, e.type) for e in stored] == [(0, "ui.a2ui-surface"), (1, "run.completed")]
    assert index.outcomes["0:7"].events[0].type == "ui.a2ui-surface"
    index.store.close()
