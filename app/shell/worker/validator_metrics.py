"""What the validator reports: its lag per partition and its ``a2ui_validator_*`` metrics.

Shell module, read by ``app.shell.worker.validator_loop`` (``ValidatorLoop.lag`` and
``ValidatorLoop.render_metrics``, which the worker's ``/metrics`` serves:
``app.shell.worker.metrics``). Each reads the loop's counters and partitions, never a payload
value or a runId. It imports nothing of the app; the loop's type only for annotations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.shell.worker.validator_loop import ValidatorLoop

__all__ = ["lag", "render_metrics"]


def lag(loop: ValidatorLoop) -> dict[int, int]:
    """Records not yet processed, per owned and restored admission partition (high
    watermark minus the next offset to decide)."""
    consumer = loop.consumer
    if consumer is None:
        return {}
    lags: dict[int, int] = {}
    for tp in consumer.assignment():
        high = consumer.highwater(tp)
        owned = loop.partitions.get(tp.partition)
        if high is not None and owned is not None:
            lags[tp.partition] = max(0, high - owned.next_offset)
    return lags


def render_metrics(loop: ValidatorLoop) -> list[str]:
    """The validator's ``a2ui_validator_*`` metrics, in the Prometheus text format."""
    return [
        "# HELP a2ui_validator_restores_total Partition restores, by way: from the run-state "
        "changelog, or by replaying the log.",
        "# TYPE a2ui_validator_restores_total counter",
        *(f'a2ui_validator_restores_total{{way="{k}"}} {v}' for k, v in loop.restores.items()),
        "# HELP a2ui_validator_restore_records_total Records read by restores, by topic.",
        "# TYPE a2ui_validator_restore_records_total counter",
        *(
            f'a2ui_validator_restore_records_total{{topic="{k}"}} {v}'
            for k, v in loop.restored_records.items()
        ),
        "# HELP a2ui_validator_fenced_total Commits refused because another member had "
        "taken the partition over (its producer was fenced).",
        "# TYPE a2ui_validator_fenced_total counter",
        f"a2ui_validator_fenced_total {loop.fenced}",
        "# HELP a2ui_validator_run_states_in_memory Run states held in memory, of all held "
        "(A2UI_STREAM_VALIDATOR_CACHE_RUNS bounds it; the rest wait in the local store).",
        "# TYPE a2ui_validator_run_states_in_memory gauge",
        "a2ui_validator_run_states_in_memory "
        f"{sum(len(owned.runs) for owned in loop.partitions.values())}",
        "# HELP a2ui_validator_run_state_moves_total Run states moved out of memory to "
        "the local store (evicted) and back (loaded).",
        "# TYPE a2ui_validator_run_state_moves_total counter",
        f'a2ui_validator_run_state_moves_total{{way="evicted"}} {loop.evictions}',
        f'a2ui_validator_run_state_moves_total{{way="loaded"}} {loop.loads}',
        "# HELP a2ui_validator_batches_total Record batches decided.",
        "# TYPE a2ui_validator_batches_total counter",
        f"a2ui_validator_batches_total {loop.batches}",
        "# HELP a2ui_validator_commits_total Partition commits of those batches (one "
        "transaction each, or one produce-then-commit without transactions).",
        "# TYPE a2ui_validator_commits_total counter",
        f"a2ui_validator_commits_total {loop.commits}",
        "# HELP a2ui_validator_partitions Admission partitions this validator decides for.",
        "# TYPE a2ui_validator_partitions gauge",
        f"a2ui_validator_partitions {len(loop.partitions)}",
    ]
