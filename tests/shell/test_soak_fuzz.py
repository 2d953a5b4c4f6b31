"""`a2ui-stream soak`'s fuzzing hook keeps a failure it found (it can take many minutes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.devtools import soak_command


def test_a_failing_fuzz_run_keeps_pytest_output_and_names_the_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fuzz = tmp_path / "test_found.py"
    fuzz.write_text(
        "def test_passes():\n    assert True\n\n"
        "def test_finds_something():\n    assert 1 + 1 == 3, 'falsifying example: 1'\n"
    )
    monkeypatch.setattr(soak_command, "FUZZ_TEST", fuzz)
    result = soak_command.run_fuzz(5)
    assert result["status"] == "failed"
    assert len(result["failed_tests"]) == 1
    assert result["failed_tests"][0].endswith("::test_finds_something")
    kept = Path(result["output"]).read_text()
    assert "falsifying example: 1" in kept


def test_a_passing_fuzz_run_keeps_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fuzz = tmp_path / "test_clean.py"
    fuzz.write_text("def test_passes():\n    assert True\n")
    monkeypatch.setattr(soak_command, "FUZZ_TEST", fuzz)
    result = soak_command.run_fuzz(5)
    assert result["status"] == "passed" and "output" not in result
