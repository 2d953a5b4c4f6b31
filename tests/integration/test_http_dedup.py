"""A re-sent envelope over HTTP is answered when the validator has decided it, not after the
whole outcome wait (issue 19: a duplicate POST waited the full A2UI_STREAM_HTTP_WAIT_SECONDS,
10 s by default, because an E2 deduplication writes nothing for the gateway to see).

The worker here waits up to 600 s for an outcome; the client gives up after 60 s. Before the
change the second POST could only be answered at 600 s, so the client timed out (a hang, not
a speed, is what this detects)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest

from app.devtools.fault_kit import WorkerProcess, apply_topics
from app.shell.cli.broker import Broker
from app.shell.settings import load_settings
from tests.integration.http_kit import (
    TOKEN,
    Builder,
    Http,
    components_msg,
    create_msg,
    runs_path,
    v2,
    wait_http,
)

pytestmark = [pytest.mark.broker, pytest.mark.slow]


@pytest.fixture(scope="module")
def patient(broker: Broker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Http]:
    unique = uuid.uuid4().hex[:8]
    settings = replace(
        load_settings({}),
        topic_prefix=f"hdd{unique}.",
        app_id=f"a2ui-http-dedup-{unique}",
        partitions=3,
        fast_groups=True,
    )
    asyncio.run(apply_topics(broker, settings))
    env = {"A2UI_STREAM_HTTP_TOKENS": TOKEN, "A2UI_STREAM_HTTP_WAIT_SECONDS": "600"}
    worker = WorkerProcess(broker, settings, "dd0", tmp_path_factory.mktemp("dedup"), env)
    worker.start()
    try:
        yield wait_http(worker)
    finally:
        worker.stop()


def test_a_resent_envelope_is_answered_deduplicated_once_decided(patient: Http) -> None:
    run = f"dedup/run-{uuid.uuid4().hex}"
    b = Builder()
    envelope = b.envelope(v2(b.sid("d"), [create_msg(), components_msg()]))
    first = patient.post(runs_path(run, "/envelopes"), envelope, timeout=60)
    assert first.status == 201, first.raw[:300]
    again = patient.post(runs_path(run, "/envelopes"), envelope, timeout=60)
    assert again.status == 201, again.raw[:300]
    assert again.body == {"sequence": first.body["sequence"], "deduplicated": True}
    # and a refusal is still answered as one (its dead letter read before the answer)
    bad = dict(envelope, correlationId=envelope["correlationId"], type="ui.other")
    refused = patient.post(runs_path(run, "/envelopes"), bad, timeout=60)
    assert refused.status in (400, 409, 422), refused.raw[:300]
