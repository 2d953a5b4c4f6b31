"""``a2ui-stream bench scale`` at CI size against the harness broker: 2,000 envelopes, one
SIGKILL restart (and the SIGTERM one), two workers, a few reads. Asserts the output's shape
and that its figures are positive and agree with each other; never a duration."""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson
import pytest

from app.devtools import bench_scale as bench
from app.devtools.bench_output import emit
from app.shell.cli.broker import Broker

pytestmark = [pytest.mark.broker, pytest.mark.slow]


async def test_bench_scale_at_ci_size(
    broker: Broker, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    parser = argparse.ArgumentParser()
    bench.register(parser.add_subparsers())
    args = parser.parse_args(
        ["scale", "--envelopes", "2000", "--restarts", "1", "--reads", "10", "--read-rounds", "2"]
        + ["--keep-logs", str(tmp_path / "logs"), "--cpu-windows", "2"]
    )
    args.max_rss_mb = 2000
    result = await bench.measure(args, broker)
    assert result["benchmark"] == "scale" and list(result["designs"]) == ["default"]
    kept = sorted(p.name for p in (tmp_path / "logs" / "default").iterdir())
    assert kept == ["worker-a.log", "worker-b.log"]
    assert result["code"]
    d = result["designs"]["default"]

    # phase 1: the curve ends at N; the workers hold what was published (and every delete
    # answered 404 on every worker before each point: the bench waits for it)
    assert d["stopped"] == "reached --envelopes 2,000" and d["envelopes_published"] == 2000
    assert [p["envelopes"] for p in d["curve"]] == [1000, 2000]
    # a decided run is never "not found" (before RunIndex.read_to_end read to the high
    # watermark, a cancel right after the validator's commit answered 404 in 2 of 4 CI runs)
    assert d["missing_reads"] == 0
    for point in d["curve"]:
        assert point["rss_mb"] > 0 and point["cpu_us_per_envelope"] > 0
        assert 0 <= point["http_runs"] <= point["live_runs"] and point["data_dir_mb"] >= 0
        assert point["events_recorded"] >= point["live_events"] > 0
        assert point["validator_run_states"] >= point["live_runs"]
    assert d["rss_kb_per_envelope"] is not None

    # phase 2: one SIGKILL and one SIGTERM restart, each ready by both signals
    assert [r["signal"] for r in d["restarts"]] == ["SIGKILL", "SIGTERM"]
    for restart in d["restarts"]:
        assert 0 < restart["web_s"] <= restart["ready_s"]
        assert restart["ready_s"] == max(restart["reads_s"], restart["admission_s"])
        assert restart["validator_restored_s"] > 0 and restart["quiet_s"] > 0
        assert restart["rss_mb_after"] > 0 and restart["exited_by_itself"]

    # phases 3-4: two workers split the partitions
    one, two = d["one_worker"], d["two_workers"]
    assert one["partitions"] == list(range(6)) and one["cpu"]["cpu_us_per_envelope"] > 0
    a, b = two["workers"]
    assert sorted(a["partitions"] + b["partitions"]) == list(range(6))
    assert a["partitions"] and b["partitions"]
    for w in (a, b):
        assert 0 <= w["http_runs"] <= two["expected"]["live_runs"] and w["rss_mb"] > 0
    assert 0 < a["validator_run_states"] + b["validator_run_states"] <= one["validator_run_states"]
    assert two["cpu"]["cpu_us_per_envelope"] > 0 and two["join"]["ready_s"] > 0
    # what each worker did in the CPU windows: both decided batches, in commits
    assert [w["worker"] for w in one["cpu"]["workers"]] == ["a"]
    assert [w["worker"] for w in two["cpu"]["workers"]] == ["a", "b"]
    for window in (one["cpu"], two["cpu"]):
        # two windows each: the median one is reported, both figures beside it
        assert window["windows"] == 2 and len(window["windows_cpu_us_per_envelope"]) == 2
        assert window["cpu_us_per_envelope"] == min(window["windows_cpu_us_per_envelope"])
        assert all(w["validator_commits"] >= w["validator_batches"] > 0 for w in window["workers"])
        assert window["validator_commits_per_1k_envelopes"] > 0
    assert two["join"]["validator_restored_s"] > 0
    assert two["restart_one"]["ready_s"] > 0 and len(two["restarts_one"]) == 1
    # the windows again at a fixed rate below saturation (--cpu-rate, default 2,000/s)
    for paced in (one["cpu_paced"], two["cpu_paced"]):
        assert paced["rate_offered"] == 2000 and paced["windows"] == 2
        assert paced["cpu_us_per_envelope"] > 0 and paced["envelopes"] >= 1000

    # phase 5: reads of both kinds, own and other, in both rounds
    for kind in bench.READ_KINDS:
        for loc in ("own", "other"):
            figure = d["reads"][kind][loc]
            assert figure["requests"] == 2 * 2 * 10  # rounds x workers x reads
            assert 0 < figure["p50_ms"] <= figure["p99_ms"] and len(figure["rounds"]) == 2

    # the mix did cancel and delete runs, through the product's own paths
    final = d["final"]
    assert final["runs_cancelled"] > 0 and final["runs_deleted"] > 0

    # both outputs: the table and one JSON object
    assert emit(result, False, bench.table) == 0
    assert "restart to ready, SIGKILL" in capsys.readouterr().out
    assert emit(result, True, bench.table) == 0
    assert (
        orjson.loads(capsys.readouterr().out)["designs"]["default"]["envelopes_published"] == 2000
    )
