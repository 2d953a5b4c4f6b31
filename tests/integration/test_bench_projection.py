"""``a2ui-stream bench projection``'s fan-out with the produce, against the harness broker:
every subscriber gets its frame, one send each; the table shows both fan-out figures. Never a
duration."""

from __future__ import annotations

import pytest

from app.core.admission.payload_rules import PayloadRules
from app.devtools import bench_projection as bench
from app.shell.cli.broker import Broker
from app.shell.schema_files import load_schema_documents

pytestmark = [pytest.mark.broker]


async def test_fanout_produced_sends_one_frame_per_subscriber(broker: Broker) -> None:
    events = bench.v2_events(4, PayloadRules.from_documents(load_schema_documents()))
    rows = await bench.fanout_on(broker.bootstrap, events)
    description = broker.description
    assert {(r["subscribers"], r["mode"], r["path"]) for r in rows} == {
        (n, m, p)
        for n in bench.FANOUT
        for m in ("delta", "full")
        for p in ("request", "send_frame")
    }
    for r in rows:
        assert r["frames"] == r["subscribers"]
        assert r["topics"] == min(r["subscribers"], bench.FANOUT_TOPICS)
        assert r["cpu_p50_us"] > 0 and r["plan_p50_us"] > 0 and r["acked_p50_ms"] > 0
    result = {**bench.measure(3), "fanout_produced": rows, "broker": description}
    text = bench.table(result)
    assert "one send_frame per frame" in text and "each extra in-sync delta subscriber" in text
