"""The fan-out request's wire format (app.shell.worker.frame_produce) against aiokafka's own
Produce encoder and decoder: the same bytes for the request, the same errors read back from a
response of every version it may be given."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.protocol.produce import (
    ProduceRequest_v3,
    ProduceRequest_v7,
    ProduceResponse_v3,
    ProduceResponse_v4,
    ProduceResponse_v5,
    ProduceResponse_v7,
)

from app.shell.worker.frame_produce import decode_errors, encode_request

ENTRIES = [(b"a2ui.subscriber.a", b"batch-one"), (b"t", b"b" * 700), ("é".encode(), b"")]


@pytest.mark.parametrize("request_class", [ProduceRequest_v3, ProduceRequest_v7])
def test_the_request_is_the_bytes_aiokafka_encodes(request_class: type) -> None:
    topics = [(name.decode(), [(0, batch)]) for name, batch in ENTRIES]
    assert encode_request(ENTRIES, 30_000) == request_class(None, -1, 30_000, topics).encode()


@pytest.mark.parametrize(
    ("version", "response_class", "extra"),
    [
        (3, ProduceResponse_v3, ()),
        (4, ProduceResponse_v4, ()),
        (5, ProduceResponse_v5, (0,)),
        (7, ProduceResponse_v7, (0,)),
    ],
)
def test_errors_are_read_from_a_response_of_each_version(
    version: int, response_class: type, extra: tuple[int, ...]
) -> None:
    answers = [
        ("ok", [(0, 0, 5, -1, *extra)]),
        ("é", [(0, 10, -1, -1, *extra)]),
        ("two", [(0, 0, 1, -1, *extra), (1, 6, -1, -1, *extra)]),
    ]
    body = response_class(answers, 0).encode()
    assert decode_errors(body, version) == [("é", 0, 10), ("two", 1, 6)]


class _Cluster:
    """A producer's metadata: the leader of each topic's partition 0, and its listeners."""

    def __init__(self, leader: int) -> None:
        self.leader, self.asked = leader, 0
        self.listeners: list[Any] = []

    def leader_for_partition(self, tp: Any) -> int:
        self.asked += 1
        return self.leader

    def add_listener(self, listener: Any) -> None:
        self.listeners.append(listener)

    def updated(self, leader: int) -> None:  # as aiokafka's update_metadata does
        self.leader = leader
        for listener in self.listeners:
            listener(self)


class _Client:
    def __init__(self, cluster: _Cluster) -> None:
        self.cluster = cluster
        self.nodes: list[int] = []

    async def send(self, node: int, request: Any) -> Any:  # replaced by _answered
        raise NotImplementedError


async def test_leaders_are_asked_once_per_topic_until_the_metadata_changes() -> None:
    from app.shell.worker import frame_produce

    cluster = _Cluster(leader=1)
    client = _Client(cluster)
    producer = SimpleNamespace(client=client)
    client.send = _answered(client)  # type: ignore[method-assign]
    frames = [(f"t{i}", b"k", b"v", ()) for i in range(3)]
    partitions: dict[str, int | None] = {f"t{i}": 0 for i in range(3)}
    for _ in range(2):
        assert await frame_produce.produce_frames(producer, frames, partitions) == [None] * 3
    assert cluster.asked == 3 and client.nodes == [1, 1]
    cluster.updated(leader=2)  # a leader moved: asked again, and the frames follow it
    assert await frame_produce.produce_frames(producer, frames, partitions) == [None] * 3
    assert cluster.asked == 6 and client.nodes == [1, 1, 2]


def _answered(client: _Client) -> Any:
    async def send(node: int, request: Any) -> Any:
        client.nodes.append(node)
        body = ProduceResponse_v7([], 0).encode()  # no partition answered an error
        return request.build(request._CLASSES[-1]).RESPONSE_TYPE.decode(body)

    return send
