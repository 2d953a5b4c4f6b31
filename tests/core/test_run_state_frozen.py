"""STYLE rule 12: compiled-only behaviour must hold from source too. A ``FrozenValue``
(app.core.runlog.run_state) refuses attribute assignment and deletion whether its module is the
mypyc-compiled one (``Final`` attributes of a native class) or the source (``_assign_once``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from app.core.admission.decision import Admitted
from app.core.runlog.events import RecordedEvent
from app.core.runlog.run_state import Correlation, Recorded, RunState, SurfaceState, V1Surface

REPO = Path(__file__).resolve().parents[2]

REC = Recorded(1, "e")
VALUES: list[tuple[Any, str]] = [
    (REC, "sequence"),
    (SurfaceState("live"), "tainted"),
    (V1Surface(REC), "node_ids"),
    (Correlation("ui.a2ui-surface", REC, True), "complete"),
    (RunState("r"), "next_sequence"),
    # the event is not what is tested: an empty one will do
    (Admitted(cast(RecordedEvent, {}), RunState("r"), 1), "drift"),
]


@pytest.mark.parametrize(("value", "field"), VALUES, ids=lambda v: type(v).__name__)
def test_frozen_values_refuse_assignment_and_deletion(value: Any, field: str) -> None:
    before = getattr(value, field)
    with pytest.raises(AttributeError):
        setattr(value, field, 5)
    with pytest.raises(AttributeError):
        delattr(value, field)
    assert getattr(value, field) is before
    assert value._replace(**{field: before}) == value  # the way to a changed copy


_FROM_SOURCE = """
import app.core.runlog.run_state as m
from app.core.runlog.run_state import Recorded, RunState
assert m.__file__.endswith("run_state.py"), m.__file__
value = Recorded(1, "e")
for attempt in (lambda: setattr(value, "sequence", 5), lambda: delattr(value, "event_id")):
    try:
        attempt()
    except AttributeError:
        continue
    raise SystemExit(f"not refused: {value!r}")
assert value == Recorded(1, "e") and value._replace(sequence=5) == Recorded(5, "e")
assert RunState("r")._replace(next_sequence=3).next_sequence == 3
print("refused")
"""


def test_frozen_values_refuse_assignment_from_source() -> None:
    """In a process that loads the core from source (the compiled modules are ignored)."""
    done = subprocess.run(
        [sys.executable, "-c", _FROM_SOURCE],
        cwd=REPO,
        env={**os.environ, "A2UI_STREAM_CORE": "source"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["refused"]
