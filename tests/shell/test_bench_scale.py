"""``a2ui-stream bench scale``: its options, the mix (decided by the real admission core as the
bench expects), the checkpoints, the metrics it reads, the state gauges it needs, and the
table. The figures themselves need a broker (tests/integration/test_bench_scale.py) and are
for people, never asserted."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from app.core.admission.decision import Admitted, Deduplicated, Refused, decide
from app.core.admission.payload_rules import PayloadRules
from app.core.admission.policy import HostPolicy
from app.core.runlog.keys import partition_for_run
from app.core.runlog.run_state import RunState
from app.devtools import bench_scale as bench
from app.devtools.bench_scale.workers import by_partition, decided_count
from app.shell.schema_files import load_schema_documents
from app.shell.worker.faust_loops import state_metrics

NOW = "2026-01-01T00:00:00Z"


def test_bench_scale_registers_its_options_with_the_issue_defaults() -> None:
    parser = argparse.ArgumentParser()
    bench.register(parser.add_subparsers())
    args = parser.parse_args(["scale"])
    assert (args.json, args.envelopes, args.minutes, args.max_rss_mb) == (
        False,
        1_000_000,
        10.0,
        None,
    )
    assert (args.restarts, args.reads, args.read_rounds, args.designs) == (3, 200, 3, ["default"])
    assert args.func is bench.run
    args = parser.parse_args(["scale", "--json", "--envelopes", "2000", "--designs", "default"])
    assert (args.json, args.envelopes, args.designs) == (True, 2000, ["default"])


def test_an_unknown_design_or_a_too_small_size_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = argparse.ArgumentParser()
    bench.register(parser.add_subparsers())
    assert bench.run(parser.parse_args(["scale", "--designs", "nope"])) == 2
    assert "unknown design nope; known: default" in capsys.readouterr().err
    assert bench.run(parser.parse_args(["scale", "--envelopes", "10"])) == 2
    assert "--envelopes >= 1000" in capsys.readouterr().err


def test_checkpoints_step_1_2_5_up_to_the_total() -> None:
    assert bench.checkpoints(1_000_000) == [
        5_000,
        10_000,
        20_000,
        50_000,
        100_000,
        200_000,
        500_000,
        1_000_000,
    ]
    assert bench.checkpoints(2000) == [1000, 2000]
    assert bench.checkpoints(1000) == [1000]
    assert bench.checkpoints(350_000)[-2:] == [200_000, 350_000]


def test_every_record_of_the_mix_is_decided_as_the_bench_expects() -> None:
    """The bench's expected state (events per run, the last sequence of each partition) rests
    on this: creates and updates are admitted at the sequence it predicts, refusals refused,
    re-sent records deduplicated."""
    rules = PayloadRules.from_documents(load_schema_documents())
    policy = HostPolicy()
    mix = bench.Mix(bench.MixConfig().for_size(4000), 6, "t0")
    records, finished = mix.take(4000)
    states: dict[str, RunState | None] = {}
    kinds: Counter[str] = Counter()
    for rec in records:
        outcome = decide(
            orjson.loads(rec.value), states.get(rec.run.run_id), policy, rules, now=NOW
        )
        kinds[rec.kind] += 1
        if rec.kind in ("create", "update"):
            assert isinstance(outcome, Admitted), (rec.kind, outcome)
            assert outcome.event["sequence"] == rec.sequence
            states[rec.run.run_id] = outcome.state
        elif rec.kind == "refused":
            assert isinstance(outcome, Refused)
        else:
            assert isinstance(outcome, Deduplicated)
    assert kinds["refused"] and kinds["duplicate"] and kinds["create"] > len(states) - 1
    for run in mix.runs:
        assert run.partition == partition_for_run(run.run_id, 6)
        assert run.events == sum(1 for r in records if r.run is run and r.sequence is not None)
    fates = Counter(run.fate for run in finished)
    assert fates["cancel"] and fates["delete"] and fates["open"] > fates["cancel"]
    assert all(run.sent == run.quota for run in finished)
    # a readiness probe's envelope (POSTed as is) is admitted on the run's next sequence
    run = next(r for r in mix.active if r.created)
    record = {"runId": run.run_id, "envelope": mix.envelope(run)}
    outcome = decide(record, states[run.run_id], policy, rules, now=NOW)
    assert isinstance(outcome, Admitted) and outcome.event["sequence"] == run.events


def test_a_small_size_keeps_few_runs_open_so_that_runs_finish() -> None:
    assert bench.MixConfig().for_size(1_000_000).active_runs == 400
    assert bench.MixConfig().for_size(2000).active_runs == 20
    assert bench.MixConfig().for_size(100).active_runs == 4


def test_the_metrics_it_reads() -> None:
    text = "\n".join(
        [
            "# HELP a2ui_admitted_total Admission records recorded.",
            "a2ui_admitted_total 90",
            'a2ui_refused_total{code="envelope_invalid"} 3',
            'a2ui_refused_total{code="validation_error"} 2',
            "a2ui_deduplicated_total 4",
            "a2ui_redelivered_skipped_total 1",
            'a2ui_validator_run_states{partition="0"} 7',
            'a2ui_validator_run_states{partition="4"} 2',
            "a2ui_http_runs 12",
        ]
    )
    metrics = bench.parse_metrics(text)
    assert decided_count(metrics) == 100
    assert by_partition(metrics, "a2ui_validator_run_states") == {0: 7.0, 4: 2.0}
    assert metrics["a2ui_http_runs"] == 12


def test_the_state_gauges_count_what_each_loop_holds() -> None:
    validator = SimpleNamespace(partitions={3: SimpleNamespace(held=2), 1: SimpleNamespace(held=0)})
    projector = SimpleNamespace(held=3)  # surfaces in its cache
    lines = state_metrics(validator, projector, frozenset({"validator", "projector"}))  # type: ignore[arg-type]
    metrics = bench.parse_metrics("\n".join(lines))
    assert by_partition(metrics, "a2ui_validator_run_states") == {1: 0.0, 3: 2.0}
    assert metrics["a2ui_projector_surfaces"] == 3
    only = state_metrics(validator, projector, frozenset({"projector"}))  # type: ignore[arg-type]
    assert not any("a2ui_validator_run_states{" in line for line in only)


def test_rss_slope_is_kb_per_envelope() -> None:
    points = [{"envelopes": 1000, "rss_mb": 100.0}, {"envelopes": 3000, "rss_mb": 120.0}]
    assert bench.rss_slope_kb(points) == pytest.approx(20 * 1024 / 2000)
    assert bench.rss_slope_kb(points[:1]) is None


def _result() -> dict[str, Any]:
    point = {
        "envelopes": 2000,
        "rss_mb": 90.0,
        "data_dir_mb": 0.5,
        "http_runs": 50,
        "cpu_us_per_envelope": 100.0,
    }
    restart = {
        "web_s": 0.6,
        "reads_s": 9.0,
        "admission_s": 9.5,
        "validator_restored_s": 9.4,
        "ready_s": 9.5,
        "quiet_s": 12.0,
        "stopped_s": 0.01,
        "exited_by_itself": True,
        "rss_mb_before": 90.0,
        "rss_mb_after": 88.0,
        "rss_mb_peak_during": 95.0,
    }
    state = {
        "http_runs": 50,
        "validator_run_states": 50,
        "projector_surfaces": 80,
        "data_dir_mb": 1.5,
    }
    worker = {
        **state,
        "worker": "a",
        "rss_mb": 91.0,
        "partitions": [0, 2, 4],
        "share_of_one": {
            "rss_mb": 1.0,
            "http_runs": 1.0,
            "validator_run_states": 0.5,
            "projector_surfaces": None,
            "data_dir_mb": 1.0,
        },
    }
    read = {"p50_ms": 0.7, "p99_ms": 1.5, "rounds": [[0.7, 1.4], [0.6, 1.5]], "requests": 40}
    design = {
        "envelopes_published": 2000,
        "stopped": "reached --envelopes 2,000",
        "missing_reads": 0,
        "envelopes_per_second": 800.0,
        "curve": [{**point, "envelopes": 1000, "rss_mb": 80.0}, point],
        "rss_kb_per_envelope": 10.2,
        "rss_mb_at_1m": None,
        "rss_mb_at_1m_extrapolated": 9_980.0,
        "rss_ratio_last_to_50k": None,
        "restarts": [
            {**restart, "signal": "SIGKILL"},
            {**restart, "signal": "SIGTERM", "ready_s": 3.4, "exited_by_itself": False},
        ],
        "one_worker": {
            **state,
            "rss_mb": 90.0,
            "cpu": {
                "cpu_us_per_envelope": 60.0,
                "windows": 3,
                "windows_cpu_us_per_envelope": [70.0, 60.0, 50.0],
            },
            "cpu_paced": {"cpu_us_per_envelope": 50.0, "rate_offered": 2000.0},
        },
        "two_workers": {
            "join": {"ready_s": 3.3, "validator_restored_s": 3.0, "quiet_s": 5.0},
            "workers": [worker, {**worker, "worker": "b", "partitions": [1, 3, 5]}],
            "cpu": {
                "cpu_us_per_envelope": 90.0,
                "windows": 3,
                "windows_cpu_us_per_envelope": [100.0, 90.0, 80.0],
            },
            "restart_one": {"ready_s": 9.7},
            "restarts_one": [
                {"ready_s": 9.7},
                {
                    "ready_s": 70.2,
                    "refusals": {
                        "poll of partition 0: 503 a2ui-stream.unavailable: moved": [2.0, 69.8, 900],
                        "poll of partition 3: 0": [0.1, 1.5, 30],
                    },
                },
                {"ready_s": 10.1},
            ],
            "cpu_paced": {"cpu_us_per_envelope": 55.0, "rate_offered": 2000.0},
        },
        "reads": {"poll": {"own": read, "other": read}, "log": {"own": read, "other": read}},
    }
    return {
        "envelopes_requested": 2000,
        "envelopes_default": False,
        "minutes": 10.0,
        "max_rss_mb": 4000,
        "partitions": 6,
        "broker": "Apache Kafka",
        "machine": "x86_64",
        "load_average_1m_before": 0.2,
        "load_average_1m_after": 0.4,
        "record_bytes_mean": 514.0,
        "mix": {
            "active_runs": 20,
            "envelopes_per_run": (10, 90),
            "surfaces_per_run": (1, 3),
            "cancelled": 0.1,
            "deleted": 0.05,
            "refused": 0.01,
            "duplicated": 0.01,
        },
        "code": "a38fa6a",
        "columns": {"default": "the worker as built"},
        "designs": {"default": design},
    }


def test_the_table_has_a_column_per_design_and_the_targets() -> None:
    text = bench.table(_result())
    lines = text.splitlines()
    header = next(line for line in lines if "target (issue 15)" in line)
    assert "default" in header
    assert "column default: the worker as built" in text and "(a38fa6a)" in lines[0]
    assert "(a shared machine: timings are noisy)" in lines[0]
    for label in (
        "1,000",
        "2,000",
        "RSS per envelope (slope)",
        "restart to ready, SIGKILL",
        "restart to ready, SIGTERM",
        "worker a of two",
        "worker b of two",
        "other's partition",
    ):
        assert any(label in line for line in lines), label
    assert any("9.5 s" in line and "<= 15 s" in line for line in lines)
    assert any("9,980 MB (extrapolated)" in line for line in lines)
    # the CPU windows: median (range) of each, the ratio of the medians and of every pair
    assert any("two workers together" in line and "90 µs (80-100)" in line for line in lines)
    assert any(
        "two / one, median windows" in line and "1.50 (pairs 1.14-2.00)" in line for line in lines
    )
    # the paced windows: their own rows, the ratio at that rate
    assert any("at 2,000/s offered" in line and "50 µs / 55 µs" in line for line in lines)
    assert any("two / one at that rate" in line and "1.10" in line for line in lines)
    # every restart of one of two, median (range): an outlier shows
    assert any("one of two" in line and "10.1 s (9.7-70.2)" in line for line in lines)
    # and what the slowest one was refused with, the refusal seen last first
    waited = [line for line in lines if "the slowest (70.2 s) was refused" in line]
    assert len(waited) == 2
    assert "partition 0: 503" in waited[0] and "2.0-69.8 s, 900x" in waited[0]
    assert "partition 3: 0" in waited[1]
    assert any("(did not exit: SIGKILLed)" in line for line in lines)
    assert any("100%; 100% / 50% / n/a" in line and "each <= 60%" in line for line in lines)
    # a second design lines up as a second column
    two = _result()
    two["designs"]["owner"] = two["designs"]["default"]
    two["columns"]["owner"] = "reads served by the owner"
    header = next(line for line in bench.table(two).splitlines() if "target" in line)
    assert header.index("default") < header.index("owner") < header.index("target")


def test_refusals_are_noted_only_while_a_restart_is_timed() -> None:
    from app.devtools.bench_scale.deployment import Bench

    b = Bench.__new__(Bench)
    b.refusals = None
    b.refused("poll of partition 1", 503, b'{"error":"x"}')
    assert b.note_refusals(time.monotonic()) == {}
    body = b'{"error":"a2ui-stream.unavailable","message":"partition 1 has no owner yet"}'
    b.refused("poll of partition 1", 503, body)
    b.refused("poll of partition 1", 503, body)
    b.refused("admission on partition 2", 0, b"")
    noted = b.note_refusals(None)
    key = "poll of partition 1: 503 a2ui-stream.unavailable: partition 1 has no owner yet"
    assert set(noted) == {key, "admission on partition 2: 0"}
    assert noted[key][2] == 2 and noted[key][0] <= noted[key][1]
    b.refused("poll of partition 1", 503, body)  # not timed any more: not noted
    assert b.refusals is None
