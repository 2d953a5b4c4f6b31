"""The validator loop (app/shell/worker/validator_loop.py and the modules it drives: validator_take,
validator_commit, validator_cache), driven with an in-memory Kafka double
(tests/shell/memory_kafka.py) through the rebalance, restore and fencing edges, in seconds.

Each test publishes a mixed corpus to the double's admission topic, moves partitions between
members by calling their rebalance listeners as aiokafka would, and ends with the fault
suite's own accounting (``app.devtools.fault_accounting.tally`` against the core oracle): every
record exactly one outcome, per-run order kept. The real-broker tests (tests/integration) run
the same loop against Apache Kafka; no test there uses this double.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
import pytest
from aiokafka import TopicPartition

import app.shell.worker.validator_commit as validator_commit
from app.core.admission.policy import HostPolicy
from app.core.admission.validator_batch import source_of
from app.core.runlog.keys import partition_for_run
from app.core.runlog.run_snapshot import CHECKPOINT_KEY, decode_checkpoint
from app.devtools.fault_accounting import Accounting, Outputs, oracle, tally
from app.devtools.fault_kit import RULES, Published, components, corpus, create, envelope
from app.shell.worker.metrics import Metrics
from app.shell.worker.validator_config import ValidatorConfig
from app.shell.worker.validator_loop import ValidatorLoop
from tests.shell.memory_kafka import MemoryConsumer, MemoryKafka, MemoryProducer

PARTITIONS = 3
ADMISSION, LOG, DEAD, RESUMES, STATE = "adm", "log", "dead", "resumes", "state"
GROUP = "app-validator"


def _config(worker: str, transactions: str = "on") -> ValidatorConfig:
    return ValidatorConfig(
        bootstrap="memory",
        admission_topic=ADMISSION,
        log_topic=LOG,
        deadletter_topic=DEAD,
        partitions=PARTITIONS,
        group_id=GROUP,
        transactional_id=f"app-validator-{worker}",
        transactions=transactions,
        resumes_topic=RESUMES,
        changelog_topic=STATE,
        changelog_interval=0.0,  # a flush with every commit (one test sets it long)
    )


class Unfenced(ValidatorConfig):
    """The design before issue 15 item 4, as far as fencing goes: transactional ids that
    differ from member to member, so a new owner's start fences nobody else."""

    def partition_transactional_id(self, partition: int) -> str:
        return f"{self.transactional_id}-p{partition}"


class MemoryLoop(ValidatorLoop):
    """The real loop; only the clients are the double's."""

    def __init__(self, kafka: MemoryKafka, config: ValidatorConfig, batch_bytes: int) -> None:
        super().__init__(config, HostPolicy(), RULES, Metrics())
        self.kafka, self.batch_bytes = kafka, batch_bytes

    def new_consumer(self) -> Any:
        return MemoryConsumer(self.kafka, self.config.group_id)

    def new_producer(self, transactional_id: str | None) -> Any:
        return MemoryProducer(self.kafka, transactional_id, batch_bytes=self.batch_bytes)

    async def read_outputs(self, partition: int) -> tuple[list[Any], list[Any]]:
        return self.kafka.visible(LOG, partition), self.kafka.visible(DEAD, partition)

    async def read_changelog(self, partition: int) -> list[Any]:
        return self.kafka.visible(STATE, partition)

    async def read_tail(
        self, partition: int, log_from: int, dead_from: int
    ) -> tuple[list[Any], list[Any], int, int]:
        return (
            self.kafka.tail(LOG, partition, log_from),
            self.kafka.tail(DEAD, partition, dead_from),
            len(self.kafka.logs[(LOG, partition)]),
            len(self.kafka.logs[(DEAD, partition)]),
        )

    async def read_source(self, source: Any) -> None:
        return None

    @property
    def member(self) -> MemoryConsumer:
        assert isinstance(self.consumer, MemoryConsumer)
        return self.consumer


@dataclass
class Stage:
    kafka: MemoryKafka
    published: list[Published]
    running: list[MemoryLoop] = field(default_factory=list)

    @asynccontextmanager
    async def member(self, config: ValidatorConfig, *, batch_bytes: int = 1 << 20) -> Any:
        loop = MemoryLoop(self.kafka, config, batch_bytes)
        await loop.start()
        stopping = asyncio.Event()
        task = asyncio.create_task(loop.run(stopping))
        self.running.append(loop)
        try:
            yield loop
        finally:
            self.running.remove(loop)
            stopping.set()
            await asyncio.wait_for(task, 10)
            await loop.stop()

    def publish(self, records: list[Published]) -> None:
        for rec in records:
            self.kafka.append(ADMISSION, partition_for_run(rec.run, PARTITIONS), rec.key, rec.value)
        self.published += records

    def outcomes(self) -> int:
        return sum(len(self.kafka.visible(t, p)) for t in (LOG, DEAD) for p in range(PARTITIONS))

    def account(self) -> Accounting:
        admission = [r for p in range(PARTITIONS) for r in self.kafka.visible(ADMISSION, p)]
        want = oracle(admission, HostPolicy(), RULES, partitions=PARTITIONS, max_bytes=1_048_576)

        def read(topic: str) -> list[tuple[dict[str, Any], tuple[int, int] | None]]:
            return [
                (orjson.loads(r.value), source_of(r.headers))
                for p in range(PARTITIONS)
                for r in self.kafka.visible(topic, p)
                if r.value is not None
            ]

        committed = {
            p: self.kafka.committed.get((GROUP, ADMISSION, p), 0) for p in range(PARTITIONS)
        }
        return tally(len(admission), want, Outputs(read(LOG), read(DEAD)), committed)

    def due(self) -> int:
        admission = [r for p in range(PARTITIONS) for r in self.kafka.visible(ADMISSION, p)]
        want = oracle(admission, HostPolicy(), RULES, partitions=PARTITIONS, max_bytes=1_048_576)
        return sum(
            len(w.events) if w.kind == "admitted" else 1
            for w in want.wants.values()
            if w.kind != "deduplicated"
        )

    def decided(self) -> bool:
        """Every record published has its outcome, and its offset is committed or behind the
        offset its running owner decides next (committed within ``changelog_interval``)."""
        ends = {p: len(self.kafka.logs[(ADMISSION, p)]) for p in range(PARTITIONS)}
        committed = all(self.decided_up_to(p) >= end for p, end in ends.items())
        return committed and self.outcomes() >= self.due()

    def decided_up_to(self, partition: int) -> int:
        held = [
            loop.partitions[partition].next_offset
            for loop in self.running
            if partition in loop.partitions
        ]
        return max([self.kafka.committed.get((GROUP, ADMISSION, partition), 0), *held])


@pytest.fixture
def stage() -> Iterator[Stage]:
    yield Stage(MemoryKafka(), [])


def _corpus(seed: int, runs: int = 6, per_run: int = 30) -> list[Published]:
    return corpus(runs=runs, per_run=per_run, seed=seed, prefix=f"t{seed}")


def _tps(*partitions: int) -> list[TopicPartition]:
    return [TopicPartition(ADMISSION, p) for p in (partitions or range(PARTITIONS))]


async def until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """Wait for ``condition`` (a completion signal), bounded."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not reached within {timeout:.0f}s: {what}")
        await asyncio.sleep(0.005)


def _hold(loop: MemoryLoop, *partitions: int) -> asyncio.Event:
    """Make ``loop``'s producers (of ``partitions``, default all) stand still before their
    commits until the returned event is set."""
    hold = asyncio.Event()
    for p, owned in loop.partitions.items():
        if not partitions or p in partitions:
            assert isinstance(owned.producer, MemoryProducer)
            owned.producer.hold = hold
    return hold


def _clean(acc: Accounting) -> None:
    assert acc.ok and acc.twice == 0, (acc.line(), acc.problems)
    assert acc.admitted and acc.refused and acc.deduplicated


async def test_one_member_decides_every_record_once(stage: Stage) -> None:
    async with stage.member(_config("w1")) as w1:
        await w1.member.assign(_tps())
        stage.publish(_corpus(1))
        await until(stage.decided, "every record decided")
    _clean(stage.account())
    # one transactional id per partition, each initialized once (plus the worker's probe)
    assert sorted(stage.kafka.inits) == [
        "app-validator-p0",
        "app-validator-p1",
        "app-validator-p2",
        "app-validator-w1",
    ]


async def test_every_batch_goes_out_closed(stage: Stage) -> None:
    """aiokafka holds a batch sent open for the producer's linger_ms (5 ms here) before it
    goes, and each transaction waits for its appends: every batch the loop sends is closed
    (the outputs, the changelog records, a restore's catch-up)."""
    async with stage.member(_config("w1")) as w1:
        await w1.member.assign(_tps())
        stage.publish(_corpus(1))
        await until(stage.decided, "every record decided")
    assert stage.kafka.open_batches_sent == 0
    _clean(stage.account())


async def test_offsets_join_only_the_transactions_that_write_a_checkpoint(
    stage: Stage,
) -> None:
    """With a long commit interval the batches commit their outputs without the admission
    offset (two round trips fewer each); the offset the group holds then lags what was
    decided, and the next owner, restored from the changelog and the outputs' source headers
    past it, decides every later record once."""
    records = _corpus(17)
    async with stage.member(replace(_config("w1"), changelog_interval=3600.0)) as w1:
        await w1.member.assign(_tps())
        await until(lambda: len(w1.partitions) == PARTITIONS, "w1 restored")
        commits, offsets = w1.commits, stage.kafka.offset_commits
        for first in range(0, 150, 30):
            stage.publish(records[first : first + 30])
            await until(stage.decided, "decided by w1")
        assert w1.commits > commits and stage.kafka.offset_commits == offsets
        decided = [p for p in range(PARTITIONS) if w1.partitions[p].next_offset > 0]
        lagging = [
            p
            for p in decided
            if stage.kafka.committed.get((GROUP, ADMISSION, p), 0) < w1.partitions[p].next_offset
        ]
        assert decided and lagging == decided
        w1._flush_idle = _no_flush  # it crashes: no last flush
    second = await _restart(stage, "w2", chunks=[records[150:]])
    assert second["changelog"] == PARTITIONS and second["replay"] == 0
    _clean(stage.account())


async def test_a_partition_gone_quiet_commits_its_offset_within_the_interval(
    stage: Stage,
) -> None:
    """A partition whose last batches wrote no checkpoint (they came within the interval)
    has its admission offset committed by the idle flush once the interval has passed, with
    no new record to carry it; the group's committed offset is what operators read as lag."""
    async with stage.member(replace(_config("w1"), changelog_interval=1.0)) as w1:
        await w1.member.assign(_tps())
        await until(lambda: len(w1.partitions) == PARTITIONS, "w1 restored")
        stage.publish(_corpus(18))
        ends = {p: len(stage.kafka.logs[(ADMISSION, p)]) for p in range(PARTITIONS)}
        await until(
            lambda: all(
                stage.kafka.committed.get((GROUP, ADMISSION, p), 0) >= end
                for p, end in ends.items()
            ),
            "the offsets committed with nothing more published",
        )
    _clean(stage.account())


@pytest.mark.parametrize("fenced", [True, False], ids=["per-partition ids", "unfenced"])
async def test_a_zombie_commits_nothing_its_successor_decides(stage: Stage, fenced: bool) -> None:
    """A member holds an open transaction (records written, commit not yet sent) when the
    group gives its partitions to another member; then it carries on with its commit. With a
    transactional id per partition the successor's start fenced it; with per-member ids (the
    design before) its commit lands beside the successor's outcomes."""
    config = _config if fenced else (lambda w: Unfenced(**vars(_config(w))))
    async with stage.member(config("w1")) as w1, stage.member(config("w2")) as w2:
        await w1.member.assign(_tps())
        stage.publish(_corpus(2)[:60])
        await until(stage.decided, "the first records decided by w1")
        # w1 stands still inside its next commit (a GC pause, a stalled VM) ...
        hold = _hold(w1)
        stage.publish(_corpus(2)[60:])
        await until(
            lambda: any(stage.kafka.pending(LOG, p) for p in range(PARTITIONS)),
            "w1 inside a transaction",
        )
        # ... the group drops it and gives its partitions to w2, which decides them ...
        await w2.member.assign(_tps())
        await until(stage.decided, "every record decided by w2")
        # ... then w1 wakes up and commits what it held.
        hold.set()
        await until(
            lambda: (
                not w1.lock.locked()
                and not any(
                    stage.kafka.pending(t, p) for t in (LOG, DEAD) for p in range(PARTITIONS)
                )
            ),
            "w1 done with the batch it held",
        )
        await w1.member.revoke(_tps())  # its next heartbeat tells it
    acc = stage.account()
    if fenced:
        _clean(acc)
        assert w1.fenced >= 1 and not w1.partitions
    else:
        assert acc.twice > 0 and not acc.ok  # the double does catch the zombie


async def test_a_partition_revoked_while_its_transaction_is_open(stage: Stage) -> None:
    """The revocation waits for the batch in flight: its transaction commits first, and the
    next owner starts from that commit."""
    async with stage.member(_config("w1")) as w1, stage.member(_config("w2")) as w2:
        await w1.member.assign(_tps())
        await until(lambda: len(w1.partitions) == PARTITIONS, "w1 took its partitions")
        hold = _hold(w1)
        stage.publish(_corpus(3))
        await until(
            lambda: any(stage.kafka.pending(LOG, p) for p in range(PARTITIONS)),
            "w1 inside a transaction",
        )
        revoking = asyncio.create_task(w1.member.revoke(_tps()))
        for _ in range(20):  # everything else here is instantaneous: let it all run
            await asyncio.sleep(0)
        assert not revoking.done()  # held by the open transaction
        hold.set()
        await asyncio.wait_for(revoking, 5)
        assert not w1.partitions and w1.fenced == 0
        await w2.member.assign(_tps())
        await until(stage.decided, "every record decided by w2")
    _clean(stage.account())


async def test_a_partition_given_back_to_the_same_member(stage: Stage) -> None:
    """An eager rebalance revokes and assigns again: the member takes its partitions anew (a
    new producer, the state restored from the log) and carries on at the right sequences."""
    records = _corpus(4)
    async with stage.member(_config("w1")) as w1:
        await w1.member.assign(_tps())
        stage.publish(records[: len(records) // 2])
        await until(stage.decided, "the first half decided")
        # and kept: a plan's run states are installed after its commit returns, so ``decided``
        # (the committed offsets) can be true a moment before the loop holds them
        ends = {p: len(stage.kafka.logs[(ADMISSION, p)]) for p in range(PARTITIONS)}
        await until(
            lambda: all(w1.partitions[p].next_offset >= end for p, end in ends.items()),
            "the first half's states installed",
        )
        before = {p: dict(owned.runs) for p, owned in w1.partitions.items()}
        await w1.member.revoke(_tps())
        await w1.member.assign(_tps())
        await until(lambda: len(w1.partitions) == PARTITIONS, "taken again")
        # restore = live: the state rebuilt from the log is the state the decisions left
        assert {p: dict(owned.runs) for p, owned in w1.partitions.items()} == before
        stage.publish(records[len(records) // 2 :])
        await until(stage.decided, "every record decided")
    _clean(stage.account())
    assert stage.kafka.inits.count("app-validator-p0") == 2


async def test_a_new_owner_decides_nothing_before_its_producer_is_initialized(
    stage: Stage,
) -> None:
    """The take starts the partition's producer first (which fences the previous owner and
    aborts its open transaction); until then the partition is paused and not decided."""
    gate = stage.kafka.init_gates["app-validator-p1"] = asyncio.Event()
    async with stage.member(_config("w1")) as w1:
        await w1.member.assign(_tps())
        stage.publish(_corpus(5))
        await until(lambda: sorted(w1.partitions) == [0, 2], "partitions 0 and 2 taken")
        await until(
            lambda: (
                stage.kafka.committed.get((GROUP, ADMISSION, 0), 0)
                == len(stage.kafka.logs[(ADMISSION, 0)])
            ),
            "partition 0 decided",
        )
        assert not stage.kafka.visible(LOG, 1) and not stage.kafka.visible(DEAD, 1)
        assert TopicPartition(ADMISSION, 1) in w1.member.paused
        gate.set()
        await until(stage.decided, "every record decided")
    _clean(stage.account())


async def test_a_fence_without_a_rebalance_is_taken_again(
    stage: Stage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker fenced a partition's producer although the group still gives the partition
    to this member (it aborts a transaction past its timeout so): the partition is dropped and
    taken again once no rebalance came, and nothing is decided twice."""
    monkeypatch.setattr(validator_commit, "FENCED_RETAKE_SECONDS", 0.05)
    async with stage.member(_config("w1")) as w1:
        await w1.member.assign(_tps())
        await until(lambda: len(w1.partitions) == PARTITIONS, "w1 took its partitions")
        hold = _hold(w1, 0)
        stage.publish(_corpus(6))
        await until(
            lambda: stage.kafka.pending(LOG, 0) or stage.kafka.pending(DEAD, 0),
            "a transaction open on partition 0",
        )
        stage.kafka.fence("app-validator-p0")
        hold.set()
        await until(lambda: w1.fenced == 1, "the fence seen")
        await until(stage.decided, "every record decided")
        assert sorted(w1.partitions) == [0, 1, 2]
    _clean(stage.account())


@pytest.mark.parametrize("changelog", [False, True], ids=["replay", "changelog"])
async def test_without_transactions_a_failed_commit_skips_what_was_written(
    stage: Stage, changelog: bool
) -> None:
    """A broker without transactions: the outputs of a batch whose offset commit failed are
    on the topics; the partition is taken again and those records are not decided twice:
    replaying, they are ``seen`` in the log and dead letters past the committed offset; from
    the changelog, its checkpoint (written once the outputs were acknowledged) starts past
    them, and that start is committed."""
    config = _config("w1", transactions="off")
    if not changelog:
        config = ValidatorConfig(**{**vars(config), "changelog_topic": ""})
    async with stage.member(config) as w1:
        assert not w1.transactional
        await w1.member.assign(_tps())
        stage.publish(_corpus(7)[:50])
        await until(stage.decided, "the first records decided")
        w1.member.commit_failures = 1
        stage.publish(_corpus(7)[50:])
        await until(stage.decided, "every record decided")
        if changelog:
            assert w1.restores["changelog"] > 0
        else:
            assert w1.metrics.outcomes["skipped"] > 0
            assert w1.restores == {"changelog": 0, "replay": 6}
    _clean(stage.account())


async def test_without_transactions_a_changelog_behind_the_log_is_caught_up_from_its_tail(
    stage: Stage,
) -> None:
    """The log appends of a batch land, its changelog records do not (the broker went away
    between the two): the restore folds the log tail past the checkpoint onto the changelog's
    runs and skips those records as ``seen``."""
    async with stage.member(_config("w1", transactions="off")) as w1:
        await w1.member.assign(_tps())
        stage.publish(_corpus(11)[:50])
        await until(stage.decided, "the first records decided")
        stage.kafka.refuse[STATE] = 1
        stage.publish(_corpus(11)[50:])
        await until(stage.decided, "every record decided")
        assert w1.metrics.outcomes["skipped"] > 0  # seen in the tail, not decided again
        assert w1.restores["replay"] == 3  # the first takes only: the changelog was empty
        assert w1.restores["changelog"] > 0
    _clean(stage.account())


async def _restart(
    stage: Stage, worker: str, transactions: str = "on", chunks: Sequence[list[Published]] = ()
) -> dict[str, int]:
    """A member that takes every partition, decides ``chunks`` published one after the other
    (a batch or more each) and stops: how it restored, what it read."""
    async with stage.member(_config(worker, transactions)) as member:
        await member.member.assign(_tps())
        await until(lambda: len(member.partitions) == PARTITIONS, f"{worker} restored")
        await until(stage.decided, f"every record decided by {worker}")
        for chunk in chunks:
            stage.publish(chunk)
            await until(stage.decided, f"every record decided by {worker}")
        return {**member.restores, **{f"read-{k}": v for k, v in member.restored_records.items()}}


def _log_records(stage: Stage) -> int:
    return sum(len(stage.kafka.visible(LOG, p)) for p in range(PARTITIONS))


@pytest.mark.parametrize("transactions", ["on", "off"])
async def test_a_new_owner_restores_from_the_changelog_and_decides_as_before(
    stage: Stage, transactions: str
) -> None:
    """The next owner of every partition reads the changelog (a record per run and the
    checkpoint), and of the log only the tail past the checkpoint: nothing, the last commit's
    checkpoint names where its appends ended; what it decides next is what the first owner
    would have decided (the accounting)."""
    records = _corpus(12)
    first = await _restart(stage, "w1", transactions, [records[i : i + 30] for i in (0, 30, 60)])
    assert first["replay"] == PARTITIONS and first["changelog"] == 0  # nothing to restore from
    before = _log_records(stage)
    second = await _restart(
        stage, "w2", transactions, [records[i : i + 30] for i in (90, 120, 150)]
    )
    assert second["changelog"] == PARTITIONS and second["replay"] == 0
    assert before > 0 and second["read-log"] == second["read-deadletter"] == 0
    keys = {r.key for p in range(PARTITIONS) for r in stage.kafka.visible(STATE, p)}
    assert len(keys) == len({r.run for r in stage.published}) + 1  # compacted: one per run
    third = await _restart(stage, "w3", transactions)
    assert third["changelog"] == PARTITIONS and third["replay"] == 0
    assert _log_records(stage) > before and third["read-log"] == 0
    _clean(stage.account())


async def _no_flush(*, due: bool = True) -> None:
    return None


async def test_with_a_long_commit_interval_the_restore_folds_the_log_since_the_last_flush(
    stage: Stage,
) -> None:
    """The changelog is flushed once, with the first batch; everything after is in the log
    only: the next owner folds that tail onto the changelog's runs and decides as before."""
    records = _corpus(14)
    async with stage.member(replace(_config("w1"), changelog_interval=3600.0)) as w1:
        await w1.member.assign(_tps())
        for first in range(0, 150, 30):
            stage.publish(records[first : first + 30])
            await until(stage.decided, "decided by w1")
        w1._flush_idle = _no_flush  # it crashes: no last flush
    second = await _restart(stage, "w2", chunks=[records[150:]])
    assert second["changelog"] == PARTITIONS and second["replay"] == 0
    assert second["read-log"] > 0  # the tail since the first flush
    _clean(stage.account())


async def test_a_flush_spread_over_batches_restores_the_same(stage: Stage) -> None:
    """One run state per batch (a flush spread over many batches, the checkpoint only once
    every run dirty when it began is written): the next owner restores from the changelog and
    decides as before."""
    records = _corpus(15)
    async with stage.member(replace(_config("w1"), changelog_flush_runs=1)) as w1:
        await w1.member.assign(_tps())
        for first in range(0, 150, 10):
            stage.publish(records[first : first + 10])
            await until(stage.decided, "decided by w1")
    second = await _restart(stage, "w2", chunks=[records[150:]])
    assert second["changelog"] == PARTITIONS and second["replay"] == 0
    _clean(stage.account())


async def test_a_flush_spread_over_busy_runs_still_ends_with_its_checkpoint(
    stage: Stage,
) -> None:
    """One run state per batch while every batch changes the partition's runs again, and no
    idle flush in between: a flush writes the runs dirty when it began, so it ends and its
    checkpoint is written while the traffic goes on (before, a flush waited for a batch that
    wrote every run changed so far, which busy runs never allowed); the next owner restores
    from it."""
    records = _corpus(16, runs=12, per_run=20)
    async with stage.member(replace(_config("w1"), changelog_flush_runs=1)) as w1:
        w1._flush_idle = _no_flush
        await w1.member.assign(_tps())
        for first in range(0, 180, 12):
            stage.publish(records[first : first + 12])
            await until(stage.decided, "decided by w1")
        for p in range(PARTITIONS):  # past the restore's own checkpoint (offset 0)
            points = [r for r in stage.kafka.visible(STATE, p) if r.key == CHECKPOINT_KEY]
            point = decode_checkpoint(points[-1].body())
            assert point is not None and point.next_offset > 0, f"partition {p}"
    second = await _restart(stage, "w2", chunks=[records[180:]])
    assert second["changelog"] == PARTITIONS and second["replay"] == 0
    _clean(stage.account())


async def test_a_changelog_that_disagrees_with_the_log_is_replaced_by_a_replay(
    stage: Stage,
) -> None:
    """The changelog says more than the log holds (the log was deleted and written again):
    the new owner replays the log, and writes the changelog anew from it."""
    stage.publish(_corpus(13)[:90])
    await _restart(stage, "w1")
    for p in range(PARTITIONS):  # the log as if emptied: the checkpoint points past its end
        stage.kafka.logs[(LOG, p)] = []
        stage.kafka.logs[(DEAD, p)] = []
        stage.kafka.committed.pop((GROUP, ADMISSION, p), None)
    again = await _restart(stage, "w2")
    assert again["replay"] == PARTITIONS and again["changelog"] == 0
    after = await _restart(stage, "w3")
    assert after["changelog"] == PARTITIONS


async def test_a_record_the_log_will_not_take_becomes_unrecordable(stage: Stage) -> None:
    """Three failed commits in a row put the partition in one-record transactions, and the
    record whose event is larger than the log takes is dead-lettered as record_unrecordable;
    the records after it are still decided."""
    run = "t8-run"
    big = envelope(run, 0, [create("s"), components("s", "x" * 3000)], "s")  # over 2000 bytes
    after = envelope(run, 1, [create("s2")], "s2")
    records = [
        Published(run, run.encode(), orjson.dumps(r), r["envelope"]["correlationId"])
        for r in (big, after)
    ]
    async with stage.member(_config("w1"), batch_bytes=2000) as w1:
        await w1.member.assign(_tps())
        stage.publish(records)
        await until(lambda: stage.outcomes() >= 2, "both records have an outcome")
    [letter] = [
        orjson.loads(r.body()) for p in range(PARTITIONS) for r in stage.kafka.visible(DEAD, p)
    ]
    assert letter["code"] == "record_unrecordable" and letter["original"]["base64"] == ""
    [event] = [
        orjson.loads(r.body()) for p in range(PARTITIONS) for r in stage.kafka.visible(LOG, p)
    ]
    assert event["sequence"] == 0 and event["causationId"] == after["envelope"]["correlationId"]


@pytest.mark.parametrize("transactions", ["on", "off"])
async def test_a_bounded_state_cache_decides_as_the_unbounded_one(
    stage: Stage, transactions: str, tmp_path: Any
) -> None:
    """Issue 15: the validator keeps at most ``cache_runs`` run states in memory and the other
    clean ones in its local store (app.shell.worker.validator_store), loaded back when a record for
    them comes. With a bound far below the runs in play (one state per partition), every
    record still gets exactly the outcome the unbounded validator gives (the oracle's
    accounting: a state lost on the way would restart its run at sequence 0), states went out
    and came back, and a restart restores and evicts again. Fails with the loads switched off
    (the evicted runs then decide as new runs)."""
    config = replace(
        _config("w1", transactions), cache_runs=PARTITIONS, state_dir=str(tmp_path / "states")
    )
    records = _corpus(21, runs=12, per_run=20)
    async with stage.member(config) as w1:
        await w1.member.assign(_tps())
        await until(lambda: len(w1.partitions) == PARTITIONS, "w1 restored")
        for i in range(0, len(records), 20):
            stage.publish(records[i : i + 20])
            await until(stage.decided, "every record decided")
        assert w1.evictions > 0 and w1.loads > 0, (w1.evictions, w1.loads)
        held = sum(owned.held for owned in w1.partitions.values())
        in_memory = sum(len(owned.runs) for owned in w1.partitions.values())
        assert held == 12 and in_memory < held  # every run held, most of them out of memory
    _clean(stage.account())
    async with stage.member(replace(config, transactional_id="app-validator-w2")) as w2:
        await w2.member.assign(_tps())
        await until(lambda: len(w2.partitions) == PARTITIONS, "w2 restored")
        assert sum(owned.held for owned in w2.partitions.values()) == 12
        more = _corpus(22, runs=4, per_run=10) + records[:20]  # old runs again (duplicates)
        stage.publish(more)
        await until(stage.decided, "every record decided by w2")
        assert w2.loads > 0
    _clean(stage.account())
