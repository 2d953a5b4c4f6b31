"""The pipeline bench's options and targets, and the records it sends (RFC 0209 envelopes over
``--runs`` runs, one probe per partition).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import orjson
from aiokafka.partitioner import DefaultPartitioner

from app.devtools.bench_admission import positive_record
from app.shell.worker.validator_config import ValidatorConfig

__all__ = [
    "DEFAULT_ROLES",
    "MAX_BATCH",
    "Options",
    "PASSTHROUGH",
    "PASSTHROUGH_WORKER",
    "CEILINGS",
    "PRODUCER_CONFIG",
    "RAW",
    "READY_TIMEOUT",
    "TARGET_PER_SECOND",
    "TARGET_RATIO",
    "TARGET_VALIDATOR_PER_SECOND",
    "bench_records",
    "probe_records",
    "say",
]


TARGET_PER_SECOND = 10_000
TARGET_VALIDATOR_PER_SECOND = 15_000
TARGET_RATIO = 0.70
DEFAULT_ROLES = "validator,projector"
PASSTHROUGH, PASSTHROUGH_WORKER, RAW = "passthrough", "passthrough-worker", "raw"
CEILINGS = (PASSTHROUGH, PASSTHROUGH_WORKER, RAW)
READY_TIMEOUT = 180.0
MAX_BATCH = ValidatorConfig.max_batch
PRODUCER_CONFIG = {"acks": "all", "linger_ms": 5, "max_batch_size": 256 * 1024}


@dataclass(frozen=True)
class Options:
    records: int = 20000
    runs: int = 50
    partitions: int = 6
    rate: float = 1000.0
    rounds: int = 3
    workers: int = 1
    roles: tuple[str, ...] = (DEFAULT_ROLES,)
    latency_records: int = 2000
    worker_producer: bool = False  # also ceiling a2: one producer per process (KIP-447)


def say(message: str) -> None:
    print(f"bench pipeline: {message}", file=sys.stderr, flush=True)


# -- records ------------------------------------------------------------------------------------


def _record(i: int, run: str, prefix: str) -> tuple[bytes, bytes]:
    rec = positive_record()
    sid = f"{prefix}brief-{i}"
    payload = rec["envelope"]["payload"]
    payload["surfaceId"] = sid
    for message in payload["messages"]:
        next(iter(v for k, v in message.items() if k != "version"))["surfaceId"] = sid
    rec["runId"] = run
    rec["envelope"]["correlationId"] = f"{prefix}{i}"
    rec["envelope"]["envelopeId"] = f"{prefix}env-{i}"
    return run.encode(), orjson.dumps(rec)


def bench_records(n: int, runs: int, prefix: str = "bench-") -> list[tuple[bytes, bytes]]:
    return [_record(i, f"{prefix}run-{i % runs:03d}", prefix) for i in range(n)]


def probe_records(partitions: int) -> list[tuple[bytes, bytes, int | None, list[Any]]]:
    """One record per partition, each of a run whose key the producer's partitioner puts
    there (the validator dead-letters a record on a partition its key does not map to)."""
    partitioner = DefaultPartitioner()
    everyone = list(range(partitions))
    found: dict[int, tuple[bytes, bytes]] = {}
    n = 0
    while len(found) < partitions:
        run = f"probe-run-{n}"
        found.setdefault(partitioner(run.encode(), everyone, everyone), _record(n, run, "probe-"))
        n += 1
    return [(k, v, None, []) for k, v in found.values()]
