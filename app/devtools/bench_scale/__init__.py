"""``a2ui-stream bench scale [--json] [--envelopes N] [--minutes M] [--max-rss-mb MB]``: what a
worker costs as history grows (issue 15 item 6): worker RSS against envelopes recorded, restart
to ready, the state each of two workers holds, and reads of a run on the other worker's
partition against one on its own. Against a real broker: the harness (KAFKA_BOOTSTRAP if set).

Shell module. Every worker is an ``a2ui-stream worker`` process with the default roles
(validator and projector), fast group joins, a bearer token and one gateway key for the
deployment. RSS is the worker process's VmRSS from /proc; CPU its utime + stime.

The mix, seeded (``MixConfig``): 400 runs open at a time (fewer below 40,000 envelopes),
records interleaved across them; each run takes 10-90 envelopes on 1-3 surfaces (a surface's
first envelope creates it with five components and its data model; each later one updates a
heading or the data model, so surfaces are updated many times); after its last envelope, 10% of
runs are cancelled (POST /runs/{runId}/cancel: a run.cancel host command) and 5% deleted (a
tombstone per log key, as ``a2ui-stream runs delete`` writes them); 1% of envelopes are
refused (an Image: no network egress) and 1% re-sent as they were (E2: deduplicated). The
other runs stay open. Records are published with at most 10,000 not yet decided (live traffic,
not a backlog).

Phases, one after the other in one run:
  1. grow: one worker; publish until --envelopes, the time budget (--minutes) or the memory
     budget (the worker's RSS above --max-rss-mb), whichever comes first (the output says
     which); at each checkpoint (1-2-5 steps up to N) wait until every record is decided and
     read, then sample RSS, the state gauges and CPU per envelope since the last checkpoint;
  2. restart (--restarts times, then once more with SIGTERM): SIGKILL the worker, start it,
     and time (from the signal) until it is READY, detected by real requests only: for every
     partition, a poll of a known run (GET /runs/{runId}/events/poll) answers 200 with that
     run's last recorded sequence (the read side has read the log), and an envelope POSTed
     to a run of that partition answers 201 (the validator has restored the partition and
     decided it; the answer waits for the outcome). Each is timed on its own; ready is the
     later one. Beside them, not readiness: when a2ui_validator_run_states shows every
     partition restored (the HTTP API answers an admission only once the read side is
     ready, so the 201 cannot show the validator alone), and when the worker is QUIET (under
     0.15 of a core over 2 s: the projector's restore is not part of ready);
  3. CPU per envelope with one worker over a window of new envelopes, beside the same less
     the worker's idle CPU (measured over 5 s with nothing published just before: a cost per
     second and per worker, not per envelope) and what the worker did in the window (the
     validator's batches and commits, run states moved, log records its read side tailed);
  4. two workers of one deployment (same group and gateway key): a second worker joins; time
     until every partition is owned (a2ui_validator_run_states) and the new worker serves
     reads and admissions on every partition; each worker's RSS, partitions, runs in its
     read side's memory (a2ui_http_runs), its validator's run states, its projector's
     surfaces, its data directory on disk, and
     their share of what the one worker alone held; CPU per envelope of both over the same
     window size as phase 3;
  5. reads: on each worker, sequential GETs of runs on its own partitions and on the other
     worker's, alternating (the tail poll, and the whole event-log read), in rounds;
  6. one of the two workers SIGKILLed and restarted, ready as in phase 2.

Columns: one per DESIGN in ``DESIGNS`` (a name and the worker environment that selects it),
measured one after the other on the same mix in the same run. There is one today,
``default``: the worker as built, with its default settings; the output records the commit
(``code``). An alternative (a setting that selects another read side or store) is a second
entry, and its figures a second column. At commit a38fa6a ``default`` was the design before
issue 15 (every worker tails the whole log), measured in docs/scale.md as the baseline.
``target`` quotes issue 15's targets.
Figures are printed, never asserted; the machine may be shared, so timings are noisy
(the load average is printed, restarts and read rounds give spreads).

The package, by role: ``designs`` (sizes, waits, targets, the designs), ``mix`` (the seeded
mix), ``workers`` (a worker process and its /metrics), ``deployment`` (``Bench``: the
deployment under test and its expected state), ``phases`` (grow, restarts), ``windows`` (CPU
windows, the second worker, reads), ``measure`` (every phase per design), ``table`` (the
output) and ``command`` (the CLI). This module names what the CLI and the tests use.
"""

from __future__ import annotations

from app.devtools.bench_scale.command import register, run
from app.devtools.bench_scale.designs import DESIGNS, Design
from app.devtools.bench_scale.measure import measure
from app.devtools.bench_scale.mix import Mix, MixConfig, MixRun, checkpoints
from app.devtools.bench_scale.table import table
from app.devtools.bench_scale.windows import READ_KINDS
from app.devtools.bench_scale.workers import parse_metrics, rss_slope_kb

__all__ = [
    "DESIGNS",
    "READ_KINDS",
    "Design",
    "Mix",
    "MixConfig",
    "MixRun",
    "checkpoints",
    "measure",
    "parse_metrics",
    "register",
    "rss_slope_kb",
    "run",
    "table",
]
