"""Gathering a batch: the time bound counted from when its records could have started waiting.

Shell module, used by the validator's loop (``validator_process.gather_batch``) and by the
transactional pass-through that `bench pipeline` measures beside it, so both batch alike.

A batch closes ``window_s`` after it opened, or at ``max_records``. An idle gather opens when
it starts. A gather that follows a batch opens where that batch was gathered (``opened``): a
record fetched while that batch was decided and committed has waited since then, so it does
not wait a whole window more (a batch used to open when its gather started, and a record
that arrived during a commit waited the commit and then the whole window). When the commit
took longer than the window, the gather takes what is already fetched and closes at once;
when nothing is, it waits for the first records as an idle gather does. Under saturation
nothing changes (``max_records`` closes the batch first); at a steady rate a record waits at
most the longer of the window and one commit before it is decided (docs/pipeline.md).
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["gather"]


async def gather(
    consumer: Any, *, max_records: int, window_s: float, opened: float | None
) -> dict[Any, list[Any]]:
    """Up to ``max_records`` records from ``consumer.getmany``, by partition, collected until
    the window closes (``window_s`` after ``opened``, the loop's clock; None: from now)."""
    clock = asyncio.get_running_loop()
    now = clock.time()
    idle_deadline = now + window_s
    batch: dict[Any, list[Any]] = {}
    count = 0

    async def take(deadline: float) -> bool:
        nonlocal count
        got = await consumer.getmany(
            timeout_ms=max(0, round((deadline - clock.time()) * 1000)),
            max_records=max_records - count,
        )
        for tp, records in got.items():
            batch.setdefault(tp, []).extend(records)
            count += len(records)
        return bool(got)

    deadline = idle_deadline
    if opened is not None and opened + window_s < idle_deadline and await take(now):
        # What was fetched while the last batch was decided, then the one fetch its drain
        # lets the consumer make (aiokafka fetches a partition again only once what it
        # holds of it is taken): what reached the broker meanwhile.
        if count < max_records:
            await take(idle_deadline)
        deadline = max(opened + window_s, clock.time())
    while count < max_records and clock.time() < deadline:
        if not await take(deadline):
            break
    return batch
