"""The validator's changelog flush: what a committed batch plan writes to the run-state changelog.

Role: pure values for the shell's flush (the Kafka Streams changelog of a task's state store).
With a changelog topic (``Topics.changelog``), at most once a commit interval and in the
partition's transaction, the shell writes ``changelog_sends`` (the latest state of every run
changed since the last flush) beside a plan's sends and, once they are acknowledged, the
partition's ``checkpoint`` (app.core.runlog.run_snapshot), which names where the log and the
dead letters ended (``advanced``); app.core.admission.validator_restore rebuilds a partition
from them. The plan itself is app.core.admission.validator_batch.

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from collections.abc import Mapping

from app.core.admission.validator_batch import PartitionPlan, PartitionState, Send
from app.core.runlog.run_snapshot import CHECKPOINT_KEY, Checkpoint, encode_checkpoint, encode_state
from app.core.runlog.run_state import RunState

__all__ = ["advanced", "changelog_sends", "checkpoint"]


def changelog_sends(topic: str, partition: int, runs: Mapping[str, RunState]) -> list[Send]:
    """The changelog records of a plan: the latest state of each run it changed (key runId),
    on the partition's own number (co-partitioned)."""
    return [
        Send(topic, partition, run_id.encode(), encode_state(run), ())
        for run_id, run in runs.items()
    ]


def advanced(
    state: PartitionState, plan: PartitionPlan, ends: Mapping[str, int]
) -> tuple[int, int]:
    """Where the outputs of the records after ``plan`` will be, in the log and the dead
    letters, once it is committed: past ``ends`` (per topic, "log" / "deadletter": the offset
    after the last record batch the plan appended there, from the broker's answer), unless
    some outputs past its offset are written already (``seen``: they stay in the tail)."""
    if plan.seen:
        return state.log_from, state.dead_from
    return (
        max(state.log_from, ends.get("log", 0)),
        max(state.dead_from, ends.get("deadletter", 0)),
    )


def checkpoint(
    topic: str, state: PartitionState, plan: PartitionPlan, ends: Mapping[str, int]
) -> Send:
    """The partition's changelog checkpoint after ``plan`` (``advanced``): written once the
    plan's other records are acknowledged, in its transaction (app.core.runlog.run_snapshot)."""
    log_from, dead_from = advanced(state, plan, ends)
    point = Checkpoint(plan.partition, plan.next_offset, log_from, dead_from)
    return Send(topic, plan.partition, CHECKPOINT_KEY, encode_checkpoint(point), ())
