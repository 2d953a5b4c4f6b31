"""The fault suite's accounting (app/devtools/fault_accounting.py) catches what it claims to: a
pipeline that loses, doubles, reorders or mis-decides one record is counted, not passed.

No broker: the admission records are built in memory, and the pipeline's "outputs" are the
oracle's own outcomes, then damaged one way at a time.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from app.core.admission.policy import HostPolicy
from app.core.runlog.keys import partition_for_run
from app.devtools.fault_accounting import Accounting, Oracle, Outputs, oracle, sse_delivery, tally
from app.devtools.fault_kit import RULES, corpus

PARTITIONS = 3


class Record(NamedTuple):  # the fields of an aiokafka ConsumerRecord that the oracle reads
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def _admission() -> list[Record]:
    offsets = [0] * PARTITIONS
    out = []
    for rec in corpus(runs=6, per_run=40, seed=5):
        p = partition_for_run(rec.run, PARTITIONS)
        out.append(Record("adm", p, offsets[p], rec.key, rec.value))
        offsets[p] += 1
    return out


def _perfect(want: Oracle) -> Outputs:
    events: list[tuple[dict[str, Any], Any]] = []
    for run, entries in want.runs.items():
        events += [({"runId": run, "sequence": seq}, src) for seq, src in entries]
    dead: list[tuple[dict[str, Any], Any]] = [
        ({"code": w.code}, src) for src, w in want.wants.items() if w.kind == "refused"
    ]
    return Outputs(events, dead)


@pytest.fixture(scope="module")
def setup() -> tuple[list[Record], Oracle]:
    records = _admission()
    return records, oracle(records, HostPolicy(), RULES, partitions=PARTITIONS, max_bytes=1_048_576)


def _counts(acc: Accounting) -> tuple[int, int, int, int, bool]:
    return acc.lost, acc.duplicated, acc.misordered, acc.wrong, acc.balanced


def test_the_oracle_sees_every_kind_of_outcome(setup: tuple[list[Record], Oracle]) -> None:
    _records, want = setup
    kinds = {w.kind for w in want.wants.values()}
    assert kinds == {"admitted", "refused", "deduplicated"}


def test_a_faithful_pipeline_balances(setup: tuple[list[Record], Oracle]) -> None:
    records, want = setup
    acc = tally(len(records), want, _perfect(want))
    assert _counts(acc) == (0, 0, 0, 0, True) and acc.ok
    assert acc.published == acc.admitted + acc.refused + acc.deduplicated == len(records)


def test_a_lost_event_and_a_lost_dead_letter_are_counted(
    setup: tuple[list[Record], Oracle],
) -> None:
    records, want = setup
    got = _perfect(want)
    last_run = max(want.runs)
    got.events = [e for e in got.events if e[0] != {"runId": last_run, "sequence": 0}]
    got.dead_letters = got.dead_letters[1:]
    acc = tally(len(records), want, got)
    # the missing event also leaves its run starting at sequence 1: mis-ordered too
    assert _counts(acc) == (2, 0, 1, 0, False) and not acc.ok


def test_a_doubled_output_and_a_recorded_duplicate_are_counted(
    setup: tuple[list[Record], Oracle],
) -> None:
    records, want = setup
    got = _perfect(want)
    got.dead_letters.append(got.dead_letters[0])
    dup_src = next(src for src, w in want.wants.items() if w.kind == "deduplicated")
    got.dead_letters.append(({"code": "x"}, dup_src))
    acc = tally(len(records), want, got)
    assert (acc.lost, acc.duplicated, acc.misordered) == (0, 2, 0) and not acc.ok
    assert acc.twice == 2  # two records, each with one outcome too many


def test_a_record_decided_by_two_owners_is_counted_once_as_twice(
    setup: tuple[list[Record], Oracle],
) -> None:
    # What a zombie leaves: the same record decided by the old owner and the new one, each
    # appending its event at the run's next sequence (so a runId#sequence written twice too).
    records, want = setup
    got = _perfect(want)
    event, src = got.events[-1]
    got.events.append((event, src))
    acc = tally(len(records), want, got)
    assert acc.twice == 1 and acc.duplicated == 2 and acc.lost == 0 and not acc.ok


def test_a_reordered_run_and_a_wrong_code_are_counted(
    setup: tuple[list[Record], Oracle],
) -> None:
    records, want = setup
    got = _perfect(want)
    run = max(want.runs, key=lambda r: len(want.runs[r]))
    first = next(i for i, (e, _s) in enumerate(got.events) if e["runId"] == run)
    (e0, s0), (e1, s1) = got.events[first], got.events[first + 1]
    got.events[first], got.events[first + 1] = (e0, s1), (e1, s0)  # right sequences, swapped
    got.dead_letters[0] = ({"code": "some_other_code"}, got.dead_letters[0][1])
    acc = tally(len(records), want, got)
    assert acc.misordered == 1 and acc.lost == 0 and acc.duplicated == 0
    assert acc.wrong == 3  # the two swapped events (each names another record) + the code


def test_an_absent_outcome_past_the_committed_offset_is_pending_not_lost(
    setup: tuple[list[Record], Oracle],
) -> None:
    records, want = setup
    got = _perfect(want)
    # The pipeline stalled: partition 0 has outcomes only below offset 10, and committed 10.

    def kept(src: tuple[int, int] | None) -> bool:
        assert src is not None  # _perfect names every outcome's source
        return src[0] != 0 or src[1] < 10

    got.events = [e for e in got.events if kept(e[1])]
    got.dead_letters = [d for d in got.dead_letters if kept(d[1])]
    acc = tally(len(records), want, got, committed={0: 10, 1: 10**6, 2: 10**6})
    assert acc.lost == 0 and acc.pending > 0 and acc.duplicated == 0 and not acc.ok
    # Committed past them, the same absences are losses.
    acc = tally(len(records), want, got, committed={0: 10**6, 1: 10**6, 2: 10**6})
    assert acc.lost > 0 and acc.pending == 0


# -- an SSE client's delivery against its run's log -------------------------------------------

_LOG = [(n, f"ev-{n}") for n in range(6)]


@pytest.mark.parametrize(
    ("received", "counts"),
    [
        (_LOG, (0, 0, 0, 0)),  # every event once, in order, whatever the connections were
        (_LOG[:3] + _LOG[4:], (1, 0, 0, 0)),  # a gap at a resumption
        (_LOG[:4] + _LOG[3:], (0, 1, 0, 0)),  # the resumed stream repeats the last event
        (_LOG[:2] + [_LOG[3], _LOG[2]] + _LOG[4:], (0, 0, 1, 0)),
        (_LOG[:5] + [(5, "ev-other")], (1, 0, 0, 1)),  # another event at that sequence
        (_LOG + [(6, "ev-6")], (0, 0, 0, 1)),  # an event the log does not hold
        ([], (6, 0, 0, 0)),
    ],
)
def test_sse_delivery_counts_each_departure_from_the_log(
    received: list[tuple[int, str]], counts: tuple[int, int, int, int]
) -> None:
    got = sse_delivery(_LOG, received)
    assert (got.missing, got.duplicated, got.misordered, got.foreign) == counts
    assert got.ok == (counts == (0, 0, 0, 0))
    assert bool(got.problems) == (not got.ok)
