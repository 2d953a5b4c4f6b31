"""Admission over HTTP through the production path: publish on the admission topic, then wait
for the validator's outcome of THAT record (docs/http.md).

Shell module. Nothing here decides anything: the record is published keyed by its runId on the
run's partition (docs/topics.md), exactly as a Kafka producer would, and the outcome is what
the validator wrote: the log record(s) or the dead letter whose ``a2ui-source`` header names
the published record's ``partition:offset`` (app.shell.worker.run_index).

The record arrives as bytes (app.core.http.admission built them around the client's own bytes
where it could): this module never re-encodes what it publishes. ``admit`` is the one publish
path. A host command (``sealed=True``: run create and cancel, interrupt resolve, an action, a
fork) is sealed with the deployment's gateway key (app.core.admission.command_seal, the
``a2ui-gateway`` header): the validator decides no command without it, so only this gateway, after
the HTTP API authenticated the caller and checked the action, can say what a person did.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from app.core.admission.command_seal import HEADER, seal
from app.core.runlog.keys import partition_for_run
from app.shell.worker.run_index import RunIndex
from app.shell.worker.run_outcomes import RecordOutcome

__all__ = ["AdmissionGateway", "Published"]

log = logging.getLogger(__name__)

# How often a wait with no outcome yet asks whether the validator has committed past the record
# (one OffsetFetch): a record decided without an output, an E2 deduplication, is then answered
# at once instead of after the whole wait.
DECIDED_PROBE_SECONDS = 0.25


@dataclass(frozen=True)
class Published:
    partition: int
    offset: int
    outcome: RecordOutcome | None  # None: no outcome within the wait (or an E2 deduplication)


class AdmissionGateway:
    def __init__(
        self,
        bootstrap: str,
        admission_topic: str,
        partitions: int,
        index: RunIndex,
        command_key: bytes | None = None,
        validator_group: str | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.admission_topic = admission_topic
        self.partitions = partitions
        self.index = index
        self._command_key = command_key
        self._validator_group = validator_group
        self._producer: AIOKafkaProducer | None = None
        self._admin: AIOKafkaAdminClient | None = None

    async def start(self) -> None:
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            max_request_size=5 * 1024 * 1024,
        )
        await self._producer.start()
        if self._validator_group is not None:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
            try:
                await admin.start()
            except Exception as exc:  # only the duplicate's early answer needs it: wait instead
                log.warning("gateway: no admin client (%s)", type(exc).__name__)
                with contextlib.suppress(Exception):
                    await admin.close()
            else:
                self._admin = admin

    async def stop(self) -> None:
        if self._producer is not None:
            with contextlib.suppress(Exception):
                await self._producer.stop()
        if self._admin is not None:
            with contextlib.suppress(Exception):
                await self._admin.close()

    async def admit(
        self,
        run_id: str,
        record: bytes,
        wait_seconds: float,
        headers: Sequence[tuple[str, bytes]] | None = None,
        *,
        sealed: bool = False,
    ) -> Published:
        """Publish the admission record ``record`` (its bytes, as they go on the topic) for
        ``run_id`` with ``headers`` (and the gateway's seal when ``sealed``: a host command),
        and wait for its outcome."""
        assert self._producer is not None, "gateway not started"
        if sealed:
            assert self._command_key is not None, "a gateway without a key seals no command"
            headers = [*(headers or ()), (HEADER, seal(self._command_key, record))]
        partition = partition_for_run(run_id, self.partitions)
        metadata = await self._producer.send_and_wait(
            self.admission_topic,
            record,
            key=run_id.encode("utf-8"),
            partition=partition,
            headers=list(headers) if headers else None,
        )
        outcome = await self._outcome(metadata.partition, metadata.offset, wait_seconds)
        return Published(metadata.partition, metadata.offset, outcome)

    async def _outcome(
        self, partition: int, offset: int, wait_seconds: float
    ) -> RecordOutcome | None:
        """The outcome of the record at ``partition:offset``, waiting at most ``wait_seconds``.
        Between waits: once the validator's committed offset is past the record, what it wrote
        for it is on the log or the dead letters already (in the same transaction, or before
        the commit without transactions), so the read side reads both to their end and
        answers; nothing there means a decision that writes nothing (E2: a duplicate)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        while True:
            remaining = deadline - loop.time()
            step = min(DECIDED_PROBE_SECONDS, max(0.0, remaining))
            outcome = await self.index.outcome_of(partition, offset, step)
            if outcome is not None or remaining <= step:
                return outcome
            if await self._decided(partition, offset):
                left = max(0.0, deadline - loop.time())
                await self.index.read_to_end([partition], left, dead_letters=True)
                return await self.index.outcome_of(partition, offset, 0)

    async def _decided(self, partition: int, offset: int) -> bool:
        """Whether the validator group's committed offset on the admission partition is past
        ``offset`` (False when that cannot be asked: keep waiting for the outcome)."""
        if self._admin is None or self._validator_group is None:
            return False
        tp = TopicPartition(self.admission_topic, partition)
        try:
            offsets = await asyncio.wait_for(
                self._admin.list_consumer_group_offsets(self._validator_group, partitions=[tp]),
                2,
            )
        except Exception as exc:  # the broker is away or busy: the wait goes on
            log.debug("gateway: committed offset unavailable (%s)", type(exc).__name__)
            return False
        committed = offsets.get(tp)
        return committed is not None and committed.offset > offset
