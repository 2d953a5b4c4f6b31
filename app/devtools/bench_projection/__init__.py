"""``a2ui-stream bench projection [--json] [--updates N]``: what the projector costs and saves
(issue 5 acceptance), driven through the real core: ``decide`` records the events,
``surfaces.project`` materializes them, ``projector_batch.plan_batch`` plans and encodes the
frames.

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
  through the projector's own step: ``projector_batch.plan_batch`` over a batch of the one
  recorded event, its run cached with every subscriber's cursor (what the projector loop calls
  per batch: the fold, the plan per subscriber, the frame records), and sent both ways in turn
  in every repeat: as the projector sends (``projector_fanout.send_all`` with a projector
  loop's producer, counters and subscriber topics: one Produce request per broker) and as it
  sent before (one awaited ``projector_fanout.send_frame`` per frame, the baseline), keyed
  ``runId/surfaceId``, each subscriber to its own topic (the subscriber-topic template of
  topics/, created for the bench and deleted after it). The figure is the CPU of the process
  from the step until every frame is acknowledged (the producer's work included), per
  subscriber and per extra subscriber (100 -> 1,000); the time until acknowledged is beside
  it. The produce needs a broker (the harness picks it: ``KAFKA_BOOTSTRAP``, else one it
  starts); ``--no-produce`` measures the step only. (Until 2026-12-03 the figure was
  ``frames.plan_frames`` and ``frame_produce.produce_frames`` alone, which left out the
  projector's per-subscriber work around them.)

Each figure is printed with the load average (``/proc/loadavg``) at the start and the end.
Figures are printed, never asserted: timing belongs to people, not to the test suite.

The package, by part: ``inputs`` (the recorded envelopes), ``diffs`` (a and b), ``fanout``
(c), ``table`` and ``command`` (the CLI). This module names what the CLI and the tests use.
"""

from __future__ import annotations

from app.devtools.bench_projection.command import add_parser, measure, register, run
from app.devtools.bench_projection.diffs import (
    invalid_patches,
    measure_bytes,
    measure_diff,
    random_pairs,
)
from app.devtools.bench_projection.fanout import (
    fanout_on,
    fanout_step,
    measure_fanout,
    measure_fanout_produced,
)
from app.devtools.bench_projection.inputs import (
    FANOUT,
    FANOUT_TOPICS,
    surface_changes,
    v1_component,
    v1_events,
    v2_events,
)
from app.devtools.bench_projection.table import table

__all__ = [
    "FANOUT",
    "FANOUT_TOPICS",
    "add_parser",
    "fanout_on",
    "fanout_step",
    "invalid_patches",
    "measure",
    "measure_bytes",
    "measure_diff",
    "measure_fanout",
    "measure_fanout_produced",
    "random_pairs",
    "register",
    "run",
    "surface_changes",
    "table",
    "v1_component",
    "v1_events",
    "v2_events",
]
