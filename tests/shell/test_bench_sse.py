"""``a2ui-stream bench sse``: its options and the parts that need no broker (the inputs, the SSE
byte and delay accounting, the table). The figures themselves are for people, never asserted."""

from __future__ import annotations

import argparse

import pytest

from app.core.admission.payload_rules import PayloadRules
from app.core.projection.sse_frames import keep_alive, sse_frame
from app.devtools import bench_sse as bench
from app.shell.schema_files import load_schema_documents


def test_bench_sse_registers_its_options() -> None:
    parser = argparse.ArgumentParser()
    bench.register(parser.add_subparsers())
    args = parser.parse_args(["sse", "--json", "--subscribers", "4", "--events", "3"])
    assert (args.json, args.subscribers, args.events, args.rate, args.components) == (
        True,
        4,
        3,
        10.0,
        100,
    )
    assert args.func is bench.run


def test_the_updates_are_valid_v1_surfaces_that_each_change_one_leaf() -> None:
    rules = PayloadRules.from_documents(load_schema_documents())
    payloads = bench.surfaces(components=10, events=6)
    assert len(payloads) == 7
    for old, new in zip(payloads, payloads[1:], strict=False):
        assert rules.check_v1(new) is None
        pairs = zip(old["surface"]["components"], new["surface"]["components"], strict=True)
        changed = [(a, b) for a, b in pairs if a != b]
        assert len(changed) == 1 and changed[0][0].keys() == changed[0][1].keys() >= {"text"}


@pytest.mark.parametrize("cut", [1, 7, 20, 1000])
def test_a_frame_counts_when_its_blank_line_arrives_whatever_the_chunking(cut: int) -> None:
    frames = [sse_frame("ui.a2ui-surface", b'{"a":1}', 4), keep_alive()]
    frames.append(sse_frame("ui.a2ui-surface.delta", b'{"patch":[]}', 5))
    stream = b"".join(frames)
    sub = bench.Subscriber(delta=True)
    for i, start in enumerate(range(0, len(stream), cut)):
        sub.feed(stream[start : start + cut], now=float(i))
    assert sub.received.keys() == {4, 5} and sub.last == 5
    assert sub.received[4][1] == len(frames[0]) and sub.received[5][1] == len(frames[2])
    assert sub.received[5][0] == float((len(stream) - 1) // cut)  # the chunk with its end


def test_delays_and_spread_over_subscribers_and_events() -> None:
    a, b = bench.Subscriber(delta=False), bench.Subscriber(delta=True)
    a.received = {1: (10.010, 100), 2: (10.120, 100)}
    b.received = {1: (10.030, 10)}  # missed event 2: no pair, no delay
    delays = bench.delays_ms([a, b], {1: 10_000, 2: 10_100})
    assert [round(d) for d in sorted(delays)] == [10, 20, 30]
    assert [round(s) for s in bench.spreads_ms([a, b], [1, 2])] == [20, 0]


def test_the_table_prints_each_figure_with_its_baseline() -> None:
    ms = {
        f"{name}_ms_{q}": v
        for name in ("sse", "delta", "full", "baseline", "spread", "single_sse", "single_baseline")
        for q, v in (("p50", 12.5), ("p99", 40.0))
    }
    result = {
        **ms,
        "subscribers": 500,
        "events": 100,
        "components": 100,
        "rate_per_second": 10.0,
        "broker": "Apache Kafka",
        "machine": "x86_64",
        "load_average_1m_before": 0.5,
        "bytes_per_subscriber_delta": 20_000.0,
        "bytes_per_subscriber_full": 600_000.0,
        "bytes_ratio_delta_to_full": 1 / 30,
        "sse_streams_gauge_before": 0,
        "sse_streams_gauge_peak": 500,
        "cpu_share_worker": 0.5,
        "cpu_share_subscribers": 0.25,
        "subscribers_refused": 0,
        "subscribers_missing_events": 0,
    }
    text = bench.table(result)
    assert "500 subscribers" in text and "aiokafka log tail" in text
    assert "12.5 / 40.0 ms" in text and "3.3 %" in text and "600,000" in text
    assert "50% + 25%" in text


class _Transport:
    def __init__(self) -> None:
        self.written, self.closed = b"", False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("cut", [1, 5, 64, 100_000])
async def test_the_reader_dechunks_the_response_whatever_the_cuts(cut: int) -> None:
    """``SseReader``: the request goes out on connect; the status is read from the head; the
    chunked body (RFC 9112 §7.1, with a chunk extension) reaches ``Subscriber.feed`` whole,
    each frame stamped with the call that completed it; the connection closes at the last
    event."""
    import asyncio

    from app.devtools.bench_sse_clients import SseReader

    frames = [sse_frame("ui.a2ui-surface", b'{"a":1}', 4), keep_alive()]
    frames.append(sse_frame("ui.a2ui-surface.delta", b'{"patch":[]}', 5))
    body = b"".join(
        b"%x%s\r\n%s\r\n" % (len(f), b";x=1" if i == 1 else b"", f) for i, f in enumerate(frames)
    )
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    sub = bench.Subscriber(delta=True)
    reader, transport = SseReader(sub, b"GET / HTTP/1.1\r\n\r\n", last=5), _Transport()
    reader.connection_made(transport)  # type: ignore[arg-type]
    stream = head + body
    for start in range(0, len(stream), cut):
        assert not transport.closed
        reader.data_received(stream[start : start + cut])
    assert transport.written == b"GET / HTTP/1.1\r\n\r\n" and transport.closed
    assert sub.status == 200 and reader.answered.done()
    assert sub.received.keys() == {4, 5} and sub.last == 5
    assert sub.received[5][1] == len(frames[2])
    reader.connection_lost(None)
    await asyncio.wait_for(reader.done, 1)
