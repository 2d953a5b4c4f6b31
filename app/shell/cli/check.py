"""``a2ui-stream check [FILE|-] [--run RUN] [--floor N] [--strict]``: decide admission records
offline, exactly as the worker would, and print one JSON verdict per input.

Shell module: reads the file (or stdin), loads the schema documents, takes the time from the
clock, and calls the pure ``app.core.admission.decision.decide`` once per record, keeping one
RunState per run across the inputs (so the fold guard and E2 see earlier records). A producer team
runs this in its own CI before publishing.

It reads the worker's settings from the same environment variables, with the same meaning
and the same refusal of a bad value (exit 2 naming it): the floor and strictness
(``A2UI_STREAM_FLOOR``, ``A2UI_STREAM_STRICTNESS``; ``--floor`` and ``--strict`` override
them), intake's size limit and the decision's limits (``A2UI_STREAM_MAX_RECORD_BYTES``,
``A2UI_STREAM_MAX_DEPTH``, ``A2UI_STREAM_MAX_STRING_CHARS``, ``A2UI_STREAM_MAX_COMPONENTS``,
``A2UI_STREAM_MAX_CHILDREN_DEPTH``) and the SR-1 registrations (``A2UI_STREAM_SECRETS_FILE``).

Input: JSON Lines (one admission record per line; blank lines skipped), or one JSON document
holding a record or an array of records; with ``--run RUN``, bare envelopes, each wrapped as
``POST /runs/RUN/envelopes`` does. A line that is not JSON (or not UTF-8) gets its own refusal,
with the worker's rule (``record-json``, ``record-utf8``), and the rest are still decided. Each
record's bytes go through the worker's intake (``app.core.admission.intake.read_admission``: the
size limit, duplicate member names, integers outside 64 bits, nesting).

Output, one line per record: ``{"index", "outcome": "admitted"|"refused"|"deduplicated",
"code", "rule", "path", "message", "sequence"}`` (``line`` too in JSON Lines mode).
Exit status: 0 all admitted (a deduplicated re-emission is not a refusal), 1 any refused,
2 usage or read errors (an empty input included).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson

from app.core.admission.decision import Admitted, Deduplicated, Refused, decide, encode_event
from app.core.admission.intake import DEFAULT_MAX_RECORD_BYTES, Intake, read_admission
from app.core.admission.policy import SURFACE_KIND, HostPolicy
from app.core.admission.refusal import Violation
from app.core.admission.rules import RECORD_JSON, RECORD_SHAPE, RECORD_UTF8, refuse, rule_of
from app.core.http.admission import envelope_request
from app.core.http.errors import HttpError
from app.core.runlog.run_state import RunState
from app.shell.errors import OperatorError
from app.shell.settings import admission_limits, floor_and_strictness, load_secrets

__all__ = ["add_parser", "run", "read_inputs", "verdicts"]

_USAGE_ERROR = 2

# One input: (its 1-based line number or None, the decoded record or the Violation refusing it).
_Input = tuple[int | None, Any]


_DESCRIPTION = """\
Decide admission records offline, exactly as a worker with the same settings would, and print
one JSON verdict per record: {index, line, outcome, code, rule, path, message, sequence}.

It reads the worker's settings from the environment: A2UI_STREAM_FLOOR and
A2UI_STREAM_STRICTNESS (--floor and --strict override them), A2UI_STREAM_MAX_RECORD_BYTES and
the other limits, and A2UI_STREAM_SECRETS_FILE. A bad value exits 2 and names the variable.
Rules are named as in the worker's dead letters (record-json, record-utf8, ...).

Input: JSON Lines of admission records {runId, envelope}, or one JSON document holding a
record or an array of them. With --run RUN the input holds bare envelopes instead, decided as
POST /runs/RUN/envelopes would decide them.

Exit status: 0 all admitted (a deduplicated record is not a refusal), 1 any refused, 2 a
usage error: no such file, an empty input, a bad setting.
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "check",
        help="decide admission records offline, as the worker would (JSON verdicts)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "file",
        nargs="?",
        default="-",
        metavar="FILE",
        help="admission records as JSON Lines, or one JSON record or array; - (the default) "
        "reads standard input",
    )
    parser.add_argument(
        "--floor",
        type=_floor,
        default=None,
        metavar="N",
        help="the host's floor for ui.a2ui-surface: 1 (v1 envelopes only) or 2 (A2UI v0.9); "
        "default: A2UI_STREAM_FLOOR, else 2",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse envelopes below the floor instead of checking them as the floor's version "
        "(A2UI_STREAM_STRICTNESS=strict)",
    )
    parser.add_argument(
        "--run",
        metavar="RUN",
        help="the input holds bare envelopes (what POST /runs/RUN/envelopes takes), not "
        "admission records: decide each as that POST would, for run RUN",
    )
    parser.set_defaults(func=run)
    return parser


def _floor(text: str) -> int:
    if text not in ("1", "2"):
        raise argparse.ArgumentTypeError(f"{text!r}: the floor is 1 or 2")
    return int(text)


def _not_json(line: int | None, refusal: Violation) -> Violation:
    where = f"line {line}" if line is not None else "the input"
    return refuse(
        RECORD_JSON,
        "",
        f"{where}: {refusal.message}; write one admission record {{runId, envelope}} per line",
        {"line": line} if line is not None else {},
    )


def _not_utf8(line: int | None) -> Violation:
    where = f"line {line}" if line is not None else "the input"
    return refuse(
        RECORD_UTF8,
        "",
        f"{where} is not valid UTF-8; encode admission records as UTF-8 JSON",
        {"line": line} if line is not None else {},
    )


def _intake(raw: bytes, max_bytes: int) -> Any:
    """One record's bytes through the worker's intake: the record, or the Violation refusing it."""
    found = read_admission(None, raw, max_bytes=max_bytes)
    return found.record if isinstance(found, Intake) else found


def _array_items(data: bytes) -> list[bytes]:
    """The bytes of each item of a JSON array document (one that already parsed), so each
    record goes through intake as it would arrive on the topic. A linear scan that tracks
    strings and nesting only: the document is known to be valid JSON."""
    items: list[bytes] = []
    depth, start, in_string, escaped = 0, -1, False, False
    for index, byte in enumerate(data):
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
            continue
        if byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth == 1:
                start = index + 1
                continue
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
        if depth == 1 and byte == 0x2C or depth == 0 and byte == 0x5D:  # , at the top, or ]
            item = data[start:index].strip()
            if item:
                items.append(item)
            start = index + 1
    return items


def _envelope_record(raw: bytes, run_id: str, max_bytes: int) -> Any:
    """A bare envelope -> the admission record ``POST /runs/{run_id}/envelopes`` builds around
    its bytes (app.core.http.admission), through intake: the record, or the Violation."""
    built = envelope_request(run_id, raw, max_record_bytes=max_bytes)
    if isinstance(built, HttpError):
        # The endpoint's refusal, carried in its error's details (rule, pointer and our code:
        # app.core.http.admission.violation_response); a body that is no envelope names none.
        details = dict(built.body.get("details") or {})
        rule = rule_of(str(details.pop("rule", RECORD_SHAPE.id)))
        code = str(details.pop("refusal", rule.code))
        pointer = str(details.pop("pointer", ""))
        return refuse(rule, pointer, str(built.body["message"]), details, code=code)
    return _intake(built.record, max_bytes)


def read_inputs(
    data: bytes, max_bytes: int = DEFAULT_MAX_RECORD_BYTES, run_id: str | None = None
) -> list[_Input]:
    """Split raw input into records: one JSON document (a record or an array of records), or
    JSON Lines. Each record's bytes go through the worker's intake (``max_bytes`` is its size
    limit); lines that fail to decode become ``Violation`` values in place of a record. With
    ``run_id`` each item is a bare envelope, wrapped as the HTTP envelope endpoint does."""

    def take(raw: bytes) -> Any:
        if run_id is None:
            return _intake(raw, max_bytes)
        return _envelope_record(raw, run_id, max_bytes)

    try:
        whole = orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    else:
        if isinstance(whole, list):
            return [(None, take(item)) for item in _array_items(data)]
        return [(None, take(data.strip()))]
    inputs: list[_Input] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        found = take(raw)
        # a line that is not UTF-8 or not JSON at all: say which line (intake's other refusals,
        # size and ambiguity, are the worker's as they are)
        if isinstance(found, Violation) and found.rule == RECORD_UTF8.id:
            found = _not_utf8(number)
        elif isinstance(found, Violation) and found.rule == RECORD_JSON.id:
            found = _not_json(number, found)
        inputs.append((number, found))
    return inputs


def _verdict(index: int, line: int | None, outcome: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"index": index}
    if line is not None:
        out["line"] = line
    if isinstance(outcome, Violation):
        outcome = Refused(outcome)
    if isinstance(outcome, Refused):
        v = outcome.violation
        out.update(outcome="refused", code=v.code, rule=v.rule, path=v.path, message=v.message)
        out["sequence"] = None
    elif isinstance(outcome, Deduplicated):
        out.update(outcome="deduplicated", code=None, rule=None, path=None, message=None)
        out["sequence"] = outcome.sequence
    else:
        out.update(outcome="admitted", code=None, rule=None, path=None, message=None)
        out["sequence"] = outcome.sequence
    return out


def verdicts(
    inputs: list[_Input], policy: HostPolicy, rules: Any, now: str
) -> Iterator[dict[str, Any]]:
    """Decide every input in order, one RunState per run, as the worker does."""
    states: dict[str, RunState] = {}
    for index, (line, record) in enumerate(inputs):
        if isinstance(record, Violation):
            yield _verdict(index, line, record)
            continue
        run_id = record.get("runId") if isinstance(record, dict) else None
        state = states.get(run_id) if isinstance(run_id, str) else None
        outcome = decide(record, state, policy, rules, now=now)
        if isinstance(outcome, Admitted):
            encoded = encode_event(outcome)  # as the worker does before it records
            if isinstance(encoded, Refused):
                outcome = encoded
            else:
                states[outcome.state.run_id] = outcome.state
        yield _verdict(index, line, outcome)


def _read(path: str) -> bytes | None:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        print(
            f"a2ui-stream check: no such file: {path!r}; pass a JSON Lines file of admission "
            "records, or '-' to read standard input",
            file=sys.stderr,
        )
    except OSError as exc:
        print(f"a2ui-stream check: cannot read {path!r}: {exc.strerror}", file=sys.stderr)
    return None


def _load_rules() -> Any:
    from app.core.admission.payload_rules import PayloadRules
    from app.shell.schema_files import load_schema_documents

    return PayloadRules.from_documents(load_schema_documents())


def _policy(args: argparse.Namespace) -> tuple[int, HostPolicy]:
    """The worker's policy from the environment (``--floor``/``--strict`` override)."""
    max_bytes, limits = admission_limits()
    floor, strictness = floor_and_strictness()
    return max_bytes, HostPolicy(
        secrets=load_secrets(os.environ.get("A2UI_STREAM_SECRETS_FILE", "").strip()),
        schema_versions={SURFACE_KIND: floor if args.floor is None else args.floor},
        strictness="strict" if args.strict else strictness,  # type: ignore[arg-type]
        limits=limits,
    )


def _bare_envelope_hint(verdict: dict[str, Any], record: Any) -> None:
    """A bare envelope refused for lacking runId: say what it is and how to send it."""
    if (
        verdict["outcome"] == "refused"
        and verdict["path"] == "/runId"
        and isinstance(record, dict)
        and "envelope" not in record
        and "payload" in record
    ):
        verdict["message"] += (
            "; this looks like a bare envelope (what POST /runs/{runId}/envelopes takes): an "
            'admission record wraps it as {"runId": ..., "envelope": ...}, or pass --run RUN'
        )


def run(args: argparse.Namespace) -> int:
    data = _read(args.file)
    if data is None:
        return _USAGE_ERROR
    try:
        max_bytes, policy = _policy(args)
    except OperatorError as exc:
        print(f"a2ui-stream check: {exc}", file=sys.stderr)
        return _USAGE_ERROR
    try:
        rules = _load_rules()
    except (OSError, ValueError) as exc:
        print(f"a2ui-stream check: cannot load the schemas: {exc}", file=sys.stderr)
        return _USAGE_ERROR
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    inputs = read_inputs(data, max_bytes, args.run)
    if not inputs:
        where = "standard input" if args.file == "-" else args.file
        print(
            f"a2ui-stream check: no admission records in {where}: give one JSON record "
            "{runId, envelope} a line (see examples/records.jsonl)",
            file=sys.stderr,
        )
        return _USAGE_ERROR
    refused = False
    out = sys.stdout.buffer
    for verdict, (_, record) in zip(verdicts(inputs, policy, rules, now), inputs, strict=True):
        _bare_envelope_hint(verdict, record)
        refused = refused or verdict["outcome"] == "refused"
        out.write(orjson.dumps(verdict) + b"\n")
    out.flush()
    return 1 if refused else 0
