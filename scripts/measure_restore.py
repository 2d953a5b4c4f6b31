"""Measure the validator's restore of its partitions: from the run-state changelog (issue 15
item 1) against the replay of the whole log (the design before it), on the same topics.

    KAFKA_BOOTSTRAP=host:port python scripts/measure_restore.py [--runs 60] [--per-run 800]

Publishes the fault corpus (``runs`` x ``per_run`` admission records, 3 partitions) to fresh
topics, lets one ``a2ui-stream worker`` decide it and stops the worker; then restores every
partition in this process, alternately by replay (the validator with no changelog topic: what
the code before issue 15 item 1 did) and from the changelog, three times each, and prints per
way the records read and the wall time (min-max). A devtool: the product never imports it.
"""

# ruff: noqa: E402 (the imports after install() are deliberately after it)
from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition

from app.compiled_core import install

install()  # an entry point: the compiled core, as the worker uses it, before app.core is imported

from app.core.admission.policy import HostPolicy
from app.devtools.fault_kit import (
    RULES,
    WorkerProcess,
    apply_topics,
    corpus,
    expected_outcomes,
    publish,
    wait_for_outcomes,
)
from app.shell.cli.broker import Broker, BrokerFeatures
from app.shell.settings import load_settings
from app.shell.worker.metrics import Metrics
from app.shell.worker.topics_admin import desired_for
from app.shell.worker.validator_config import ValidatorConfig
from app.shell.worker.validator_loop import ValidatorLoop
from app.shell.worker.validator_take import restore


async def _restore_all(
    config: ValidatorConfig, partitions: int
) -> tuple[float, dict[str, int], int]:
    loop = ValidatorLoop(config, HostPolicy(), RULES, Metrics())
    consumer = AIOKafkaConsumer(
        bootstrap_servers=config.bootstrap, group_id=config.group_id, enable_auto_commit=False
    )
    await consumer.start()
    loop.consumer = consumer
    try:
        began = time.perf_counter()
        runs = 0
        for p in range(partitions):
            restored, _before, _way, _committed = await restore(
                loop, TopicPartition(config.admission_topic, p)
            )
            runs += len(restored.runs)
        return time.perf_counter() - began, dict(loop.restored_records), runs
    finally:
        await consumer.stop()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--per-run", type=int, default=800)
    args = parser.parse_args()
    bootstrap = os.environ["KAFKA_BOOTSTRAP"]
    unique = uuid.uuid4().hex[:8]
    settings = replace(
        load_settings({}),
        topic_prefix=f"measure-{unique}.",
        app_id=f"measure-{unique}",
        partitions=3,
    )
    broker = Broker("external", bootstrap, BrokerFeatures(True, True, False), "KAFKA_BOOTSTRAP")
    await apply_topics(broker, settings)
    specs = {s.id: s for s in desired_for(settings)}
    records = corpus(runs=args.runs, per_run=args.per_run, seed=5)
    expected = expected_outcomes(records)
    total = sum(map(len, expected.admitted.values())) + expected.refused
    with tempfile.TemporaryDirectory() as tmp:
        worker = WorkerProcess(broker, settings, "m1", Path(tmp))
        worker.start()
        try:
            began = time.perf_counter()
            await publish(bootstrap, specs["admission"].name, records)
            observed = await wait_for_outcomes(
                broker, settings, total, timeout=900, workers=[worker]
            )
            print(
                f"{len(records)} admission records -> {len(observed.events)} log records, "
                f"{len(observed.dead_letters)} dead letters, decided in {time.perf_counter() - began:.1f} s"
            )
        finally:
            worker.stop()
    config = ValidatorConfig(
        bootstrap=bootstrap,
        admission_topic=specs["admission"].name,
        log_topic=specs["log"].name,
        deadletter_topic=specs["deadletter"].name,
        partitions=3,
        group_id=f"{settings.app_id}-validator",
        transactional_id="unused",
        resumes_topic=specs["resumes"].name,
        changelog_topic=specs["runstate"].name,
    )
    ways = {"replay (before)": replace(config, changelog_topic=""), "changelog (after)": config}
    results: dict[str, list[tuple[float, dict[str, int], int]]] = {w: [] for w in ways}
    for _ in range(3):
        for way, cfg in ways.items():
            results[way].append(await _restore_all(cfg, 3))
    for way, got in results.items():
        times = sorted(t for t, _, _ in got)
        read, runs = got[0][1], got[0][2]
        print(
            f"{way:18} 3 partitions, {runs} runs: read changelog={read['changelog']} "
            f"log={read['log']} deadletter={read['deadletter']}; "
            f"{times[0] * 1000:.0f}-{times[-1] * 1000:.0f} ms"
        )


if __name__ == "__main__":
    asyncio.run(main())
