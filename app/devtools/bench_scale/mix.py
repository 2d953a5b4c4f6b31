"""The seeded mix the scale bench publishes (``MixConfig``, ``Mix``) and where it samples RSS
(``checkpoints``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

import orjson

from app.core.common.examples import BASIC_CATALOG
from app.core.runlog.keys import partition_for_run
from app.devtools.bench_scale.designs import NOW

__all__ = ["Mix", "MixConfig", "MixRecord", "MixRun", "checkpoints"]


@dataclass(frozen=True)
class MixConfig:
    active_runs: int = 400  # runs receiving envelopes at a time, their records interleaved
    envelopes_per_run: tuple[int, int] = (10, 90)
    surfaces_per_run: tuple[int, int] = (1, 3)
    cancelled: float = 0.10  # of runs, after their last envelope (POST .../cancel)
    deleted: float = 0.05  # of runs, after their last envelope (tombstones)
    refused: float = 0.01  # of envelopes (an Image component)
    duplicated: float = 0.01  # of envelopes (the run's last admitted record, re-sent)
    seed: int = 15

    def for_size(self, envelopes: int) -> MixConfig:
        """Fewer open runs for a small N, so that runs still finish (and some are cancelled or
        deleted) within it."""
        return replace(self, active_runs=max(4, min(self.active_runs, envelopes // 100)))


@dataclass(eq=False)
class MixRun:
    run_id: str
    partition: int
    quota: int  # envelopes it will receive
    surfaces: int  # surfaces it will have
    fate: str  # "open" | "cancel" | "delete"
    sent: int = 0
    created: int = 0  # surfaces created so far
    events: int = 0  # recorded events expected (the last sequence is events - 1)
    last: bytes | None = None  # its last admitted record (a duplicate re-sends it)
    deleted: bool = False
    finished: bool = False


@dataclass(frozen=True)
class MixRecord:
    run: MixRun
    value: bytes  # the admission record {runId, envelope}
    kind: str  # "create" | "update" | "refused" | "duplicate"
    sequence: int | None  # the sequence it will be recorded at (None: refused or duplicate)


def _message(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"version": "v0.9", kind: body}


def _components() -> list[dict[str, Any]]:
    return [
        {"id": "root", "component": "Column", "children": ["h", "name", "submit"]},
        {"id": "h", "component": "Text", "text": "Launch brief", "variant": "h2"},
        {
            "id": "name",
            "component": "TextField",
            "label": "Product name",
            "value": {"path": "/name"},
        },
        {"id": "submit_label", "component": "Text", "text": "Submit"},
        {
            "id": "submit",
            "component": "Button",
            "child": "submit_label",
            "action": {"event": {"name": "resume", "context": {"name": {"path": "/name"}}}},
        },
    ]


class Mix:
    """The bench's envelopes, generated as they are published (seeded, deterministic)."""

    def __init__(self, config: MixConfig, partitions: int, token: str) -> None:
        self.config = config
        self.partitions = partitions
        self.token = token
        self.rnd = random.Random(config.seed)
        self.runs: list[MixRun] = []
        self.counter = 0
        self.records = 0  # generated, and their bytes
        self.bytes = 0
        self.active = [self._new_run() for _ in range(config.active_runs)]

    def _new_run(self) -> MixRun:
        run_id = f"scale/{self.token}-{len(self.runs):06d}"
        roll = self.rnd.random()
        fate = "open"
        if roll < self.config.cancelled:
            fate = "cancel"
        elif roll < self.config.cancelled + self.config.deleted:
            fate = "delete"
        run = MixRun(
            run_id,
            partition_for_run(run_id, self.partitions),
            self.rnd.randint(*self.config.envelopes_per_run),
            self.rnd.randint(*self.config.surfaces_per_run),
            fate,
        )
        self.runs.append(run)
        return run

    def take(self, count: int) -> tuple[list[MixRecord], list[MixRun]]:
        """The next ``count`` records, and the runs that received their last envelope."""
        records, finished = [], []
        for _ in range(count):
            slot = self.rnd.randrange(len(self.active))
            run = self.active[slot]
            records.append(self._record(run))
            if run.sent >= run.quota:
                run.finished = True
                finished.append(run)
                self.active[slot] = self._new_run()
        return records, finished

    def _kind(self, run: MixRun) -> str:
        if run.created == 0 or (run.created < run.surfaces and self.rnd.random() < 0.1):
            return "create"
        roll = self.rnd.random()
        if roll < self.config.refused:
            return "refused"
        if roll < self.config.refused + self.config.duplicated and run.last is not None:
            return "duplicate"
        return "update"

    def _record(self, run: MixRun) -> MixRecord:
        kind = self._kind(run)
        run.sent += 1
        self.records += 1
        if kind == "duplicate" and run.last is not None:
            self.bytes += len(run.last)
            return MixRecord(run, run.last, kind, None)
        value = orjson.dumps({"runId": run.run_id, "envelope": self.envelope(run, kind)})
        self.bytes += len(value)
        if kind == "refused":
            return MixRecord(run, value, kind, None)
        run.events += 1
        run.last = value
        return MixRecord(run, value, kind, run.events - 1)

    def envelope(self, run: MixRun, kind: str = "update") -> dict[str, Any]:
        """A ``ui.a2ui-surface`` envelope for ``run`` (a new surface for ``create``, else on
        one of its surfaces). Only ``create`` changes the run (its surface count)."""
        n = self.counter
        self.counter += 1
        if kind == "create":
            run.created += 1
            sid = f"s{run.created}"
            messages = [
                _message("createSurface", {"surfaceId": sid, "catalogId": BASIC_CATALOG}),
                _message("updateComponents", {"surfaceId": sid, "components": _components()}),
                _message("updateDataModel", {"surfaceId": sid, "value": {"name": ""}}),
            ]
        else:
            sid = f"s{self.rnd.randint(1, max(1, run.created))}"
            if kind == "refused":  # no network egress: an Image is refused (a dead letter)
                image = {"id": "h", "component": "Image", "url": f"https://x.example/{n}.png"}
                messages = [_message("updateComponents", {"surfaceId": sid, "components": [image]})]
            elif self.rnd.random() < 0.5:
                heading = {"id": "h", "component": "Text", "text": f"Step {n}", "variant": "h2"}
                messages = [
                    _message("updateComponents", {"surfaceId": sid, "components": [heading]})
                ]
            else:
                model = {"surfaceId": sid, "path": "/name", "value": f"Draft {n}"}
                messages = [_message("updateDataModel", model)]
        return {
            "type": "ui.a2ui-surface",
            "schemaVersion": 2,
            "envelopeId": f"env-{self.token}-{n}",
            "correlationId": f"corr-{self.token}-{n}",
            "nodeId": "gate",
            "payload": {
                "version": "v0.9",
                "catalogId": BASIC_CATALOG,
                "surfaceId": sid,
                "messages": messages,
            },
            "meta": {"source": "ai-generation", "ts": NOW},
        }


def checkpoints(total: int) -> list[int]:
    """Where RSS is sampled: 1-2-5 steps from 1,000 up to ``total`` (none below total/200),
    and ``total`` itself."""
    marks = []
    base = 1000
    while base < total:
        marks += [base * m for m in (1, 2, 5) if total // 200 <= base * m < total]
        base *= 10
    return sorted(set(marks)) + [total]
