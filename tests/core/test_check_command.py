"""``a2ui-stream check``: verdicts per input, malformed lines, exit codes 0/1/2.

Most cases call ``run(args)`` directly (fast, in process); one runs the real console script
through ``python -m app.shell.cli`` when the lead's CLI wires the command in.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.devtools import bench_admission
from app.shell.cli import check as check_command
from tests.core.admission_support import (
    POSITIVE,
    components_msg,
    create_msg,
    envelope,
    record,
    v2,
)


def _args(file: str, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    check_command.add_parser(sub)
    return parser.parse_args(["check", file, *extra])


def _run(
    tmp_path: Path, data: bytes, *extra: str, capsys: Any
) -> tuple[int, list[dict[str, Any]], str]:
    path = tmp_path / "records.jsonl"
    path.write_bytes(data)
    code = check_command.run(_args(str(path), *extra))
    out, err = capsys.readouterr()
    return code, [orjson.loads(line) for line in out.splitlines() if line], err


def _jsonl(*records: Any) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def test_check_command_all_admitted_exits_0(tmp_path: Path, capsys: Any) -> None:
    data = _jsonl(
        record(envelope(copy.deepcopy(POSITIVE))),
        record(envelope(v2("approve-brief", components_msg("approve-brief")))),
    )
    code, verdicts, _ = _run(tmp_path, data, capsys=capsys)
    assert code == 0
    assert [v["outcome"] for v in verdicts] == ["admitted", "admitted"]
    assert [v["sequence"] for v in verdicts] == [0, 1]
    assert verdicts[0] == {
        "index": 0,
        "line": 1,
        "outcome": "admitted",
        "code": None,
        "rule": None,
        "path": None,
        "message": None,
        "sequence": 0,
    }


def test_check_command_fold_across_inputs_and_malformed_lines(tmp_path: Path, capsys: Any) -> None:
    data = (
        _jsonl(record(envelope(v2("s", create_msg("s")))))
        + b"{not json\n\n"
        + b"\xff\xfe\n"
        + _jsonl(
            record(envelope(v2("s", create_msg("s")))),  # fold: already live
            record(envelope(v2("s", components_msg("s")))),
            [1, 2],
        )
    )
    code, verdicts, _ = _run(tmp_path, data, capsys=capsys)
    assert code == 1
    summary = [(v["index"], v["line"], v["outcome"], v["code"], v["rule"]) for v in verdicts]
    assert summary == [
        (0, 1, "admitted", None, None),
        (1, 2, "refused", "record_not_json", "record-json"),  # the worker's rule names
        (2, 4, "refused", "record_not_utf8", "record-utf8"),
        (3, 5, "refused", "envelope_invalid", "fold"),
        (4, 6, "admitted", None, None),
        (5, 7, "refused", "validation_error", "envelope-shape"),
    ]
    assert verdicts[3]["path"] == "/envelope/payload/messages/0"
    assert verdicts[4]["sequence"] == 1


def test_check_command_dedup_is_not_a_refusal(tmp_path: Path, capsys: Any) -> None:
    env = envelope(copy.deepcopy(POSITIVE), correlation_id="same")
    code, verdicts, _ = _run(tmp_path, _jsonl(record(env), record(env)), capsys=capsys)
    assert code == 0
    assert [(v["outcome"], v["sequence"]) for v in verdicts] == [
        ("admitted", 0),
        ("deduplicated", 0),
    ]


def test_check_command_whole_document_array_and_runs_are_separate(
    tmp_path: Path, capsys: Any
) -> None:
    records = [
        record(envelope(v2("s", create_msg("s"))), run_id="t/run-a"),
        record(envelope(v2("s", create_msg("s"))), run_id="t/run-b"),  # another run: absent
    ]
    path = tmp_path / "records.json"
    path.write_bytes(orjson.dumps(records, option=orjson.OPT_INDENT_2))
    code = check_command.run(_args(str(path)))
    verdicts = [orjson.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert code == 0
    assert [(v["outcome"], v["sequence"]) for v in verdicts] == [("admitted", 0), ("admitted", 0)]
    assert "line" not in verdicts[0]


@pytest.mark.parametrize(
    ("extra", "code", "outcome", "refusal"),
    [
        ((), 0, "admitted", None),  # warn: validated as v2 at the floor
        (("--strict",), 1, "refused", "unknown_schema_version"),
        (("--floor", "1"), 1, "refused", "envelope_invalid"),  # v1 branch, v2 body
    ],
)
def test_check_command_floor_and_strictness(
    tmp_path: Path,
    capsys: Any,
    extra: tuple[str, ...],
    code: int,
    outcome: str,
    refusal: str | None,
) -> None:
    data = _jsonl(record(envelope(v2("s", create_msg("s")), schema_version=1)))
    got, verdicts, _ = _run(tmp_path, data, *extra, capsys=capsys)
    assert (got, verdicts[0]["outcome"], verdicts[0]["code"]) == (code, outcome, refusal)


def test_check_command_missing_file_exits_2_with_advice(tmp_path: Path, capsys: Any) -> None:
    code = check_command.run(_args(str(tmp_path / "nope.jsonl")))
    err = capsys.readouterr().err
    assert code == 2
    assert "no such file" in err and "'-'" in err


def test_check_command_bad_floor_exits_2(tmp_path: Path, capsys: Any) -> None:
    with pytest.raises(SystemExit) as exit_:
        _run(tmp_path, b"", "--floor", "7", capsys=capsys)
    assert exit_.value.code == 2
    assert "--floor: '7': the floor is 1 or 2" in capsys.readouterr().err


@pytest.fixture(autouse=True)
def _worker_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each case starts from the worker's defaults, whatever the shell running the tests set."""
    for name in ("A2UI_STREAM_FLOOR", "A2UI_STREAM_STRICTNESS", "A2UI_STREAM_SECRETS_FILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("env", "extra", "code", "refusal"),
    [
        ({"A2UI_STREAM_FLOOR": "1"}, (), 1, "envelope_invalid"),  # before: ignored, admitted
        ({"A2UI_STREAM_FLOOR": "1"}, ("--floor", "2"), 0, None),  # the flag overrides
        ({"A2UI_STREAM_STRICTNESS": "strict"}, (), 1, "unknown_schema_version"),
        ({"A2UI_STREAM_STRICTNESS": "warn"}, ("--strict",), 1, "unknown_schema_version"),
    ],
)
def test_check_command_reads_the_workers_floor_and_strictness(
    tmp_path: Path,
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    extra: tuple[str, ...],
    code: int,
    refusal: str | None,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    data = _jsonl(record(envelope(v2("s", create_msg("s")), schema_version=1)))
    got, verdicts, _ = _run(tmp_path, data, *extra, capsys=capsys)
    assert (got, verdicts[0]["code"]) == (code, refusal)


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("A2UI_STREAM_FLOOR", "7", "A2UI_STREAM_FLOOR=7 is out of range [1, 2]"),
        ("A2UI_STREAM_STRICTNESS", "loose", "A2UI_STREAM_STRICTNESS='loose' must be one of"),
    ],
)
def test_check_command_a_bad_setting_exits_2_naming_it(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, name: str, value: str, said: str
) -> None:
    monkeypatch.setenv(name, value)  # before: FLOOR=7 was silently ignored
    code, verdicts, err = _run(
        tmp_path, _jsonl(record(envelope(copy.deepcopy(POSITIVE)))), capsys=capsys
    )
    assert (code, verdicts) == (2, [])
    assert said in err


@pytest.mark.parametrize("data", [b"", b"\n  \n"])
def test_check_command_empty_input_is_a_usage_error(
    tmp_path: Path, capsys: Any, data: bytes
) -> None:
    code, verdicts, err = _run(tmp_path, data, capsys=capsys)  # before: exit 0
    assert (code, verdicts) == (2, [])
    assert "no admission records" in err


def test_check_command_v1_at_floor_2_says_the_floor_and_what_floor_1_would_do(
    tmp_path: Path, capsys: Any
) -> None:
    v1 = {
        "catalogVersion": "0.9.1",
        "surface": {"components": [{"component": "text", "text": "t"}]},
    }
    code, [verdict], _ = _run(
        tmp_path, _jsonl(record(envelope(v1, schema_version=1))), capsys=capsys
    )
    assert (code, verdict["code"], verdict["rule"], verdict["path"]) == (
        1,
        "envelope_invalid",
        "branch",
        "/envelope/payload",
    )
    message = verdict["message"]
    assert "this host's floor is 2 (A2UI_STREAM_FLOOR)" in message
    assert "A2UI_STREAM_FLOOR=1, which admits v1 payloads" in message
    assert "selects the v2 branch" not in message  # before: read as a contradiction


def test_check_command_help_says_it_reads_the_workers_settings() -> None:
    from app.shell import cli

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    text = " ".join(sub.choices["check"].format_help().split())
    for needle in (
        "A2UI_STREAM_FLOOR",
        "A2UI_STREAM_STRICTNESS",
        "record-json",
        "1 (v1 envelopes only) or 2 (A2UI v0.9)",
        "empty input",
    ):
        assert needle in text
    assert "``" not in text


def test_check_command_reads_stdin(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    data = _jsonl(record(envelope(copy.deepcopy(POSITIVE))))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert check_command.run(_args("-")) == 0
    assert orjson.loads(capsys.readouterr().out)["outcome"] == "admitted"


def test_check_command_read_inputs_splits_documents_and_lines() -> None:
    assert check_command.read_inputs(b'{"a": 1}') == [(None, {"a": 1})]
    assert check_command.read_inputs(b"[1, 2]") == [(None, 1), (None, 2)]
    lines = check_command.read_inputs(b'{"a": 1}\n\n{"b": 2}\n')
    assert lines == [(1, {"a": 1}), (3, {"b": 2})]


def test_check_command_console_script_exit_codes(tmp_path: Path) -> None:
    from app.shell import cli

    if "check" not in cli.build_parser().format_help():
        pytest.skip("the CLI does not list the check command yet")
    good = tmp_path / "good.jsonl"
    good.write_bytes(_jsonl(record(envelope(copy.deepcopy(POSITIVE)))))
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"nope\n")
    base = [sys.executable, "-m", "app.shell.cli", "check"]
    assert subprocess.run([*base, str(good)], capture_output=True, timeout=120).returncode == 0
    assert subprocess.run([*base, str(bad)], capture_output=True, timeout=120).returncode == 1
    missing = subprocess.run([*base, str(tmp_path / "x")], capture_output=True, timeout=120)
    assert missing.returncode == 2 and b"no such file" in missing.stderr


def test_bench_admission_registers_its_options() -> None:
    parser = argparse.ArgumentParser()
    bench_admission.register(parser.add_subparsers())
    args = parser.parse_args(["admission", "--json", "--iterations", "5"])
    assert args.json is True and args.iterations == 5 and args.func is bench_admission.run


def test_bench_admission_inputs_are_admitted_by_both_rule_sets() -> None:
    """The bench measures admissions: its inputs must be admitted by ours and by the baseline
    (``_cases`` raises otherwise). No timing is asserted."""
    pytest.importorskip("jsonschema")
    from app.core.admission.payload_rules import PayloadRules
    from app.shell.schema_files import load_schema_documents

    documents = load_schema_documents()
    for rules in (
        PayloadRules.from_documents(documents),
        bench_admission.JsonschemaRules(documents),
    ):
        cases = bench_admission._cases(rules)
        assert set(cases) == {"rfc0209-positive", "components-512"}
    _, big = bench_admission.components_512()
    assert len(big["envelope"]["payload"]["messages"][0]["updateComponents"]["components"]) == 512


def test_check_command_unencodable_depth_is_refused_and_not_recorded(
    tmp_path: Path, capsys: Any
) -> None:
    deep: object = 1
    for _ in range(300):
        deep = [deep]
    data = b"".join(  # orjson cannot encode this deep: that is the point
        json.dumps(r).encode() + b"\n"
        for r in (
            record(
                envelope(
                    v2(
                        "s",
                        create_msg("s"),
                        {"version": "v0.9", "updateDataModel": {"surfaceId": "s", "value": deep}},
                    )
                )
            ),
            record(envelope(v2("s", create_msg("s")))),  # the refused one left "s" absent
        )
    )
    code, verdicts, _ = _run(tmp_path, data, capsys=capsys)
    assert code == 1
    assert [(v["outcome"], v["code"]) for v in verdicts] == [
        ("refused", "record_limit_exceeded"),
        ("admitted", None),
    ]
    assert verdicts[1]["sequence"] == 0


def test_bench_admission_without_jsonschema_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # makes `import jsonschema` fail
    parser = argparse.ArgumentParser()
    bench_admission.register(parser.add_subparsers())
    args = parser.parse_args(["admission"])
    assert bench_admission.run(args) == 2
    assert "jsonschema" in capsys.readouterr().err


def test_bench_admission_table_prints_every_figure_with_target_and_ratio() -> None:
    figure = {
        "name": "rfc0209-positive",
        "target_p50_us": 20.0,
        "p50_us": 25.0,
        "p99_us": 40.0,
        "p50_best_round_us": 18.0,
        "baseline_p50_us": 5000.0,
        "baseline_p99_us": 6000.0,
        "ratio": 200.0,
        "without_schema_checks_p50_us": 12.0,
        "meets_target": False,
    }
    result = {
        "python": "3.11",
        "machine": "x86_64",
        "core": "compiled",
        "baseline": "jsonschema",
        "load_average_1m": 0.5,
        "figures": [
            figure,
            {**figure, "name": "components-512", "target_p50_us": 300.0, "meets_target": True},
        ],
    }
    lines = bench_admission._table(result).splitlines()
    assert len(lines) == 5
    assert "core compiled" in lines[0]
    assert lines[3].split()[:4] == ["rfc0209-positive", "20", "25.0", "40.0"]
    assert "200.0x" in lines[3] and "(above target)" in lines[3]
    assert "(above target)" not in lines[4]


# -- check runs the worker's intake on each record's bytes (app.core.admission.intake) -------------


def test_check_command_refuses_ambiguous_json_as_the_worker_does(
    tmp_path: Path, capsys: Any
) -> None:
    good = orjson.dumps(record(envelope(copy.deepcopy(POSITIVE))))
    duplicate = good.replace(b'{"runId":', b'{"runId":"t/run-x","runId":', 1)
    big_int = orjson.dumps(record(envelope(copy.deepcopy(POSITIVE), correlation_id="c2")))
    big_int = big_int.replace(b'"schemaVersion":2', b'"schemaVersion":18446744073709551616', 1)
    data = good + b"\n" + duplicate + b"\n" + big_int + b"\n"
    code, verdicts, _ = _run(tmp_path, data, capsys=capsys)
    assert code == 1
    summary = [(v["line"], v["outcome"], v["code"], v["rule"], v["path"]) for v in verdicts]
    assert summary == [
        (1, "admitted", None, None, None),
        (2, "refused", "record_not_json", "record-duplicate-key", "/runId"),
        (3, "refused", "record_limit_exceeded", "number-range", "/envelope/schemaVersion"),
    ]


def test_check_command_array_document_items_go_through_intake_one_by_one(
    tmp_path: Path, capsys: Any
) -> None:
    first = record(envelope(v2("s", create_msg("s")), correlation_id='a "quoted" ],{ id'))
    second = orjson.dumps(record(envelope(v2("t", create_msg("t")))))
    second = second.replace(b'{"runId":', b'{"runId":"x","runId":', 1)
    third = record(envelope(v2("u", create_msg("u"))))
    data = b"[\n  " + orjson.dumps(first) + b" ,\n" + second + b",\n" + orjson.dumps(third) + b"\n]"
    assert isinstance(orjson.loads(data), list)  # one JSON document (orjson keeps the last runId)
    path = tmp_path / "records.json"
    path.write_bytes(data)
    code = check_command.run(_args(str(path)))
    verdicts = [orjson.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert code == 1
    assert [(v["index"], v["outcome"], v["rule"]) for v in verdicts] == [
        (0, "admitted", None),
        (1, "refused", "record-duplicate-key"),
        (2, "admitted", None),
    ]


def test_check_command_uses_the_workers_size_and_limit_settings(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    positive = orjson.dumps(record(envelope(copy.deepcopy(POSITIVE))))
    padded = orjson.dumps(record(envelope(copy.deepcopy(POSITIVE), correlation_id="c" * 100)))
    monkeypatch.setenv("A2UI_STREAM_MAX_RECORD_BYTES", str(len(positive) + 10))
    code, verdicts, _ = _run(tmp_path, positive + b"\n" + padded + b"\n", capsys=capsys)
    assert code == 1
    assert [(v["outcome"], v["code"], v["rule"]) for v in verdicts] == [
        ("admitted", None, None),
        ("refused", "record_too_large", "record-size"),
    ]
    monkeypatch.setenv("A2UI_STREAM_MAX_RECORD_BYTES", "lots")
    code, verdicts, err = _run(tmp_path, positive, capsys=capsys)
    assert code == 2 and verdicts == []
    assert "A2UI_STREAM_MAX_RECORD_BYTES='lots' is not an integer" in err
