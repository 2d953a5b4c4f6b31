"""The pipeline bench's table for people."""

from __future__ import annotations

from typing import Any

from app.devtools.bench_output import (
    load_text,
)
from app.devtools.bench_pipeline.producing import QUIET_CORES
from app.devtools.bench_pipeline.records import PASSTHROUGH, PASSTHROUGH_WORKER, RAW

__all__ = ["table"]


def _label(kind: str) -> str:
    return {
        PASSTHROUGH: "ceiling a: transactional pass-through",
        PASSTHROUGH_WORKER: "ceiling a2: the same, one producer per process (KIP-447)",
        RAW: "ceiling b: raw produce+consume",
    }.get(kind, f"pipeline, roles {kind}")


def _s(spread: dict[str, Any], fmt: str = ",.0f") -> str:
    return (
        f"{spread['median']:{fmt}} ({spread['min']:{fmt}}-{spread['max']:{fmt}})"
        if len(spread["per_round"]) > 1
        else f"{spread['median']:{fmt}}"
    )


def _settled(r: dict[str, Any], kind: str) -> str:
    """How long the processes of ``kind`` took to be quiet after each timed pass."""
    got = [p.get("settle_s", "n/a") for p in r["passes"] if p["kind"] == kind]
    said = ["not quiet" if s is None else "n/a" if s == "n/a" else f"{s} s" for s in got]
    return ", ".join(said) or "n/a"


def _cpu(r: dict[str, Any], key: str, title: str) -> list[str]:
    """The lines of one CPU-per-envelope block (none when the run has no such figure)."""
    if not r.get(key):
        return []
    rows = [(_label(k), _s(s, ",.1f")) for k, s in r[key].items()]
    width = max(len(a) for a, _ in rows)
    return ["", title, *(f"  {a:<{width}}  {b:>26}" for a, b in rows)]


def _latency(r: dict[str, Any], many: str) -> list[str]:
    """The latency block: p50 and p99 at the offered rate by kind (none without it)."""
    if not r["latency_ms"]:
        return []
    lines = [
        "",
        f"send -> committed outcome at {r['latency_rate_per_second']:,.0f} envelopes/s "
        f"offered, ms{many}",
    ]
    rows4 = [
        (_label(k), _s(q["p50"], ".1f"), _s(q["p99"], ".1f"), _settled(r, k))
        for k, q in r["latency_ms"].items()
    ]
    width = max(len(a) for a, _, _, _ in rows4)
    lines.append(f"  {'':<{width}}  {'p50':>20}  {'p99':>20}  {'quiet after the drain':>22}")
    lines += [f"  {a:<{width}}  {b:>20}  {c:>20}  {d:>22}" for a, b, c, d in rows4]
    lines.append(
        "  (each offered once the processes are quiet: under "
        f"{QUIET_CORES} of a core, after the timed pass's backlog)"
    )
    return lines


def table(r: dict[str, Any]) -> str:
    rounds = r["rounds"]
    many = " median (min-max of rounds)" if rounds > 1 else ""
    lines = [
        f"bench pipeline: {r['records']:,} RFC 0209 envelopes per pass over {r['runs']} runs, "
        f"{r['partitions']} partitions, {r['workers']} worker process(es), {rounds} round(s) "
        "interleaved",
        f"  {r['broker']}; {r['machine']}; commit {r['commit']}; {r['date']}",
        f"  {load_text(r['load_average'])}",
        "",
        f"end to end (first admission send -> last committed outcome), envelopes/s{many}",
    ]
    rows = [(_label(k), _s(s)) for k, s in r["envelopes_per_second"].items()]
    width = max(len(a) for a, _ in rows)
    lines += [f"  {a:<{width}}  {b:>26}" for a, b in rows]
    lines += ["", f"pipeline / ceiling, the same round's passes{many}"]
    rows = [(k, _s(s, ".2f")) for k, s in r["ratios"].items()]
    width = max([len(a) for a, _ in rows] + [10])
    lines += [f"  {a:<{width}}  {b:>18}" for a, b in rows]
    lines.append(
        f"  targets: default roles >= {r['target_envelopes_per_second']:,}/s and >= "
        f"{r['target_ratio_to_passthrough']:.0%} of the pass-through; validator alone >= "
        f"{r['target_validator_per_second']:,}/s"
    )
    lines += _cpu(
        r,
        "cpu_us_per_envelope",
        "CPU of the worker (or pass-through) processes per envelope, from the first send "
        f"until quiet, µs{many}",
    )
    lines += _latency(r, many)
    lines += _cpu(
        r,
        "cpu_us_per_envelope_at_rate",
        f"CPU of the processes per envelope at {r['latency_rate_per_second']:,.0f} "
        f"envelopes/s offered (until quiet again, idle included), µs{many}",
    )
    return "\n".join(lines)
