"""``a2ui-stream bench pipeline``: envelopes per second END TO END through real ``a2ui-stream
worker`` processes, each figure beside its ceilings measured interleaved with it on the same
broker, in the same run, on the same topic layout and partition count.

Shell module. One PASS: fresh topics (``desired_for``, a prefix of its own), the processes
started and ready (their consumer group stable with every member, and one probe per
partition answered), then the bench's producer sends N records (each the RFC 0209 positive
example on its own surface, over ``--runs`` runs) while the processes run. The figure is N
over the time from the first admission send to the last committed outcome: the moment the
bench's ``read_committed`` consumer of the log and the dead letters has seen an outcome for
every record (live: the producer runs beside the worker, nothing waits as a backlog).
Kinds of pass:

- ``pipeline ROLES``: ``--workers`` worker processes with ``A2UI_STREAM_ROLES=ROLES``;
  ``validator,projector`` is what ``a2ui-stream worker`` runs by default. ``projector``
  alone: its input is the log, so the bench produces the log records a validator pass of the
  same run wrote (same partitions, keys, headers) and the outcome is the projector group's
  committed offset reaching each partition's end;
- ``passthrough`` (CEILING a): ``--workers`` processes that consume the admission topic in a
  group and, per partition, produce each record to the log in a transaction (one
  transactional producer per partition, batches sent closed, ``send_offsets_to_transaction``
  once per commit interval as the validator does, commit; batches gathered as the validator
  gathers them), with no decision: the validator's transaction pattern at no decision cost;
- ``passthrough-worker`` (CEILING a2, ``--worker-producer``): the same with one transactional
  producer per process, a batch one transaction over all its partitions, each carrying its
  offsets fenced by the group generation (KIP-447, ``app.shell.worker.txn_offsets``): the
  design that would replace the producer per partition, measured beside it;
- ``raw`` (CEILING b): the same records produced without transactions to the admission topic
  and consumed back (``read_uncommitted``) by the bench itself.

``--rounds`` rounds, each one pass of every kind, the order rotated each round; ratios are
taken within a round (one pass against the ceiling measured minutes, not a warm-up, apart).
Pipeline and pass-through passes then wait until their processes are quiet (the timed
records' backlog done everywhere, the projector's and read side's too) and offer
``--latency-records`` at a steady ``--rate``, timing each record from its send to its committed
outcome (one clock, the bench's), and the processes' CPU per envelope at that rate (until
quiet again).

Printed, never asserted.

The package, by role: ``records`` (options, targets, the records), ``passthrough`` (ceiling
a, its own process: ``__main__``), ``procs`` (the processes, readiness, the outcome watcher),
``producing`` (sending, quiet, latency), ``passes`` (one pass of each kind), ``measure`` (the
rounds and figures), ``table`` and ``command`` (the CLI). This module names what the CLI, bench
sse and the tests use.
"""

from __future__ import annotations

from app.devtools.bench_pipeline.command import register, run
from app.devtools.bench_pipeline.measure import measure
from app.devtools.bench_pipeline.passes import produce, profiled, worker_env
from app.devtools.bench_pipeline.passthrough import passthrough
from app.devtools.bench_pipeline.records import DEFAULT_ROLES, Options
from app.devtools.bench_pipeline.table import table

__all__ = [
    "DEFAULT_ROLES",
    "Options",
    "measure",
    "passthrough",
    "produce",
    "profiled",
    "register",
    "run",
    "table",
    "worker_env",
]
