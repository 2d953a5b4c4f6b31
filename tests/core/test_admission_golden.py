"""Golden outputs of ``app.core.admission.validator.validate`` for every rule of the admission order
that is decided around the envelope steps (intake, the run, the record's shape, the host commands
and their dispatch by type, the terminal run, the encoding), and for each outcome kind.

The golden file (tests/core/golden/admission_outputs.json) holds the complete output of each
case: a dead letter's key and every field of its record (code, rule, pointer, message,
details, runId, correlationId, the original's digest), an append's key and recorded bytes.
It was written by the code before the admission order became one table (d09ee3e), so it
pins that the table decides byte for byte as the chain of ``if``s did. Rewrite it only for a
change a producer is meant to see: ``python -m tests.core.test_admission_golden``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.core.admission import validator
from app.core.admission.command_seal import HEADER, seal
from app.core.admission.host_commands_call import ForkSource
from app.core.admission.policy import HostPolicy
from app.core.admission.refusal import Violation
from app.core.admission.rules import Rule
from app.core.admission.validator import (
    Append,
    AppendMany,
    Duplicate,
    Reject,
    SourceRecord,
    validate,
)
from app.core.runlog.keys import partition_for_run
from app.core.runlog.run_state import RunState
from tests.core.admission_support import BASIC, rules

GOLDEN = Path(__file__).resolve().parent / "golden" / "admission_outputs.json"
NOW = "2026-01-01T00:00:00Z"
PARTITIONS = 3
RUN = "t/run-1"
SECRET = "sk-live-0123456789abcdef"
KEY = b"test-gateway-key-of-at-least-32-bytes!"
POLICY = HostPolicy(secrets={RUN: (("key", SECRET),)}, command_key=KEY)


def _envelope(n: int, *messages: dict[str, Any], kind: str = "ui.a2ui-surface") -> dict[str, Any]:
    return {
        "type": kind,
        "schemaVersion": 2,
        "envelopeId": f"env-golden-{n}",
        "correlationId": f"corr-golden-{n}",
        "payload": {"version": "v0.9", "catalogId": BASIC, "surfaceId": "s", "messages": messages}
        if kind == "ui.a2ui-surface"
        else {"text": "x"},
        "meta": {"source": "ai-generation", "ts": NOW},
    }


CREATE = {"version": "v0.9", "createSurface": {"surfaceId": "s", "catalogId": BASIC}}


def _envelope_record(n: int, run: str = RUN) -> dict[str, Any]:
    return {"runId": run, "envelope": _envelope(n, CREATE if n == 0 else _data(n))}


def _data(n: int) -> dict[str, Any]:
    return {"version": "v0.9", "updateDataModel": {"surfaceId": "s", "value": {"n": n}}}


def _command(run: str = RUN, **command: Any) -> dict[str, Any]:
    return {"runId": run, "command": command}


@dataclass(frozen=True)
class Send:
    """One record to decide: its bytes (or a record to encode), key, partition, seal."""

    record: Any = None
    raw: bytes | None = None
    key: bytes | None | str = "run"  # "run": the record's runId
    partition: int | None = None  # None: the runId's
    sealed: bool | None = None  # None: sealed iff it is a command
    fetched: Callable[[ForkSource], Any] | None = None


def _source(send: Send, offset: int) -> SourceRecord:
    value = send.raw if send.record is None else orjson.dumps(send.record)
    run = send.record.get("runId") if isinstance(send.record, dict) else None
    key = (run.encode() if isinstance(run, str) else None) if send.key == "run" else send.key
    assert not isinstance(key, str)
    partition = send.partition
    if partition is None:
        partition = partition_for_run(run, PARTITIONS) if isinstance(run, str) else 0
    sealed = send.sealed
    if sealed is None:
        sealed = isinstance(send.record, dict) and "command" in send.record
    headers = ((HEADER, seal(KEY, value)),) if sealed and value is not None else ()
    return SourceRecord("a2ui.admission", partition, offset, key, value, headers)


def _shown(out: Any) -> dict[str, Any]:
    if isinstance(out, Reject):
        return {
            "reject": {
                "key": None if out.key is None else out.key.decode("utf-8", "replace"),
                "code": out.code,
                "runId": out.run_id,
                "letter": orjson.loads(out.value),
            }
        }
    if isinstance(out, Append):
        return {
            "append": {
                "key": out.key.decode(),
                "sequence": out.sequence,
                "drift": out.drift,
                "event": orjson.loads(out.value),
            }
        }
    if isinstance(out, AppendMany):
        return {
            "appendMany": {
                "records": [[s, k.decode(), orjson.loads(v)] for s, k, v in out.records],
                "resumes": [orjson.loads(r) for r in out.resumes],
            }
        }
    assert isinstance(out, Duplicate), out
    return {"duplicate": [out.run_id, out.correlation_id, out.sequence]}


def _drive(sends: list[Send], policy: HostPolicy = POLICY) -> list[dict[str, Any]]:
    """Decide ``sends`` in order on one partition's states, as the validator loop keeps them."""
    states: dict[str, RunState] = {}
    shown = []
    for offset, send in enumerate(sends):
        out = validate(
            _source(send, offset),
            states.get,
            policy,
            rules(),
            now=NOW,
            partitions=PARTITIONS,
            max_bytes=4096,
            fetched=send.fetched or (lambda _s: None),
        )
        if isinstance(out, Append | AppendMany):
            states[out.run_id] = out.state
        shown.append(_shown(out))
    return shown


def _nested(levels: int) -> bytes:
    return b'{"runId": "t/run-1", "envelope": ' + b"[" * levels + b"]" * levels + b"}"


CREATED = Send(_command(type="run.create", workflowId="w"))
APPROVAL = Send(_command(type="run.create", workflowId="conformance-approval"))
CANCELLED = [CREATED, Send(_command(type="run.cancel"))]
FORK: dict[str, Any] = {
    "type": "run.fork",
    "sourceRunId": "t/src",
    "fromSeq": 1,
    "mode": "branch",
    "source": {"partition": 0, "firstOffset": 0, "lastOffset": 0},
}
UNENCODABLE = {"runId": "t/src", "sequence": 0, "type": "run.created", "payload": {1: 2}}


def cases() -> Iterator[tuple[str, list[Send]]]:
    """Each case: the records of one partition, in order (the last output is the point)."""
    # intake: the record's bytes
    yield "record-bytes", [Send(raw=None, key=b"t/run-1")]
    yield "record-size", [Send(raw=b"{" * 5000, key=b"t/run-1")]
    yield "record-utf8", [Send(raw=b'\xff{"runId": "t/run-1"}', key=b"t/run-1")]
    yield "record-json", [Send(raw=b'{"runId": "t/run-1", ', key=b"t/run-1")]
    yield "record-json-depth", [Send(raw=b"[" * 1100 + b"]" * 1100, key=b"t/run-1")]
    yield "number-range-double", [Send(raw=b'{"runId": "t/run-1", "x": 1e400}', key=b"t/run-1")]
    yield "number-range-int", [Send(raw=b'{"runId": "t/run-1", "x": 1' + b"0" * 30 + b"}")]
    yield "record-duplicate-key", [Send(raw=b'{"runId": "t/run-1", "runId": "t/run-1"}')]
    yield "depth-intake", [Send(raw=_nested(300), key=b"t/run-1")]
    yield "record-key", [Send(_envelope_record(0), key=b"t/other")]
    yield "record-key-not-utf8", [Send(_envelope_record(0), key=b"\xff")]
    # the run: its id and its partition
    yield "run-id", [Send({"runId": "t/bad id", "envelope": {"correlationId": "c-1"}})]
    yield "record-partition", [Send(_envelope_record(0), partition=2)]
    # the record's shape: an envelope, a command, or neither
    yield (
        "record-shape",
        [Send({"runId": RUN, "envelope": {"correlationId": "c-2"}, "command": {}})],
    )
    yield "record-shape-no-run", [Send({"envelope": {}, "command": {}}, key=None)]
    yield "command-without-run", [Send({"command": {"type": "run.cancel"}}, key=None)]
    yield "not-an-object", [Send(raw=b"[1, 2]", key=None)]
    # host commands
    yield "command-gateway", [Send(_command(type="run.cancel"), sealed=False)]
    yield "command-identifier-secret", [Send(_command(type="interrupt.resolve", nodeId=SECRET))]
    yield "host-command-not-object", [Send({"runId": RUN, "command": 7})]
    yield "host-command-unknown-type", [Send(_command(type="run.pause"))]
    yield "host-command-list-type", [Send(_command(type=["run.cancel"]))]
    yield "host-command-no-type", [Send(_command(workflowId="w"))]
    yield "run-create", [APPROVAL]
    yield "run-create-noop", [Send(_command(type="run.create", workflowId="conformance-noop"))]
    yield "run-create-invalid", [Send(_command(type="run.create", workflowId=""))]
    yield "run-fresh", [CREATED, CREATED]
    yield "run-exists", [Send(_command(type="run.cancel"))]
    yield "run-cancel", CANCELLED
    yield "run-live-command", [*CANCELLED, Send(_command(type="run.cancel"))]
    yield "interrupt-resolve", [APPROVAL, Send(_command(type="interrupt.resolve", nodeId="gate"))]
    yield "interrupt-pending", [CREATED, Send(_command(type="interrupt.resolve", nodeId="n"))]
    yield "interrupt-ended", [*CANCELLED, Send(_command(type="interrupt.resolve", nodeId="gate"))]
    yield "action-confinement", [CREATED, Send(_command(type="action.submit", name="rm"))]
    yield (
        "action-surface-live",
        [CREATED, Send(_command(type="action.submit", name="resume", surfaceId="s"))],
    )
    yield "action-surface-id", [CREATED, Send(_command(type="action.submit", name="resume"))]
    yield (
        "action-run-live",
        [*CANCELLED, Send(_command(type="action.submit", name="resume", surfaceId="s"))],
    )
    yield "fork-mode", [Send(_command(**{**FORK, "mode": "x"}))]
    yield "fork-shape", [Send(_command(type="run.fork", mode="branch"))]
    yield "fork-target-fresh", [CREATED, Send(_command(**FORK))]
    yield "fork-source", [Send(_command(**FORK))]
    yield "fork-encode", [Send(_command(**FORK), fetched=lambda _s: [UNENCODABLE])]
    # the envelope's path around the decision
    yield "admitted", [Send(_envelope_record(0)), Send(_envelope_record(1))]
    yield "deduplicated", [Send(_envelope_record(0)), Send(_envelope_record(0))]
    yield "envelope-shape", [Send({"runId": RUN, "envelope": {"type": "x"}})]
    yield "run-live-envelope", [*CANCELLED, Send(_envelope_record(0))]
    yield (
        "identifier-secret",
        [Send({"runId": RUN, "envelope": _envelope(0, CREATE) | {"envelopeId": "e-" + SECRET}})],
    )


CASES = dict(cases())


def written() -> dict[str, list[dict[str, Any]]]:
    return {name: _drive(sends) for name, sends in CASES.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_admission_output_is_golden(name: str) -> None:
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert _drive(CASES[name]) == golden[name]


def test_admission_golden_file_has_every_case() -> None:
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert sorted(golden) == sorted(CASES)


def test_admission_golden_cases_name_every_rule_they_mean() -> None:
    # the case names say which rule refuses last; the golden file must agree
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    rules_seen = {
        out[-1]["reject"]["letter"]["rule"] for out in golden.values() if "reject" in out[-1]
    }
    assert {
        "record-bytes", "record-size", "record-utf8", "record-json", "number-range",
        "record-duplicate-key", "depth", "record-key", "run-id", "record-partition",
        "record-shape", "command-gateway", "identifier-secret", "host-command", "run-fresh",
        "run-exists", "run-live", "interrupt-pending", "action-confinement", "surface-live",
        "fork-target-fresh", "fork-source", "encode", "envelope-shape",
    } <= rules_seen  # fmt: skip


def test_admission_the_step_that_refuses_declares_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    # every check of the table wrapped: the step that answered with a refusal must list its rule
    refused: list[tuple[str, tuple[str, ...], str]] = []

    def watched(name: str, found: tuple[Rule, ...], check: Any) -> Any:
        def watching(ctx: Any) -> Any:
            answer = check(ctx)
            if isinstance(answer, Violation):
                refused.append((name, tuple(rule.id for rule in found), answer.rule))
            return answer

        return watching

    stages = tuple(
        stage._replace(steps=tuple((n, f, watched(n, f, c)) for n, f, c in stage.steps))
        for stage in validator.ADMISSION
    )
    monkeypatch.setattr(validator, "ADMISSION", stages)
    for sends in CASES.values():
        _drive(sends)
    assert refused
    assert [(name, rule) for name, declared, rule in refused if rule not in declared] == []


if __name__ == "__main__":
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(written(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{GOLDEN}: {len(CASES)} cases written")
