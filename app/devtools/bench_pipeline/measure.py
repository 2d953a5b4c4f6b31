"""The run: rounds of interleaved passes on fresh topics, and the figures (medians, ratios to
the ceilings of the same round) as one JSON object.
"""

from __future__ import annotations

import os
import platform
import statistics
import tempfile
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.devtools.bench_output import (
    code_version,
    delete_topics,
    load_average,
)
from app.devtools.bench_pipeline.passes import PassSetup, live_pass, projector_pass, raw_pass
from app.devtools.bench_pipeline.procs import Processes
from app.devtools.bench_pipeline.records import (
    CEILINGS,
    PASSTHROUGH,
    PASSTHROUGH_WORKER,
    RAW,
    TARGET_PER_SECOND,
    TARGET_RATIO,
    TARGET_VALIDATOR_PER_SECOND,
    Options,
    say,
)
from app.shell.cli.broker import Broker
from app.shell.settings import Settings, load_settings
from app.shell.worker.kafka_io import read_topic
from app.shell.worker.topics_admin import desired_for, ensure_topics

__all__ = ["measure"]


def _kinds(opts: Options) -> list[str]:
    """Validator-carrying role sets first: a projector pass replays a validator pass's log."""
    roles = sorted(opts.roles, key=lambda r: "validator" not in r.split(","))
    ceilings = [PASSTHROUGH, PASSTHROUGH_WORKER] if opts.worker_producer else [PASSTHROUGH]
    return roles + ceilings + [RAW]


def _spread(values: list[float]) -> dict[str, Any]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "per_round": values,
    }


async def measure(opts: Options, broker: Broker) -> dict[str, Any]:
    load_start = load_average()
    token = uuid.uuid4().hex[:8]
    base = load_settings()
    kinds = _kinds(opts)
    if "projector" in kinds and not any("validator" in k.split(",") for k in opts.roles):
        raise ValueError("--roles projector replays a validator pass's log: list one with it")
    passes: list[dict[str, Any]] = []
    source: list[Any] = []
    with tempfile.TemporaryDirectory(prefix="a2ui-bench-") as tmp_dir:
        for rnd in range(opts.rounds):
            order = kinds[rnd % len(kinds) :] + kinds[: rnd % len(kinds)] if rnd else kinds
            if not source:
                order = kinds
            for kind in order:
                tag = f"r{rnd}{kinds.index(kind)}"
                settings = replace(
                    base,
                    topic_prefix=f"bench{token}{tag}.",
                    app_id=f"bench-{token}-{tag}",
                    partitions=opts.partitions,
                    fast_groups=True,
                )
                tmp = Path(tmp_dir) / tag
                label = f"round {rnd + 1}/{opts.rounds}: {kind}"
                got, source = await _one_pass(broker, opts, kind, settings, tmp, source, label)
                say(f"  {got['envelopes_per_second']:,.0f} envelopes/s")
                passes.append({"round": rnd + 1, "kind": kind, **got})
    return {
        "benchmark": "pipeline",
        "date": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "commit": code_version(),
        "machine": (
            f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}"
        ),
        "broker": broker.description,
        "records": opts.records,
        "runs": opts.runs,
        "partitions": opts.partitions,
        "workers": opts.workers,
        "rounds": opts.rounds,
        "roles": list(opts.roles),
        "latency_rate_per_second": opts.rate,
        "load_average": {"start": load_start, "end": load_average()},
        "target_envelopes_per_second": TARGET_PER_SECOND,
        "target_validator_per_second": TARGET_VALIDATOR_PER_SECOND,
        "target_ratio_to_passthrough": TARGET_RATIO,
        "passes": passes,
        **_figures(passes, kinds, opts.rounds),
    }


async def _one_pass(
    broker: Broker,
    opts: Options,
    kind: str,
    settings: Settings,
    tmp: Path,
    source: list[Any],
    label: str,
) -> tuple[dict[str, Any], list[Any]]:
    """One pass of ``kind`` on fresh topics, deleted after it; with the log records of the
    first validator pass (``source``, what a projector pass replays)."""
    specs = {s.id: s for s in desired_for(settings)}
    await ensure_topics(broker.bootstrap, list(specs.values()))
    tmp.mkdir()
    bench = PassSetup(kind, settings, {k: s.name for k, s in specs.items()}, tmp, Processes(tmp))
    say(label)
    try:
        if kind == RAW:
            got = await raw_pass(bench, broker, opts)
        elif kind in (PASSTHROUGH, PASSTHROUGH_WORKER):
            mode = "worker" if kind == PASSTHROUGH_WORKER else "partition"
            got = await live_pass(bench, broker, opts, None, mode)
        elif kind == "projector":
            got = await projector_pass(bench, broker, opts, source)
        else:
            got = await live_pass(bench, broker, opts, kind)
            if not source:
                source = await read_topic(
                    broker.bootstrap, bench.topics["log"], isolation="read_committed"
                )
    finally:
        bench.procs.stop()
        # Fresh topics per pass; those left behind would make every later pass
        # run on a broker with ever more topics and partitions (measured: 1,247
        # topics after an evening of runs, and each pass's latency worse).
        prefixes = (settings.topic_prefix, f"{settings.app_id}-")
        await delete_topics(broker.bootstrap, prefixes)
    return got, source


def _by_kind(passes: list[dict[str, Any]], kinds: list[str], key: str) -> dict[str, Any]:
    """``key``'s spread over the rounds, by kind, for the kinds whose every pass has it."""
    out = {}
    for kind in kinds:
        of = [p for p in passes if p["kind"] == kind]
        if of and all(key in p for p in of):
            out[kind] = _spread([p[key] for p in of])
    return out


def _figures(passes: list[dict[str, Any]], kinds: list[str], rounds: int) -> dict[str, Any]:
    """The passes' figures by kind: envelopes/s, ratios to the same round's ceilings, CPU per
    envelope and latency, each a spread over the rounds."""
    figures = {
        kind: _spread([p["envelopes_per_second"] for p in passes if p["kind"] == kind])
        for kind in kinds
    }
    ratios: dict[str, dict[str, Any]] = {}
    for kind in [k for k in kinds if k not in CEILINGS]:
        for ceiling in [k for k in kinds if k in CEILINGS]:
            per_round = []
            for rnd in range(1, rounds + 1):
                by = {p["kind"]: p for p in passes if p["round"] == rnd}
                per_round.append(
                    round(by[kind]["envelopes_per_second"] / by[ceiling]["envelopes_per_second"], 3)
                )
            ratios[f"{kind} / {ceiling}"] = _spread(per_round)
    cpu = _by_kind(passes, kinds, "cpu_us_per_envelope")
    latency = {
        kind: {
            q: _spread([p[f"latency_ms_{q}"] for p in passes if p["kind"] == kind])
            for q in ("p50", "p99")
        }
        for kind in kinds
        if any("latency_ms_p50" in p for p in passes if p["kind"] == kind)
    }
    at_rate = _by_kind(passes, kinds, "cpu_us_per_envelope_at_rate")
    return {
        "envelopes_per_second": figures,
        "ratios": ratios,
        "cpu_us_per_envelope": cpu,
        "latency_ms": latency,
        "cpu_us_per_envelope_at_rate": at_rate,
    }
