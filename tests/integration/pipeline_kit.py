"""Test kit for the pipeline on a real broker, beyond the fault kit: ``observe_settled``, the
read after which no outcome of what was published can still appear.

The worker processes, the corpus with its expected outcomes, publishing and the accounting
that proves nothing was lost or duplicated live in ``app.devtools.fault_kit`` (so that
``a2ui-stream soak`` runs the same code as the tests); the tests import them from there.

The oracle is the pure core itself: deciding the corpus in publication order per run
(exactly what `a2ui-stream check` does) gives the one correct outcome of every record, so the
log and the dead-letter topic must match it record for record, whatever crashed in between.
"""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, TopicPartition

from app.devtools.fault_accounting import committed_offsets
from app.devtools.fault_kit import Observed, WorkerProcess, observe, open_transactions
from app.shell.cli.broker import Broker
from app.shell.settings import Settings
from app.shell.worker.topics_admin import desired_for

__all__ = ["observe_settled"]


async def _end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return {tp.partition: offset for tp, offset in (await consumer.end_offsets(tps)).items()}
    finally:
        await consumer.stop()


async def observe_settled(
    broker: Broker,
    settings: Settings,
    *,
    timeout: float = 120.0,
    workers: list[WorkerProcess] = (),  # type: ignore[assignment]
) -> Observed:
    """The log and dead letters once nothing more can come of what the admission topic holds
    (bounded by ``timeout``): the validator group has committed an offset at the admission
    topic's end on every partition (a decision commits its record's offset in the transaction
    that writes its outcome, so every record was decided and its outcome committed), and no
    transaction on the log or the dead-letter topic is open (each partition's last stable
    offset has reached its high watermark: every transaction written there is committed or
    aborted). Read read_committed up to those end offsets, it holds every outcome the published
    records can have: a duplicate of any of them would be in it (a fixed sleep only hopes so)."""
    specs = {spec.id: spec for spec in desired_for(settings)}
    admission, log, dead = specs["admission"], specs["log"], specs["deadletter"]
    group = f"{settings.app_id}-validator"
    deadline = time.monotonic() + timeout
    while True:
        ends = await _end_offsets(broker.bootstrap, admission.name, admission.partitions)
        committed = await committed_offsets(broker.bootstrap, group, admission.name)
        behind = {
            p: end - committed.get(p, 0) for p, end in ends.items() if committed.get(p, 0) < end
        }
        held: list[tuple[str, int]] = []
        for topic, count in ((log.name, log.partitions), (dead.name, dead.partitions)):
            held += await open_transactions(broker.bootstrap, [topic], range(count))
        if not behind and not held:
            return await observe(broker, settings)
        if time.monotonic() > deadline:
            tails = "\n".join(w.tail() for w in workers)
            raise AssertionError(
                f"not settled after {timeout:.0f}s: admission records not yet committed per "
                f"partition {behind}, transactions still open on {held}\n{tails}"
            )
        await asyncio.sleep(0.5)
