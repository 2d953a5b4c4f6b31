"""Small aiokafka helpers shared by commands, tests and benchmarks: read a topic to its end;
check a bootstrap address and whether anything answers there before a client tries for a
minute (the CLI's one-line errors, issue 19 item 2).

Shell module.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from app.shell.errors import BrokerUnavailableError, OperatorError

__all__ = [
    "MAX_FETCH_BYTES",
    "await_group_coordinator",
    "group_consumer",
    "parse_bootstrap",
    "partitions_of",
    "probe_bootstrap",
    "quiet_client_logs",
    "read_range",
    "read_tail",
    "read_topic",
    "require_topic",
    "started",
]

_EXAMPLE = "e.g. KAFKA_BOOTSTRAP=127.0.0.1:9092 (the address `a2ui-stream up` prints)"
# Inside docker compose the broker is `kafka:19092`; from the machine it is localhost:9092.
_COMPOSE_HINT = {
    "kafka": "kafka is the broker's name inside docker compose; from this machine "
    "use localhost:9092"
}


def _servers(bootstrap: str) -> list[tuple[str, str]]:
    servers = []
    for server in bootstrap.split(","):
        server = server.strip()
        host, colon, port = server.rpartition(":")
        if server.startswith("[") and "]" in server:  # [::1]:9092
            bracket = server.index("]")
            host, port = server[1:bracket], server[bracket + 2 :]
            colon = server[bracket + 1 : bracket + 2]
        servers.append((host if colon else server, port if colon else ""))
    return servers


def parse_bootstrap(bootstrap: str, *, source: str = "KAFKA_BOOTSTRAP") -> str:
    """``bootstrap`` if it is ``host:port[,host:port]``; else OperatorError saying what is
    wrong with it (aiokafka would try 9092 for a missing port, and raise a ValueError from
    deep inside for a port that is not a number)."""
    if not bootstrap.strip():
        raise OperatorError(f"{source} is empty: set it to host:port, {_EXAMPLE}")
    for host, port in _servers(bootstrap):
        shown = f"{source}={bootstrap!r}"
        if not host:
            raise OperatorError(f"{shown} names no host: write host:port[,host:port], {_EXAMPLE}")
        if not port:
            raise OperatorError(f"{shown}: {host!r} has no port: write host:port, {_EXAMPLE}")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise OperatorError(
                f"{shown}: {port!r} is not a port (1 to 65535): write host:port, {_EXAMPLE}"
            )
    return bootstrap.strip()


def _why_not(host: str, port: int, timeout: float) -> str | None:
    """None when something accepts a TCP connection at host:port, else why not, in words."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except socket.gaierror:
        hint = _COMPOSE_HINT.get(host)
        return f"the host name {host!r} does not resolve" + (f" ({hint})" if hint else "")
    except ConnectionRefusedError:
        return f"nothing listens on {host}:{port} (connection refused)"
    except TimeoutError:
        return f"{host}:{port} does not answer (no reply within {timeout:g} s)"
    except OSError as exc:
        return f"{host}:{port} cannot be reached ({exc.strerror or exc})"


def probe_bootstrap(
    bootstrap: str,
    *,
    source: str = "KAFKA_BOOTSTRAP",
    timeout: float = 3.0,
    advice: str = "Start one (`a2ui-stream up` prints its address; `a2ui-stream broker` starts "
    "one on its own) or set {source} to a running broker.",
) -> None:
    """Raise BrokerUnavailableError, in two lines that say what to do, unless at least one
    server of ``bootstrap`` (already parsed) accepts a connection. A refused port is known at
    once; aiokafka would retry it for its whole request timeout and end in a traceback."""
    reasons = []
    for host, port in _servers(bootstrap):
        reason = _why_not(host, int(port), timeout)
        if reason is None:
            return
        reasons.append(reason)
    raise BrokerUnavailableError(
        f"no Kafka broker at {source}={bootstrap}: {'; '.join(reasons)}.\n"
        + advice.format(source=source)
    )


@contextlib.asynccontextmanager
async def started(client: Any) -> AsyncIterator[Any]:
    """``client`` started, and stopped (closed, for an admin client) whatever happens, a start
    that failed included: aiokafka warns "Unclosed AIOKafkaProducer" for a client that was
    never stopped."""
    try:
        await client.start()
        yield client
    finally:
        with contextlib.suppress(Exception):
            await (client.close() if hasattr(client, "close") else client.stop())


async def await_group_coordinator(bootstrap: str, group_id: str, timeout: float = 60.0) -> bool:
    """Wait until the broker names a coordinator for ``group_id`` (True), or ``timeout``
    passes (False: the consumers will retry on their own).

    A fresh Apache Kafka creates its offsets topic on the first FindCoordinator request and
    answers COORDINATOR_NOT_AVAILABLE (retriable) until it has; aiokafka's consumer logs each
    such answer at ERROR ("Group Coordinator Request failed"). A worker asks here first, so
    its consumers start against a coordinator that is there (issue 19 item 5)."""
    from aiokafka.client import AIOKafkaClient, CoordinationType
    from aiokafka.errors import KafkaError

    client = AIOKafkaClient(bootstrap_servers=bootstrap)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        await client.bootstrap()
        while loop.time() < deadline:
            try:
                await client.coordinator_lookup(CoordinationType.GROUP, group_id)
                return True
            except KafkaError as exc:
                if not exc.retriable:
                    return False
            await asyncio.sleep(0.2)
        return False
    finally:
        await client.close()


def quiet_client_logs(debug: bool = False) -> None:
    """For the CLI's client commands (publish, log, ...): aiokafka's own log lines stay out of
    their output unless ``--debug``; the command reports what went wrong itself, in words.
    Never call it in a worker, whose logs are the operator's."""
    if not debug:
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)


# The log, dead-letter and subscriber topics take records up to 8 MiB (topics/topics.json).
MAX_FETCH_BYTES = 8 * 1024 * 1024


def group_consumer(
    bootstrap: str, group_id: str, *, fast_groups: bool, assignors: tuple[object, ...] = ()
) -> AIOKafkaConsumer:
    """A (not yet started) consumer-group member as the validator and the projector use it:
    manual commits, ``read_committed``, from the earliest offset when the group has none; with
    ``fast_groups`` the short timeouts that make a join take seconds (laptops and tests);
    ``assignors``: the assignment protocols it offers (``app.shell.worker.assignor.strategies``;
    default aiokafka's round-robin)."""
    if assignors:
        timeouts_extra: dict[str, Any] = {"partition_assignment_strategy": assignors}
    else:
        timeouts_extra = {}
    timeouts: dict[str, Any] = (
        {"session_timeout_ms": 10000, "heartbeat_interval_ms": 1000, "rebalance_timeout_ms": 10000}
        if fast_groups
        else {}
    )
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        max_partition_fetch_bytes=MAX_FETCH_BYTES,
        **timeouts,
        **timeouts_extra,
    )


async def partitions_of(consumer: AIOKafkaConsumer, topic: str) -> list[TopicPartition]:
    """Every partition of ``topic``. A consumer without a subscription does not fetch the
    topic's metadata by itself, and ``partitions_for_topic()`` would say it does not exist."""
    consumer._client.add_topic(topic)  # noqa: SLF001
    await consumer._client.force_metadata_update()  # noqa: SLF001
    return [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]


async def require_topic(bootstrap: str, topic: str) -> int:
    """The partition count of ``topic``; OperatorError when it does not exist there (reading
    it would find nothing, and say nothing: an empty topic looks the same)."""
    async with started(AIOKafkaConsumer(bootstrap_servers=bootstrap)) as consumer:
        count = len(await partitions_of(consumer, topic))
    if not count:
        raise OperatorError(
            f"topic {topic} does not exist at {bootstrap}: set A2UI_STREAM_TOPIC_PREFIX (and "
            "A2UI_STREAM_PARTITIONS) to the worker's, or create the topics with "
            "`a2ui-stream topics apply`"
        )
    return count


async def read_topic(
    bootstrap: str,
    topic: str,
    *,
    isolation: str = "read_uncommitted",
    partitions: list[int] | None = None,
    timeout: float = 30.0,
    stable: float = 0.0,
) -> list[Any]:
    """Every record of ``topic`` (or of the given partitions) from the beginning to the end
    offsets observed at the start; bounded by ``timeout`` seconds.

    ``stable`` (with ``read_committed``): then keep reading, for up to that many seconds,
    until each partition's last stable offset has reached its high watermark, i.e. every
    transaction that wrote there has completed. A transaction whose commit was acknowledged
    has its markers written afterwards (seconds later while a broker recovers), and until
    then its records are invisible here: a reader that must not miss its own committed
    transactions waits for them."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level=isolation
    )
    try:
        await consumer.start()  # inside: a start that fails is stopped too (no "Unclosed")
        known = [tp.partition for tp in await partitions_of(consumer, topic)]
        if not known:
            return []
        tps = [TopicPartition(topic, p) for p in (partitions if partitions is not None else known)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        records: list[Any] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            positions = [await consumer.position(tp) for tp in tps]
            if all(pos >= ends[tp] for pos, tp in zip(positions, tps, strict=True)):
                break
            batch = await consumer.getmany(timeout_ms=500)
            for tp_records in batch.values():
                records.extend(tp_records)
        else:
            raise TimeoutError(f"reading {topic} did not reach its end within {timeout:.0f}s")
        settle = loop.time() + stable
        while stable and loop.time() < settle and not await _stable(consumer, tps):
            batch = await consumer.getmany(timeout_ms=200)
            for tp_records in batch.values():
                records.extend(tp_records)
        return records
    finally:
        await consumer.stop()


async def read_tail(
    bootstrap: str,
    topic: str,
    partition: int,
    start: int,
    *,
    timeout: float = 30.0,
    stable: float = 0.0,
) -> tuple[list[Any], int]:
    """The ``read_committed`` records of one partition from offset ``start`` (or its first
    offset, when retention removed ``start``) to its end, read as ``read_topic`` reads
    (``stable``), and that end offset (0 for a topic that does not exist)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=MAX_FETCH_BYTES,
    )
    try:
        await consumer.start()
        if partition not in {tp.partition for tp in await partitions_of(consumer, topic)}:
            return [], 0
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        first = (await consumer.beginning_offsets([tp]))[tp]
        end = (await consumer.end_offsets([tp]))[tp]
        if start >= end:
            return [], end  # nothing past it: no transaction can be pending there either
        consumer.seek(tp, max(first, start))
        records: list[Any] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        # Short fetch waits: a tail is often only the last transaction's marker, which moves
        # the position but returns no record, so a long wait would always run out (measured:
        # 500 ms per read with 500).
        while await consumer.position(tp) < end:
            if loop.time() > deadline:
                raise TimeoutError(f"reading {topic}[{partition}] from {start} timed out")
            batch = await consumer.getmany(tp, timeout_ms=50)
            records.extend(batch.get(tp, ()))
        settle = loop.time() + stable
        while stable and loop.time() < settle and not await _stable(consumer, [tp]):
            batch = await consumer.getmany(tp, timeout_ms=50)
            records.extend(batch.get(tp, ()))
        return records, max(end, consumer.highwater(tp) or 0)
    finally:
        await consumer.stop()


async def _stable(consumer: AIOKafkaConsumer, tps: list[TopicPartition]) -> bool:
    """Every partition read up to its last stable offset, which has reached the high watermark
    (both are known only after a fetch response for the partition)."""
    for tp in tps:
        lso, high = consumer.last_stable_offset(tp), consumer.highwater(tp)
        if lso is not None and lso < 0:
            continue  # a broker without transactions (tansu) reports none: nothing pends
        if lso is None or high is None or lso < high or await consumer.position(tp) < lso:
            return False
    return True


async def read_range(
    bootstrap: str,
    topic: str,
    partition: int,
    first: int,
    last: int,
    *,
    timeout: float = 30.0,
    keep: Callable[[Any], bool] | None = None,
) -> list[Any]:
    """The committed records of one partition with offsets ``first..last`` (inclusive), read
    with ``read_committed`` (aborted and compacted-away offsets are simply absent); with
    ``keep``, only the records it keeps are held (the projector's rebuild of a few runs from a
    whole partition)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed",
        max_partition_fetch_bytes=MAX_FETCH_BYTES,
    )
    try:
        await consumer.start()
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        stop = min(last + 1, end)
        consumer.seek(tp, first)
        records: list[Any] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while await consumer.position(tp) < stop:
            if loop.time() > deadline:
                raise TimeoutError(f"reading {topic}[{partition}] {first}..{last} timed out")
            batch = await consumer.getmany(tp, timeout_ms=500)
            records.extend(
                r
                for r in batch.get(tp, ())
                if first <= r.offset <= last and (keep is None or keep(r))
            )
        return records
    finally:
        await consumer.stop()


async def until_done(
    what: str, attempt: Callable[[], Awaitable[None]], logger: logging.Logger
) -> None:
    """Run ``attempt`` until it returns, retrying any failure (the broker away) with a backoff
    from 0.5 s doubling to 10 s, each failure logged on ``logger`` naming ``what``.
    Cancellation ends it."""
    delay = 0.5
    while True:
        try:
            await attempt()
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the broker is away: try again
            logger.error("%s failed (%s); retrying in %.1f s", what, type(exc).__name__, delay)
            await asyncio.sleep(delay)
            delay = min(10.0, delay * 2)
