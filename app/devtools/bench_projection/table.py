"""The projection bench's table for people: bytes, diff, fan-out."""

from __future__ import annotations

from typing import Any

from app.core.projection.frames import DEFAULT_FULL_EVERY
from app.devtools.bench_output import load_text
from app.devtools.bench_projection.fanout import PATHS
from app.devtools.bench_projection.inputs import TARGET_BYTES_RATIO, TARGET_SPEEDUP

__all__ = ["table"]


def table(result: dict[str, Any]) -> str:
    lines = _bytes_lines(result) + _diff_lines(result) + _fanout_lines(result)
    return "\n".join(lines)


def _bytes_lines(result: dict[str, Any]) -> list[str]:
    """(a): the bytes to a delta against a full subscriber, with and without digest checks."""
    lines = [
        f"projection (Python {result['python']}, {result['machine']})",
        load_text(result["load_average"]),
        "",
        f"bytes to a delta vs a full subscriber (target delta <= {TARGET_BYTES_RATIO:.0%} of full;"
        " checks: deltas that carry a digest, every fullEvery-th)",
    ]
    head = (
        f"{'surface':<8} {'fullEvery':>14} {'updates':>8} {'full bytes':>12} {'delta bytes':>12} "
        f"{'ratio':>8} {'deltas':>7} {'checks':>7} {'fulls':>6} {'bytes/delta':>12}"
    )
    lines += [head, "-" * len(head)]
    rows = [(n, b) for n, b in result["bytes"].items()]
    rows += [(n, b) for n, b in result["bytes_deltas_only"].items()]
    for name, b in rows:
        mark = "" if b["meets_target"] else "  (above target)"
        every = "never" if b["full_every"] > b["updates"] else str(b["full_every"])
        if b["full_every"] == DEFAULT_FULL_EVERY:
            every += " (default)"
        lines.append(
            f"{name:<8} {every:>14} {b['updates']:>8} {b['full_stream_bytes']:>12} "
            f"{b['delta_stream_bytes']:>12} {b['ratio']:>8.2%} {b['delta_frames']:>7} "
            f"{b['digest_checks']:>7} "
            f"{b['full_frames_to_delta_subscriber']:>6} {b['delta_frame_bytes_mean']:>12.1f}{mark}"
        )
    return lines


def _diff_lines(result: dict[str, Any]) -> list[str]:
    """(b): the verified delta against ``jsonpatch.make_patch``, time and invalid patches."""
    lines: list[str] = []
    lines += [
        "",
        f"verified delta vs jsonpatch.make_patch, CPU µs per pair (target >= {TARGET_SPEEDUP:.0f}x;"
        " wall: the speedup by wall-clock time)",
        "invalid = patches that do not turn old into new, applied by jsonpatch / by ours",
    ]
    head = (
        f"{'pairs':<48} {'ours':>7} {'jsonpatch':>10} {'speedup':>8} {'wall':>7} "
        f"{'ours invalid':>13} {'jsonpatch invalid':>18}"
    )
    lines += [head, "-" * len(head)]
    for d in result["diff"]:
        ours, theirs = d["invalid_ours"], d["invalid_jsonpatch"]
        mark = {True: "", False: "  (below target)", None: "  (validity set)"}[d["meets_target"]]
        mine = f"{ours['jsonpatch_apply']}/{ours['ours_apply']}"
        other = f"{theirs['jsonpatch_apply']}/{theirs['ours_apply']}"
        lines.append(
            f"{d['pairs']:<48} {d['ours_us_per_pair']:>7.1f} {d['jsonpatch_us_per_pair']:>10.1f} "
            f"{str(d['speedup']) + 'x':>8} {str(d['wall_speedup']) + 'x':>7} "
            f"{mine:>13} {other:>18}  of {d['count']}{mark}"
        )
    return lines


def _fanout_lines(result: dict[str, Any]) -> list[str]:
    """(c): the fan-out of one update, sent (when measured) and planned only."""
    lines: list[str] = []
    if "fanout_produced" in result:
        lines += _produced_lines(result)
    lines += ["", "fan-out of one update, plan + encode only (no produce), µs"]
    head = f"{'subscribers':>11} {'mode':>6} {'p50':>10} {'per subscriber':>15} {'frame bytes':>12}"
    lines += [head, "-" * len(head)]
    for f in result["fanout"]:
        lines.append(
            f"{f['subscribers']:>11} {f['mode']:>6} {f['p50_us']:>10.1f} "
            f"{f['per_subscriber_us']:>15.3f} {f['bytes_per_frame']:>12}"
        )
    return lines


def _produced_lines(result: dict[str, Any]) -> list[str]:
    """The produced fan-out: per subscriber count and mode, the projector's request beside the
    send per frame, measured in turn in the same repeats; CPU from the plan until every frame
    is acknowledged (the producer's own work included)."""
    rows = {(f["subscribers"], f["mode"], f["path"]): f for f in result["fanout_produced"]}
    lines = [
        "",
        f"fan-out of one update, planned, sent and acknowledged ({result['broker']}): the",
        "projector's one request per broker against one send_frame per frame (the way before),",
        "in turn; CPU µs of the process from the plan until every frame is acknowledged",
    ]
    head = (
        f"{'subscribers':>11} {'mode':>6} {'CPU/sub request':>16} {'CPU/sub send':>13} "
        f"{'ratio':>6} {'acked ms request':>17} {'send':>7}"
    )
    lines += [head, "-" * len(head)]
    for (count, mode, path), f in rows.items():
        if path != "request" or (count, mode, "send_frame") not in rows:
            continue
        base = rows[(count, mode, "send_frame")]
        ratio = f["cpu_p50_us"] / base["cpu_p50_us"] if base["cpu_p50_us"] else float("nan")
        lines.append(
            f"{count:>11} {mode:>6} {f['cpu_per_subscriber_us']:>16.2f} "
            f"{base['cpu_per_subscriber_us']:>13.2f} {ratio:>6.2f} "
            f"{f['acked_p50_ms']:>17.2f} {base['acked_p50_ms']:>7.2f}"
        )
    counts = sorted({c for c, _, _ in rows})
    if len(counts) >= 2 and all((c, "delta", p) in rows for c in counts[-2:] for p in PATHS):
        low, high = counts[-2], counts[-1]
        for path in PATHS:
            more = (
                rows[(high, "delta", path)]["cpu_p50_us"] - rows[(low, "delta", path)]["cpu_p50_us"]
            )
            lines.append(
                f"each extra in-sync delta subscriber ({low} -> {high}), {path}: "
                f"{more / (high - low):.2f} µs of CPU (target <= 5)"
            )
    return lines
