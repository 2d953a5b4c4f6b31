"""Parts (a) and (b) of the projection bench: the bytes a delta subscriber gets against a full
one, and the time and validity of a verified delta against ``jsonpatch.make_patch``.
"""

from __future__ import annotations

import copy
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from app.core.projection.frames import DEFAULT_FULL_EVERY, Recipient, SubscriberCursor, plan_frames
from app.core.projection.patch import verified_diff
from app.core.projection.patch_apply import PatchError, apply_patch
from app.core.projection.patch_equal import json_equal
from app.core.projection.surfaces import SurfaceChange
from app.devtools.bench_projection.inputs import TARGET_BYTES_RATIO, TARGET_SPEEDUP

__all__ = ["invalid_patches", "measure_bytes", "measure_diff", "random_pairs"]


# --- (a) bytes -----------------------------------------------------------------------------------


def measure_bytes(
    changes: list[SurfaceChange], full_every: int = DEFAULT_FULL_EVERY
) -> dict[str, Any]:
    """Both streams over ``changes``; ``full_every`` is the delta subscriber's digest-check
    period (the largest a subscription may take, ``MAX_FULL_EVERY``, means no check in a bench
    run). A subscriber in sync passes every check, so it gets no full frame after the first."""
    full, delta = Recipient("full"), Recipient("delta", delta=True, full_every=full_every)
    cursors: dict[str, SubscriberCursor] = {}
    totals = {"full": 0, "delta": 0}
    kinds = {"full": 0, "delta": 0}
    first_full = full_bytes = digests = 0
    for index, change in enumerate(changes):
        result = plan_frames(change, [(s, cursors.get(s.subscriber_id)) for s in (full, delta)])
        cursors.update(result.cursors)
        for send in result.sends:
            if index == 0:
                first_full = len(send.frame)
                continue  # the initial surface costs both the same: count the updates only
            totals[send.subscriber_id] += len(send.frame)
            if send.subscriber_id == "delta":
                kinds[send.kind] += 1
                full_bytes += len(send.frame) if send.kind == "full" else 0
                digests += send.reason == "digest"
    ratio = totals["delta"] / totals["full"] if totals["full"] else None
    return {
        "updates": len(changes) - 1,
        "initial_full_frame_bytes": first_full,
        "full_stream_bytes": totals["full"],
        "delta_stream_bytes": totals["delta"],
        "delta_frames": kinds["delta"],
        "digest_checks": digests,
        "full_frames_to_delta_subscriber": kinds["full"],
        "delta_frame_bytes_mean": round(
            (totals["delta"] - full_bytes) / kinds["delta"] if kinds["delta"] else 0, 1
        ),
        "full_every": delta.full_every,
        "ratio": round(ratio, 4) if ratio is not None else None,
        "target_ratio": TARGET_BYTES_RATIO,
        "meets_target": ratio is not None and ratio <= TARGET_BYTES_RATIO,
    }


# --- (b) diff time and validity ------------------------------------------------------------------


def _random_json(rnd: random.Random, depth: int = 0) -> Any:
    roll = rnd.random()
    if depth > 3 or roll < 0.35:
        return rnd.choice([None, True, False, 0, 1, 2, 1.5, "a", "b", "x/y", "~0"])
    if roll < 0.7:
        return [_random_json(rnd, depth + 1) for _ in range(rnd.randint(0, 5))]
    keys = ["a", "b", "c", "a/b", "~", "~1", ""]
    return {rnd.choice(keys): _random_json(rnd, depth + 1) for _ in range(rnd.randint(0, 4))}


def _mutate(rnd: random.Random, value: Any, depth: int = 0) -> Any:
    """A random edit of ``value``: list insertions, removals and reorders, key changes."""
    if isinstance(value, list):
        items = [_mutate(rnd, v, depth + 1) if rnd.random() < 0.3 else v for v in value]
        for _ in range(rnd.randint(0, 2)):
            op = rnd.random()
            if op < 0.4:
                items.insert(rnd.randint(0, len(items)), _random_json(rnd, depth + 1))
            elif op < 0.7 and items:
                del items[rnd.randrange(len(items))]
            elif len(items) > 1:
                i, j = rnd.randrange(len(items)), rnd.randrange(len(items))
                items[i], items[j] = items[j], items[i]
        return items
    if isinstance(value, dict):
        out = {
            k: (_mutate(rnd, v, depth + 1) if rnd.random() < 0.3 else v) for k, v in value.items()
        }
        if rnd.random() < 0.3:
            out[rnd.choice(["a", "b", "z", "a/b"])] = _random_json(rnd, depth + 1)
        if out and rnd.random() < 0.2:
            del out[rnd.choice(list(out))]
        return out
    return _random_json(rnd, depth) if rnd.random() < 0.5 else value


def _mixed(rnd: random.Random, depth: int = 0) -> Any:
    """Mixed-type values from a small alphabet, so equal values recur (move detection)."""
    roll = rnd.random()
    if depth >= 3 or roll < 0.4:
        return rnd.choice(["a", "b", 1, None, {"k": "a"}, ["a"]])
    if roll < 0.7:
        return [_mixed(rnd, depth + 1) for _ in range(rnd.randint(0, 4))]
    return {rnd.choice(["k", "m", "n/o"]): _mixed(rnd, depth + 1) for _ in range(rnd.randint(0, 3))}


def random_pairs(count: int) -> list[tuple[Any, Any]]:
    """Half edits of a document (insertions, removals, swaps), half unrelated documents of
    mixed-type arrays: the shapes behind jsonpatch's reported invalid patches (python-json-patch
    issues 124, 138, 179)."""
    rnd = random.Random(114)
    pairs: list[tuple[Any, Any]] = []
    while len(pairs) < count:
        if len(pairs) % 2:
            old = [_random_json(rnd, 1) for _ in range(rnd.randint(1, 6))]
            pairs.append((old, _mutate(rnd, copy.deepcopy(old))))
        else:
            pairs.append(([_mixed(rnd, 1) for _ in range(rnd.randint(1, 5))], _mixed(rnd)))
    return pairs


def invalid_patches(
    pairs: list[tuple[Any, Any]], producer: Callable[[Any, Any], Any], jsonpatch: Any
) -> dict[str, int]:
    """Patches from ``producer`` that do not turn old into new, per applier."""
    bad = {"jsonpatch_apply": 0, "ours_apply": 0, "unverified": 0}
    for old, new in pairs:
        patch = producer(old, new)
        if patch is None:  # ours: could not verify, the projector sends a full frame instead
            bad["unverified"] += 1
            continue
        ops = list(patch)
        try:
            if not json_equal(jsonpatch.apply_patch(copy.deepcopy(old), ops), new):
                bad["jsonpatch_apply"] += 1
        except Exception:  # noqa: BLE001 - jsonpatch raises several types; any is "invalid"
            bad["jsonpatch_apply"] += 1
        try:
            if not json_equal(apply_patch(old, ops), new):
                bad["ours_apply"] += 1
        except PatchError:
            bad["ours_apply"] += 1
    return bad


def _time(fn: Callable[[Any, Any], Any], pairs: list[tuple[Any, Any]]) -> tuple[int, int]:
    """CPU and wall nanoseconds ``fn`` takes over ``pairs``."""
    cpu, wall = time.process_time_ns, time.perf_counter_ns
    start_cpu, start_wall = cpu(), wall()
    for old, new in pairs:
        fn(old, new)
    return cpu() - start_cpu, wall() - start_wall


_ROUNDS = 5
_SLICES = 20  # per round, ours and the baseline take turns this many times


def _interleaved(
    ours: Callable[[Any, Any], Any],
    pairs: list[tuple[Any, Any]],
    theirs: Callable[[Any, Any], Any],
    base_pairs: list[tuple[Any, Any]],
) -> dict[str, float]:
    """Median µs per pair of each side, CPU and wall, over ``_ROUNDS`` rounds. The machine is
    shared (2 cores, other people's tests): both sides take turns in small slices, so they see
    the same load, and CPU time (what the work costs) is the figure; wall time, which also
    counts the time this process waited for a core, is kept beside it."""
    step, base_step = -(-len(pairs) // _SLICES), -(-len(base_pairs) // _SLICES)
    samples: dict[str, list[float]] = {"ours": [], "theirs": [], "ours_wall": [], "theirs_wall": []}
    for _ in range(_ROUNDS):
        ns = dict.fromkeys(samples, 0)
        for n in range(_SLICES):
            cpu, wall = _time(ours, pairs[n * step : (n + 1) * step])
            base_cpu, base_wall = _time(theirs, base_pairs[n * base_step : (n + 1) * base_step])
            ns["ours"] += cpu
            ns["ours_wall"] += wall
            ns["theirs"] += base_cpu
            ns["theirs_wall"] += base_wall
        for key, total in ns.items():
            samples[key].append(
                total / 1000.0 / len(pairs if key.startswith("ours") else base_pairs)
            )
    return {key: statistics.median(values) for key, values in samples.items()}


def measure_diff(
    name: str, pairs: list[tuple[Any, Any]], jsonpatch: Any, *, targeted: bool = True
) -> dict[str, Any]:
    """Time and validity on ``pairs``; the speed target applies to the projector's own pairs
    (``targeted``), the random set is there for the invalid-patch counts."""
    make = jsonpatch.make_patch
    base_pairs = pairs[: max(20, len(pairs) // 5)]  # the baseline is slow: a fifth of the pairs
    _time(verified_diff, pairs[:50])  # warm up
    _time(make, pairs[:10])
    us = _interleaved(verified_diff, pairs, make, base_pairs)
    mine, theirs = us["ours"], us["theirs"]
    wall_mine, wall_theirs = us["ours_wall"], us["theirs_wall"]
    return {
        "pairs": name,
        "count": len(pairs),
        "clock": "cpu (time.process_time)",
        "ours_us_per_pair": round(mine, 2),
        "jsonpatch_us_per_pair": round(theirs, 2),
        "speedup": round(theirs / mine, 1) if mine else None,
        "wall_ours_us_per_pair": round(wall_mine, 2),
        "wall_jsonpatch_us_per_pair": round(wall_theirs, 2),
        "wall_speedup": round(wall_theirs / wall_mine, 1) if wall_mine else None,
        "target_speedup": TARGET_SPEEDUP if targeted else None,
        "meets_target": (mine > 0 and theirs / mine >= TARGET_SPEEDUP) if targeted else None,
        "invalid_ours": invalid_patches(pairs, verified_diff, jsonpatch),
        "invalid_jsonpatch": invalid_patches(pairs, lambda a, b: make(a, b).patch, jsonpatch),
    }
