"""examples/: the files the README uses literally (issue 19 item 1), decided offline by
``a2ui-stream check`` as the README says. tests/integration/test_readme_examples.py runs the
README's commands over them against a real worker."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _check(*args: str) -> tuple[int, list[dict], str]:
    env = {"PATH": "/usr/bin:/bin"}  # the defaults: no A2UI_STREAM_* of the caller's shell
    done = subprocess.run(
        [sys.executable, "-m", "app.shell.cli", "check", *args],
        capture_output=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    verdicts = [orjson.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return done.returncode, verdicts, done.stderr.decode()


def test_every_example_is_used_by_the_readme_and_exists() -> None:
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"examples/([\w.-]+)", readme))
    present = {p.name for p in EXAMPLES.iterdir() if p.is_file()}
    assert named == present, (named, present)


def test_records_mix_admitted_and_refused_as_the_readme_says() -> None:
    code, verdicts, _ = _check("examples/records.jsonl")
    assert code == 1  # any refused
    assert [(v["line"], v["outcome"], v["code"], v["rule"]) for v in verdicts] == [
        (1, "admitted", None, None),
        (2, "admitted", None, None),
        (3, "refused", "envelope_invalid", "fold"),  # a second createSurface
        (4, "refused", "envelope_invalid", "branch"),  # Button event openUrl
        (5, "refused", "envelope_invalid", "branch"),  # an Image
        (6, "refused", "envelope_invalid", "branch"),  # v1 at floor 2
        (7, "refused", "validation_error", "envelope-shape"),  # a bare envelope
        (8, "admitted", None, None),
    ]
    assert "a2ui-action-confinement" in verdicts[3]["message"]
    assert "a2ui-surface-no-network-egress" in verdicts[4]["message"]
    assert verdicts[6]["path"] == "/runId"
    assert [v["sequence"] for v in verdicts if v["outcome"] == "admitted"] == [0, 1, 2]


@pytest.mark.parametrize(
    ("args", "code", "outcome"),
    [
        (("--run", "demo", "examples/envelope-v2.json"), 0, "admitted"),
        (("--run", "demo-v1", "examples/envelope-v1.json"), 1, "refused"),
        (("--run", "demo-v1", "--floor", "1", "examples/envelope-v1.json"), 0, "admitted"),
        (("--run", "demo", "--floor", "1", "examples/envelope-v2.json"), 1, "refused"),
    ],
)
def test_bare_envelopes_decided_as_the_http_endpoint_would(
    args: tuple[str, ...], code: int, outcome: str
) -> None:
    got, verdicts, _ = _check(*args)
    assert (got, [v["outcome"] for v in verdicts]) == (code, [outcome])


def test_the_action_names_the_v2_envelopes_button_and_its_context() -> None:
    envelope = orjson.loads((EXAMPLES / "envelope-v2.json").read_bytes())
    action = orjson.loads((EXAMPLES / "action.json").read_bytes())
    assert action["surfaceId"] == envelope["payload"]["surfaceId"]
    components = {
        c["id"]: c
        for m in envelope["payload"]["messages"]
        if "updateComponents" in m
        for c in m["updateComponents"]["components"]
    }
    button = components[action["sourceComponentId"]]
    assert button["component"] == "Button"
    event = button["action"]["event"]
    assert action["name"] == event["name"] == "resume"
    assert set(action["context"]) == set(event["context"])
