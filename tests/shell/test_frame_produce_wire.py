"""The fan-out request's wire format (app.shell.worker.frame_produce) against aiokafka's own
Produce encoder and decoder: the same bytes for the request, the same errors read back from a
response of every version it may be given."""

from __future__ import annotations

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
