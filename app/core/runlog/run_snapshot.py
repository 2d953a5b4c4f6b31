"""The run-state changelog's wire form: a run's admission state as one compacted record, and
the partition's checkpoint (issue 15 item 1; docs/pipeline.md "Restore").

Role: pure values and their encoding, as Kafka Streams' changelog of a state store. The
validator writes, per admission partition and batch, one record per run the batch changed
(key = runId, value = ``encode_state``) and the partition's ``Checkpoint`` (key
``CHECKPOINT_KEY``: ``#`` is in no runId), to the changelog topic's same partition number, in
the transaction of that partition's log appends. A new owner restores from them
(``app.core.admission.validator_restore``); the log stays the source of truth.

- ``compact``: a run that ended keeps only what ``validate`` still reads of it (its sequence,
  status and lineage): every envelope and command for it is refused by its status alone
  (``run_terminal`` / ``run_state_conflict``), so it leaves memory and the changelog small.
- A record this version cannot read (corrupt, another format) decodes to None: the restore
  then rebuilds the partition from the log instead.

May import: the standard library, orjson and app.core.* (pure).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import orjson

from app.core.runlog.run_lifecycle import TERMINAL_STATUSES
from app.core.runlog.run_state import Lifecycle, RunState, dump, load

__all__ = [
    "CHECKPOINT_KEY",
    "FORMAT",
    "Checkpoint",
    "compact",
    "decode_checkpoint",
    "decode_state",
    "encode_checkpoint",
    "encode_state",
    "is_compact",
]

CHECKPOINT_KEY: Final = b"#checkpoint"
FORMAT: Final = 1  # schemas/run-state.schema.json "format"


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where a partition's changelog stands: every admission record below ``next_offset`` was
    decided and its outputs are in the log and the dead letters; the outputs of the records
    from ``next_offset`` on are at or past log offset ``log_from`` and dead-letter offset
    ``dead_from`` (lower bounds: what the writer knew of those topics' ends before the
    batch)."""

    partition: int
    next_offset: int
    log_from: int
    dead_from: int


def compact(state: RunState) -> RunState:
    """``state`` as ``validate`` needs it: a terminal run keeps its sequence, status and
    lineage only (its surfaces, correlations and interrupts are never read again)."""
    life = state.lifecycle
    if life.status not in TERMINAL_STATUSES or is_compact(state):
        return state
    return RunState(
        state.run_id, state.next_sequence, lifecycle=Lifecycle(life.status, (), life.lineage)
    )


def is_compact(state: RunState) -> bool:
    """Whether ``state`` is already as ``compact`` leaves a terminal run: no surfaces,
    correlations, v1 surface or interrupts."""
    return (
        not state.surfaces
        and not state.correlations
        and state.v1_surface is None
        and not state.lifecycle.interrupts
    )


def encode_state(state: RunState) -> bytes:
    """The changelog record of ``state`` (``decode_state`` reads it)."""
    return orjson.dumps({"format": FORMAT, "state": dump(state)})


def decode_state(run_id: str, value: bytes) -> RunState | None:
    """The state a changelog record of run ``run_id`` holds; None when it is not one this
    version wrote for that run."""
    obj = _object(value)
    state = obj.get("state") if obj is not None else None
    if not isinstance(state, dict):
        return None
    try:
        decoded = load(state)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return None
    return decoded if decoded.run_id == run_id else None


def encode_checkpoint(checkpoint: Checkpoint) -> bytes:
    """The changelog's checkpoint record (``decode_checkpoint`` reads it)."""
    return orjson.dumps(
        {
            "format": FORMAT,
            "checkpoint": {
                "partition": checkpoint.partition,
                "nextOffset": checkpoint.next_offset,
                "logFrom": checkpoint.log_from,
                "deadFrom": checkpoint.dead_from,
            },
        }
    )


def decode_checkpoint(value: bytes) -> Checkpoint | None:
    """The checkpoint a changelog record holds; None when it is not one this version wrote."""
    obj = _object(value)
    found = obj.get("checkpoint") if obj is not None else None
    if not isinstance(found, dict):
        return None
    fields = [found.get(name) for name in ("partition", "nextOffset", "logFrom", "deadFrom")]
    numbers = [f for f in fields if isinstance(f, int) and not isinstance(f, bool) and f >= 0]
    if len(numbers) != len(fields):
        return None
    partition, next_offset, log_from, dead_from = numbers
    return Checkpoint(partition, next_offset, log_from, dead_from)


def _object(value: bytes) -> dict[str, Any] | None:
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        return None
    return obj
