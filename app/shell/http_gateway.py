"""Admission over HTTP through the production path: publish on the admission topic, then wait
for the validator's outcome of THAT record (docs/http.md).

Shell module. Nothing here decides anything: the record is published keyed by its runId on the
run's partition (docs/topics.md), exactly as a Kafka producer would, and the outcome is what
the validator wrote: the log record(s) or the dead letter whose ``a2ui-source`` header names
the published record's ``partition:offset`` (app.shell.run_index).

The record arrives as bytes (app.core.http_admission built them around the client's own bytes
where it could): this module never re-encodes what it publishes. ``admit`` is the one publish
path. A host command (``sealed=True``: run create and cancel, interrupt resolve, an action, a
fork) is sealed with the deployment's gateway key (app.core.command_seal, the ``a2ui-gateway``
header): the validator decides no command without it, so only this gateway, after the HTTP
API authenticated the caller and checked the action, can say what a person did.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer

from app.core.command_seal import HEADER, seal
from app.core.keys import partition_for_run
from app.shell.run_index import Outcome, RunIndex

__all__ = ["AdmissionGateway", "Published"]


@dataclass(frozen=True)
class Published:
    partition: int
    offset: int
    outcome: Outcome | None  # None: no outcome within the wait (or an E2 deduplication)


class AdmissionGateway:
    def __init__(
        self,
        bootstrap: str,
        admission_topic: str,
        partitions: int,
        index: RunIndex,
        command_key: bytes | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.admission_topic = admission_topic
        self.partitions = partitions
        self.index = index
        self._command_key = command_key
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            max_request_size=5 * 1024 * 1024,
        )
        await self._producer.start()

    async def stop(self) -> None:
        if self._producer is not None:
            with contextlib.suppress(Exception):
                await self._producer.stop()

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
        outcome = await self.index.outcome_of(metadata.partition, metadata.offset, wait_seconds)
        return Published(metadata.partition, metadata.offset, outcome)
