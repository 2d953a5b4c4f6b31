"""``a2ui-stream bench projection [--json] [--updates N]``: what the projector costs and saves
(issue 5 acceptance), driven through the real core: ``decide`` records the events,
``surfaces.project`` materializes them, ``frames.plan_frames`` plans and encodes the frames.

Shell module (it reads the clock, the schema files and randomness). Three parts:

- bytes: a delta subscriber vs a full subscriber over N single-leaf updates of a 100-component
  surface, v2 (A2UI v0.9 fold) and v1 (full payloads); target delta <= 5% of full. Printed twice:
  with the default ``fullEvery`` (its periodic digest checks included: the ``digest`` field on
  every ``fullEvery``-th delta) and with deltas only (no check), so the cost of the periodic
  check is visible on its own;
- diff: the time to compute a VERIFIED delta (``patch.verified_diff``) vs
  ``jsonpatch.make_patch`` on the same (old, new) pairs the projector produced (target >= 20x),
  and the invalid patches of each, applied with ``jsonpatch.apply_patch`` and with ours (ours: 0).
  Both take turns in small slices and the figure is CPU time, the speedup by wall-clock time
  beside it (the machine is shared: wall time also counts the waits for a core). A third set
  of 3,000 random JSON pairs (nested arrays and objects, keys with ``/`` and ``~``) is where
  ``jsonpatch.make_patch`` is known to produce patches that do not apply;
- fan-out: one update to 1, 100 and 1,000 subscribers (all delta and in sync, then all full),
  as the projector sends it: ``frames.plan_frames`` (plan + encode) and then one awaited
  ``projector_loop.send_frame`` per frame, keyed ``runId/surfaceId``, to the subscriber's own
  topic (the subscriber-topic template of topics/; at most ``FANOUT_TOPICS`` topics,
  subscriber ``i`` on topic ``i % FANOUT_TOPICS``, created for the bench and deleted after
  it). The per-subscriber
  figure is plan + send; the time until every frame is acknowledged is beside it. Before
  (until issue 16): plan + encode only, no produce. The produce needs a broker (the harness
  picks it: ``KAFKA_BOOTSTRAP``, else one it starts); ``--no-produce`` measures the plan only.

Each figure is printed with the load average (``/proc/loadavg``) at the start and the end.
Figures are printed, never asserted: timing belongs to people, not to the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson

from app.core.admission import Admitted, decide
from app.core.frames import DEFAULT_FULL_EVERY, Recipient, SubscriberCursor, plan_frames
from app.core.patch import PatchError, apply_patch, json_equal, verified_diff
from app.core.policy import SURFACE_KIND, HostPolicy
from app.core.subscriptions import MAX_FULL_EVERY
from app.core.surfaces import Projection, SurfaceChange, project
from app.devtools.bench_output import baseline_missing, emit, load_average, load_text

__all__ = [
    "register",
    "add_parser",
    "run",
    "measure",
    "fanout_on",
    "measure_fanout_produced",
    "v1_component",
]

BASIC = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"
RUN_ID = "bench/run-000000000000000002"
NOW = "2026-01-01T00:00:00Z"
COMPONENTS = 100
TARGET_BYTES_RATIO = 0.05
TARGET_SPEEDUP = 20.0
FANOUT = (1, 100, 1000)
FANOUT_TOPICS = 100
RANDOM_PAIRS = 3000


# --- inputs: envelopes recorded by the real admission decision ---------------------------------


def _envelope(payload: dict[str, Any], n: int, schema_version: int) -> dict[str, Any]:
    return {
        "type": SURFACE_KIND,
        "schemaVersion": schema_version,
        "envelopeId": f"env-bench-{n}",
        "correlationId": f"corr-bench-{n}",
        "payload": payload,
        "meta": {"source": "ai-generation", "ts": NOW},
    }


def _v2_component(i: int) -> dict[str, Any]:
    cid = f"c{i}"
    kind = i % 5
    if kind == 0:
        return {
            "id": cid,
            "component": "TextField",
            "label": f"Field {i}",
            "value": {"path": f"/f{i}"},
        }
    if kind == 1:
        return {
            "id": cid,
            "component": "CheckBox",
            "label": f"Agree {i}",
            "value": {"path": f"/b{i}"},
        }
    if kind == 2:
        return {"id": cid, "component": "Divider", "axis": "horizontal"}
    return {
        "id": cid,
        "component": "Text",
        "text": f"Paragraph {i} of the brief",
        "variant": "body",
    }


def v1_component(i: int) -> dict[str, Any]:
    kind = i % 4
    if kind == 0:
        return {"component": "field.text", "id": f"f{i}", "label": f"Field {i}", "required": True}
    if kind == 1:
        return {"component": "heading", "text": f"Section {i}", "level": 2}
    return {"component": "text", "text": f"Paragraph {i} of the brief"}


def _text_ids() -> list[int]:
    return [i for i in range(1, COMPONENTS) if i % 5 in (3, 4)]


def v2_events(updates: int, rules: Any) -> list[dict[str, Any]]:
    """createSurface + 100 components, then ``updates`` updateComponents of one Text each."""
    sid = "bench"
    comps = [{"id": "root", "component": "Column", "children": [f"c{i}" for i in range(1, 100)]}]
    comps += [_v2_component(i) for i in range(1, COMPONENTS)]
    first = {
        "version": "v0.9",
        "catalogId": BASIC,
        "surfaceId": sid,
        "messages": [
            {"version": "v0.9", "createSurface": {"surfaceId": sid, "catalogId": BASIC}},
            {"version": "v0.9", "updateComponents": {"surfaceId": sid, "components": comps}},
        ],
    }
    payloads = [first]
    texts = _text_ids()
    rnd = random.Random(2)
    for n in range(updates):
        i = rnd.choice(texts)
        leaf = {"id": f"c{i}", "component": "Text", "text": f"Update {n}", "variant": "body"}
        payloads.append(
            {
                "version": "v0.9",
                "catalogId": BASIC,
                "surfaceId": sid,
                "messages": [
                    {
                        "version": "v0.9",
                        "updateComponents": {"surfaceId": sid, "components": [leaf]},
                    }
                ],
            }
        )
    return _record(payloads, HostPolicy(), rules, 2)


def v1_events(updates: int, rules: Any) -> list[dict[str, Any]]:
    """A 100-component v1 surface, then ``updates`` full payloads with one text changed."""
    current: dict[str, Any] = {
        "catalogVersion": "0.9.1",
        "surface": {"title": "Bench", "components": [v1_component(i) for i in range(COMPONENTS)]},
    }
    payloads = [current]
    texts = [i for i in range(COMPONENTS) if i % 4 in (1, 2, 3)]
    rnd = random.Random(1)
    for n in range(updates):
        current = copy.deepcopy(current)
        current["surface"]["components"][rnd.choice(texts)]["text"] = f"Update {n}"
        payloads.append(current)
    return _record(payloads, HostPolicy(schema_versions={SURFACE_KIND: 1}), rules, 1)


def _record(
    payloads: list[dict[str, Any]], policy: HostPolicy, rules: Any, version: int
) -> list[dict[str, Any]]:
    state = None
    events = []
    for n, payload in enumerate(payloads):
        record = {"runId": RUN_ID, "envelope": _envelope(payload, n, version)}
        outcome = decide(record, state, policy, rules, now=NOW)
        if not isinstance(outcome, Admitted):
            raise RuntimeError(f"bench input {n} was not admitted: {outcome}")
        state = outcome.state
        # the projector reads the log: decode what the validator wrote, as the shell will
        events.append(orjson.loads(orjson.dumps(outcome.event)))
    return events


def _changes(events: list[dict[str, Any]]) -> list[SurfaceChange]:
    state = Projection()
    out: list[SurfaceChange] = []
    for event in events:
        state, changes = project(state, event)
        out.extend(changes)
    return out


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


def _invalid(
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
        "invalid_ours": _invalid(pairs, verified_diff, jsonpatch),
        "invalid_jsonpatch": _invalid(pairs, lambda a, b: make(a, b).patch, jsonpatch),
    }


# --- (c) fan-out ---------------------------------------------------------------------------------


def measure_fanout(changes: list[SurfaceChange]) -> list[dict[str, Any]]:
    old_change, change = changes[-2], changes[-1]
    rows = []
    for count in FANOUT:
        for mode in ("delta", "full"):
            subs = [Recipient(f"s{i}", delta=mode == "delta") for i in range(count)]
            # every subscriber holds exactly the surface this change starts from
            held = plan_frames(old_change, [(s, None) for s in subs]).cursors
            pairs = [(s, held[s.subscriber_id]) for s in subs]
            repeats = max(5, 2000 // count)
            samples = []
            for _ in range(repeats):
                start = time.perf_counter_ns()
                result = plan_frames(change, pairs)
                samples.append((time.perf_counter_ns() - start) / 1000.0)
            kinds = {send.kind for send in result.sends}
            rows.append(
                {
                    "subscribers": count,
                    "mode": mode,
                    "frames": sorted(kinds),
                    "p50_us": round(statistics.median(samples), 1),
                    "per_subscriber_us": round(statistics.median(samples) / count, 3),
                    "bytes_per_frame": len(result.sends[0].frame),
                }
            )
    return rows


async def measure_fanout_produced(
    changes: list[SurfaceChange], bootstrap: str, topics: list[str]
) -> list[dict[str, Any]]:
    """``measure_fanout`` with the sends: plan, then one awaited send per frame through
    ``send_frame``, as ``ProjectorLoop._send`` does, then wait for every acknowledgement."""
    from aiokafka import AIOKafkaProducer

    from app.shell.worker.projector_fanout import send_frame

    old_change, change = changes[-2], changes[-1]
    key = f"{change.key.run_id}/{change.key.surface_id}".encode()
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_batch_size=256 * 1024
    )
    await producer.start()
    rows = []
    partitions: dict[str, int | None] = {}  # the projector's per-topic answer (send_frame)
    try:
        for topic in topics:  # metadata before the clock
            await (await send_frame(producer, topic, b"warm-up", key, None, partitions))
        for count in FANOUT:
            for mode in ("delta", "full"):
                subs = [Recipient(f"s{i}", delta=mode == "delta") for i in range(count)]
                where = {s.subscriber_id: topics[i % len(topics)] for i, s in enumerate(subs)}
                held = plan_frames(old_change, [(s, None) for s in subs]).cursors
                pairs = [(s, held[s.subscriber_id]) for s in subs]
                plans, sends, acked, cpu = [], [], [], []
                for _ in range(max(3, 200 // count)):
                    t0, c0 = time.perf_counter_ns(), time.process_time_ns()
                    result = plan_frames(change, pairs)
                    t1 = time.perf_counter_ns()
                    futures = [
                        await send_frame(
                            producer, where[send.subscriber_id], send.frame, key, None, partitions
                        )
                        for send in result.sends
                    ]
                    t2, c2 = time.perf_counter_ns(), time.process_time_ns()
                    await asyncio.gather(*futures)
                    t3 = time.perf_counter_ns()
                    plans.append((t1 - t0) / 1000.0)
                    sends.append((t2 - t1) / 1000.0)
                    cpu.append((c2 - c0) / 1000.0)
                    acked.append((t3 - t0) / 1e6)
                plan_us, send_us = statistics.median(plans), statistics.median(sends)
                rows.append(
                    {
                        "subscribers": count,
                        "mode": mode,
                        "topics": min(count, len(topics)),
                        "frames": len(result.sends),
                        "plan_p50_us": round(plan_us, 1),
                        "send_p50_us": round(send_us, 1),
                        "cpu_p50_us": round(statistics.median(cpu), 1),
                        "per_subscriber_us": round((plan_us + send_us) / count, 3),
                        "send_per_subscriber_us": round(send_us / count, 3),
                        "acked_p50_ms": round(statistics.median(acked), 2),
                        "bytes_per_frame": len(result.sends[0].frame),
                    }
                )
    finally:
        await producer.stop()
    return rows


async def fanout_on(bootstrap: str, changes: list[SurfaceChange]) -> list[dict[str, Any]]:
    """``measure_fanout_produced`` on subscriber topics made for it (and deleted after)."""
    import uuid

    from aiokafka.admin import AIOKafkaAdminClient

    from app.core.topic_plan import subscriber_topic
    from app.shell.worker.topics_admin import ensure_topics, load_definitions

    definitions = load_definitions()
    prefix = f"benchfan{uuid.uuid4().hex[:8]}."
    specs = [
        subscriber_topic(definitions, f"s{i}", prefix=prefix, replication=1)
        for i in range(min(max(FANOUT), FANOUT_TOPICS))
    ]
    await ensure_topics(bootstrap, specs)
    try:
        return await measure_fanout_produced(changes, bootstrap, [s.name for s in specs])
    finally:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.delete_topics([s.name for s in specs])
        finally:
            await admin.close()


async def _fanout_with_broker(changes: list[SurfaceChange]) -> tuple[str, list[dict[str, Any]]]:
    from app.shell.cli.broker import start_broker

    broker = start_broker(log=lambda m: print(m, file=sys.stderr))
    try:
        return broker.description, await fanout_on(broker.bootstrap, changes)
    finally:
        broker.stop()


# --- the command ---------------------------------------------------------------------------------


def measure(updates: int, produce: bool = False) -> dict[str, Any]:
    import jsonpatch

    from app.core.payload_rules import PayloadRules
    from app.shell.schema_files import load_schema_documents

    rules = PayloadRules.from_documents(load_schema_documents())
    v2 = _changes(v2_events(updates, rules))
    v1 = _changes(v1_events(updates, rules))
    v2_pairs = [(c.old.content, c.new.content) for c in v2 if c.old is not None]
    v1_pairs = [(c.old.content, c.new.content) for c in v1 if c.old is not None]
    load_start = load_average()
    produced: dict[str, Any] = {}
    if produce:
        where, rows = asyncio.run(_fanout_with_broker(v2))
        produced = {"fanout_produced": rows, "broker": where}
    result = {
        "bench": "projection",
        "python": platform.python_version(),
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "load_average_1m": round(os.getloadavg()[0], 2),
        "bytes": {"v2": measure_bytes(v2), "v1": measure_bytes(v1)},
        "bytes_deltas_only": {
            "v2": measure_bytes(v2, MAX_FULL_EVERY),
            "v1": measure_bytes(v1, MAX_FULL_EVERY),
        },
        "diff": [
            measure_diff("v2 projector pairs (100 components, one leaf)", v2_pairs, jsonpatch),
            measure_diff("v1 projector pairs (100 components, one leaf)", v1_pairs, jsonpatch),
            measure_diff(
                "random JSON pairs (arrays, / and ~ keys)",
                random_pairs(RANDOM_PAIRS),
                jsonpatch,
                targeted=False,
            ),
        ],
        "fanout": measure_fanout(v2),
        **produced,
    }
    return result | {"load_average": {"start": load_start, "end": load_average()}}


def _table(result: dict[str, Any]) -> str:
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
    if "fanout_produced" in result:
        lines += [
            "",
            "fan-out of one update as the projector sends it: plan + encode, then one awaited "
            f"send_frame per frame ({result['broker']}), µs; acked: until every frame is",
        ]
        head = (
            f"{'subscribers':>11} {'mode':>6} {'topics':>6} {'plan':>9} {'send':>9} "
            f"{'per subscriber':>15} {'send/sub':>9} {'acked ms':>9}"
        )
        lines += [head, "-" * len(head)]
        for f in result["fanout_produced"]:
            lines.append(
                f"{f['subscribers']:>11} {f['mode']:>6} {f['topics']:>6} {f['plan_p50_us']:>9.1f} "
                f"{f['send_p50_us']:>9.1f} {f['per_subscriber_us']:>15.3f} "
                f"{f['send_per_subscriber_us']:>9.3f} {f['acked_p50_ms']:>9.2f}"
            )
    lines += ["", "fan-out of one update, plan + encode only (no produce), µs"]
    head = f"{'subscribers':>11} {'mode':>6} {'p50':>10} {'per subscriber':>15} {'frame bytes':>12}"
    lines += [head, "-" * len(head)]
    for f in result["fanout"]:
        lines.append(
            f"{f['subscribers']:>11} {f['mode']:>6} {f['p50_us']:>10.1f} "
            f"{f['per_subscriber_us']:>15.3f} {f['bytes_per_frame']:>12}"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.updates < 2:
        print("a2ui-stream bench projection: --updates must be at least 2", file=sys.stderr)
        return 2
    if baseline_missing("projection", ("jsonpatch",), "the `jsonpatch` package"):
        return 2
    return emit(measure(args.updates, produce=not args.no_produce), args.json, _table)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``projection`` under the ``bench`` subcommand's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "projection",
        help="delta vs full bytes, verified delta vs jsonpatch, fan-out cost",
        description=(
            "What the projector costs and saves on a 100-component surface updated one leaf at "
            "a time: the bytes of RFC 6902 delta frames against full frames, the verified "
            "delta against jsonpatch.make_patch, and the cost of fanning frames out to many "
            "subscribers, including one producer send per subscriber frame (on the broker "
            "the harness picks: KAFKA_BOOTSTRAP, else one it starts; --no-produce: none)."
        ),
    )
    parser.add_argument(
        "--no-produce",
        action="store_true",
        help="fan-out: plan + encode only, no broker (the figure of earlier versions)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--updates",
        type=int,
        default=1000,
        metavar="N",
        help="single-leaf updates of the 100-component surface (default 1000)",
    )
    parser.set_defaults(func=run)
    return parser


register = add_parser
