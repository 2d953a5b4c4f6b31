"""Group-fenced transactional offset commits (KIP-447) through an aiokafka producer.

Shell module (issue 15, fencing; docs/pipeline.md, "KIP-447 by hand"). aiokafka 0.14 commits
a transaction's consumer offsets with TxnOffsetCommit v0, which names the group but not the
member: the broker cannot tell a member the group has moved past (a zombie: a GC pause, a
stalled VM) from the partition's owner, so a design with one transactional producer per
worker instead of one per partition would not be fenced. ``fence_offsets`` makes a
producer's offset commits go as TxnOffsetCommit v3 instead, carrying the group generation
and member id its consumer holds when the request is built (``member``). The broker refuses
a stale one (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); the transaction then
fails with ``CommitFenced`` (``send_offsets_to_transaction`` raises it) and can only be aborted,
with everything it wrote.

Only the request changes: aiokafka's sender still adds the group to the transaction
(AddOffsetsToTxn), finds the group coordinator and retries what it retries. The request and
response layouts are Kafka's TxnOffsetCommit v3 (flexible versions: compact strings and
arrays, tagged fields). It imports nothing of the project.
"""

from __future__ import annotations

import collections
import types
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.client import CoordinationType
from aiokafka.errors import GroupAuthorizationFailedError, KafkaError
from aiokafka.producer.sender import TxnOffsetCommitHandler
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Int64,
    Schema,
    TaggedFields,
)

__all__ = ["FENCED_CODES", "CommitFenced", "Member", "fence_offsets", "member_of"]

Member = Callable[[], tuple[int, str]]  # the consumer's (generation, member id) now

# ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID: the group has moved on.
FENCED_CODES = frozenset({22, 25, 82})


class CommitFenced(KafkaError):  # type: ignore[misc]
    """The group refused the transaction's offsets: this member no longer owns them."""

    retriable = False


class _TxnOffsetCommitResponseV3(Response):  # type: ignore[misc]
    API_KEY = 28
    API_VERSION = 3
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "topics",
            CompactArray(
                ("name", CompactString("utf-8")),
                (
                    "partitions",
                    CompactArray(
                        ("partition_index", Int32), ("error_code", Int16), ("tags", TaggedFields)
                    ),
                ),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class _TxnOffsetCommitRequestV3(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 28
    API_VERSION = 3
    RESPONSE_TYPE = _TxnOffsetCommitResponseV3
    SCHEMA = Schema(
        ("transactional_id", CompactString("utf-8")),
        ("group_id", CompactString("utf-8")),
        ("producer_id", Int64),
        ("producer_epoch", Int16),
        ("generation_id", Int32),
        ("member_id", CompactString("utf-8")),
        ("group_instance_id", CompactString("utf-8")),  # null: no static membership
        (
            "topics",
            CompactArray(
                ("name", CompactString("utf-8")),
                (
                    "partitions",
                    CompactArray(
                        ("partition_index", Int32),
                        ("committed_offset", Int64),
                        ("committed_leader_epoch", Int32),
                        ("committed_metadata", CompactString("utf-8")),
                        ("tags", TaggedFields),
                    ),
                ),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class _TxnOffsetCommitRequest(Request[_TxnOffsetCommitRequestV3]):  # type: ignore[misc]
    API_KEY = 28

    def __init__(self, fields: tuple[Any, ...]) -> None:
        self.fields = fields

    def build(self, request_struct_class: type[Any]) -> Any:
        return request_struct_class(*self.fields)


class _Answer:
    """A v3 response as aiokafka's v0 handler reads one: ``errors`` by topic."""

    def __init__(self, errors: list[tuple[str, list[tuple[int, int]]]]) -> None:
        self.errors = errors


class _FencedHandler(TxnOffsetCommitHandler):  # type: ignore[misc]
    def __init__(self, sender: Any, offsets: Any, group_id: str, member: Member) -> None:
        super().__init__(sender, offsets, group_id)
        self._member = member

    def create_request(self) -> Any:
        txn = self._sender._txn_manager
        generation, member_id = self._member()
        by_topic: dict[str, list[tuple[Any, ...]]] = collections.defaultdict(list)
        for tp, offset in sorted(self._offsets.items()):
            by_topic[tp.topic].append((tp.partition, offset.offset, -1, offset.metadata, {}))
        topics: list[tuple[Any, ...]] = [(topic, parts, {}) for topic, parts in by_topic.items()]
        return _TxnOffsetCommitRequest(
            (
                txn.transactional_id,
                self._group_id,
                txn.producer_id,
                txn.producer_epoch,
                generation,
                member_id,
                None,
                topics,
                {},
            )
        )

    def handle_response(self, resp: Any) -> Any:
        errors = [(t[0], [(p[0], p[1]) for p in t[1]]) for t in resp.topics]
        fenced = sorted({code for _, parts in errors for _, code in parts} & FENCED_CODES)
        if fenced:
            self._sender._txn_manager.error_transaction(
                CommitFenced(f"group {self._group_id} refused the offsets (error {fenced[0]})")
            )
            return None
        return super().handle_response(_Answer(errors))


def member_of(consumer: Any) -> Member:
    """The (generation, member id) of an aiokafka group consumer, read when asked."""

    def member() -> tuple[int, str]:
        coordinator = consumer._coordinator
        return coordinator.generation, coordinator.member_id

    return member


def fence_offsets(producer: AIOKafkaProducer, member: Member) -> None:
    """From now on ``producer``'s transactional offset commits carry ``member()``."""
    sender = producer._sender

    async def do_txn_offset_commit(self: Any, offsets: Any, group_id: str) -> None:
        if not offsets:
            return
        try:  # as aiokafka's own ``Sender._do_txn_offset_commit``
            node_id = await self._find_coordinator(CoordinationType.GROUP, group_id)
        except GroupAuthorizationFailedError as exc:
            self._txn_manager.error_transaction(exc)
            return
        await _FencedHandler(self, offsets, group_id, member).do(node_id)

    sender._do_txn_offset_commit = types.MethodType(do_txn_offset_commit, sender)
