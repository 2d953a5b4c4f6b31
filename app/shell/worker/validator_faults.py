"""What a failed commit of the validator says: the record's own fault, or a fence.

Shell module, read by ``app.shell.worker.validator_commit``: it sorts the exceptions aiokafka
raises (or the ``ValueError`` of ``validator_commit.send_batches``) by their cause chain. It
imports aiokafka's errors only.
"""

from __future__ import annotations

from aiokafka.errors import (
    CorruptRecordException,
    InvalidProducerEpoch,
    MessageSizeTooLargeError,
    ProducerFenced,
    RecordListTooLargeError,
    RecordTooLargeError,
)

__all__ = ["RECORD_FAULTS", "caused_by", "fenced", "the_records_fault"]

# What the broker refuses because of the record itself. Anything else (a connection lost, a
# timeout, a coordinator moving) says nothing about the record: dead-lettering it as
# unrecordable then would give a good record the wrong outcome.
RECORD_FAULTS = (
    MessageSizeTooLargeError,
    RecordTooLargeError,
    RecordListTooLargeError,
    CorruptRecordException,
    ValueError,  # validator_commit.send_batches: larger than a whole record batch
)


def caused_by(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kinds):
            return True
        seen = seen.__cause__
    return False


def the_records_fault(exc: BaseException) -> bool:
    return caused_by(exc, RECORD_FAULTS)


def fenced(exc: BaseException) -> bool:
    """Another producer with the partition's transactional id started after ours (aiokafka
    raises ProducerFenced for the broker's INVALID_PRODUCER_EPOCH)."""
    return caused_by(exc, (ProducerFenced, InvalidProducerEpoch))
