"""``a2ui-stream bench pipeline`` at CI size against the harness broker: a few hundred
envelopes per pass, every kind of pass (the default roles, each role alone, the transactional
pass-through, the raw produce+consume), one round, then two workers. Asserts the output's shape
and its invariants (every published record has exactly one outcome); never a duration."""

from __future__ import annotations

import argparse
import asyncio

import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient

from app.devtools import bench_pipeline as bench
from app.devtools.bench_output import emit
from app.shell.cli.broker import Broker

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.needs_transactions]

ROLES = ("validator,projector", "validator", "projector")


def _options(argv: list[str]) -> bench.Options:
    parser = argparse.ArgumentParser()
    bench.register(parser.add_subparsers())
    args = parser.parse_args(["pipeline", *argv])
    assert args.func is bench.run
    return bench.Options(
        records=args.records,
        runs=args.runs,
        partitions=args.partitions,
        rate=args.rate,
        rounds=args.rounds,
        workers=args.workers,
        roles=tuple(args.roles),
        latency_records=args.latency_records,
        worker_producer=args.worker_producer,
    )


def test_bench_pipeline_options() -> None:
    opts = _options([])
    assert opts.roles == (bench.DEFAULT_ROLES,) and opts.workers == 1 and opts.rounds == 3
    opts = _options(["--roles", *ROLES, "--workers", "2", "--latency-records", "0"])
    assert opts.roles == ROLES and opts.workers == 2 and opts.latency_records == 0
    assert not opts.worker_producer and _options(["--worker-producer"]).worker_producer


def _check(result: dict, opts: bench.Options) -> None:
    ceilings = ["passthrough", *(["passthrough-worker"] if opts.worker_producer else []), "raw"]
    kinds = [*sorted(opts.roles, key=lambda r: "validator" not in r), *ceilings]
    assert result["benchmark"] == "pipeline" and result["workers"] == opts.workers
    assert list(result["envelopes_per_second"]) == kinds
    assert len(result["passes"]) == len(kinds) * opts.rounds
    for one in result["passes"]:
        # exactly one outcome per published record, none twice (read_committed)
        assert one["outcomes"] == one["published"] and one["duplicates"] == 0
        assert one["envelopes_per_second"] > 0 and one["elapsed_s"] > 0
        if one["kind"] == "projector":
            # it replays the validator's log: the timed records plus the latency records
            assert one["published"] == opts.records + opts.latency_records
        else:
            assert one["published"] == opts.records
        if one["kind"] in ("validator,projector", "validator"):
            assert one["dead_letters"] == 0  # every record is the positive example
            assert one["log_records"] == opts.records + opts.partitions + opts.latency_records
        if one["kind"] != "projector" and opts.latency_records:
            assert one["latency_records"] == opts.latency_records
            assert 0 < one["latency_ms_p50"] <= one["latency_ms_p99"] <= one["latency_ms_max"]
            if one["kind"] != "raw":  # offered once the processes were done with the backlog
                assert one["settle_s"] is not None and one["settle_s"] > 0
                assert one["cpu_us_per_envelope_at_rate"] > 0
        if one["kind"] in ("validator,projector", "validator", "passthrough", "passthrough-worker"):
            assert one["cpu_us_per_envelope"] > 0  # the processes' CPU until quiet
    for kind in kinds:
        if kind not in ("projector", "raw"):
            assert len(result["cpu_us_per_envelope"][kind]["per_round"]) == opts.rounds
    for kind in [k for k in kinds if k not in ceilings]:
        for ceiling in ceilings:
            ratio = result["ratios"][f"{kind} / {ceiling}"]
            assert len(ratio["per_round"]) == opts.rounds and ratio["median"] > 0
    load = result["load_average"]
    assert len(load["start"]) == len(load["end"]) == 3


async def test_bench_pipeline_at_ci_size(
    broker: Broker, capsys: pytest.CaptureFixture[str]
) -> None:
    opts = _options(
        ["--records", "300", "--rounds", "1", "--partitions", "2", "--roles", *ROLES]
        + ["--latency-records", "40", "--rate", "400", "--worker-producer"]
    )
    result = await bench.measure(opts, broker)
    _check(result, opts)
    assert emit(result, False, bench.table) == 0
    out = capsys.readouterr().out
    assert "ceiling a: transactional pass-through" in out and "load average" in out
    assert "ceiling a2: the same, one producer per process (KIP-447)" in out
    assert "envelopes/s offered (until quiet again, idle included)" in out
    assert "quiet after the drain" in out
    assert "CPU of the worker (or pass-through) processes per envelope" in out
    assert emit(result, True, bench.table) == 0
    assert orjson.loads(capsys.readouterr().out)["records"] == 300


async def _bench_topics(bootstrap: str) -> set[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return {t for t in await admin.list_topics() if t.startswith("bench")}
    finally:
        await admin.close()


async def test_bench_pipeline_two_workers(broker: Broker) -> None:
    """Also: each pass's topics are deleted after it (left behind, they slowed every later
    pass on the same broker)."""
    before = await _bench_topics(broker.bootstrap)
    opts = _options(
        ["--records", "300", "--rounds", "1", "--workers", "2", "--latency-records", "0"]
    )
    _check(await bench.measure(opts, broker), opts)
    left = await _bench_topics(broker.bootstrap) - before
    for _ in range(60):  # a deleted topic may be listed until the metadata catches up
        if not left:
            break
        await asyncio.sleep(0.5)
        left = await _bench_topics(broker.bootstrap) - before
    assert not left
