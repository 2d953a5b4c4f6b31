"""``a2ui-stream bench projection``: its options, and its parts on small inputs (the figures
themselves are for people, never asserted)."""

from __future__ import annotations

import argparse

import jsonpatch

from app.core.admission.payload_rules import PayloadRules
from app.core.projection.patch import verified_diff
from app.devtools import bench_projection as bench
from app.shell.schema_files import load_schema_documents


def test_bench_projection_registers_its_options() -> None:
    parser = argparse.ArgumentParser()
    bench.register(parser.add_subparsers())
    args = parser.parse_args(["projection", "--json", "--updates", "7"])
    assert args.json is True and args.updates == 7 and args.func is bench.run
    assert args.no_produce is False
    assert parser.parse_args(["projection", "--no-produce"]).no_produce is True


def test_bench_projection_table_has_the_load_average() -> None:
    result = bench.measure(3)  # no produce: no broker
    assert "fanout_produced" not in result
    assert len(result["load_average"]["start"]) == len(result["load_average"]["end"]) == 3
    assert "load average (1, 5, 15 min)" in bench.table(result)


def test_bench_projection_parts_on_small_inputs() -> None:
    rules = PayloadRules.from_documents(load_schema_documents())
    v2_events = bench.v2_events(12, rules)
    v2 = bench.surface_changes(v2_events)
    v1 = bench.surface_changes(bench.v1_events(12, rules))
    for changes in (v2, v1):
        figures = bench.measure_bytes(changes)
        assert figures["updates"] == 12 and figures["delta_frames"] == 12
        assert figures["delta_stream_bytes"] < figures["full_stream_bytes"]
    pairs = [(c.old.content, c.new.content) for c in v1 if c.old is not None]
    pairs += bench.random_pairs(200)
    bad = bench.invalid_patches(pairs, verified_diff, jsonpatch)
    assert bad == {"jsonpatch_apply": 0, "ours_apply": 0, "unverified": 0}
    rows = bench.measure_fanout(v2_events)
    assert {(r["subscribers"], r["mode"]) for r in rows} == {
        (n, m) for n in bench.FANOUT for m in ("delta", "full")
    }
    assert all(r["frames"] == [r["mode"]] for r in rows)


def test_the_fanout_step_is_the_projectors_plan_of_one_update_for_subscribers_in_sync() -> None:
    events = bench.v2_events(5, PayloadRules.from_documents(load_schema_documents()))
    for mode, reason in (("delta", "delta"), ("full", "subscription")):
        step = bench.fanout_step(events, 30, mode)
        first, again = step.plan(), step.plan()  # the cache is read, never written: repeatable
        assert first == again
        assert [s.subscriber_id for s in first.sends] == [f"s{i}" for i in range(30)]
        assert {(s.kind, s.reason) for s in first.sends} == {(mode, reason)}
        assert len({s.value for s in first.sends}) == 1  # one encoding shared by all
        (kept,) = first.runs.values()
        assert len(kept.cursors) == 30
