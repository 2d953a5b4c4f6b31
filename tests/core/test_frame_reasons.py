"""One frame-reason vocabulary (app/core/projection/frame_reasons.py) for both frame planners: every
reason a planner can return is in the table with one meaning, in that planner's order, and
named in its module docstring and in docs/projection.md."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from types import ModuleType

import pytest

from app.core.projection import frame_reasons, frames, sse_frames
from app.core.projection.frame_reasons import DELTA, DIGEST, FULL_REASONS, KAFKA_ORDER, MEANING

DOCS = Path(__file__).resolve().parents[2] / "docs" / "projection.md"


def _returned_strings(module: ModuleType, *functions: str) -> set[str]:
    """The string literals ``functions`` of ``module`` return (directly, or as a ``DeltaStep``'s
    third argument)."""
    tree = ast.parse(inspect.getsource(module))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in functions:
            for ret in ast.walk(node):
                if not isinstance(ret, ast.Return) or ret.value is None:
                    continue
                value = ret.value
                if isinstance(value, ast.Call) and len(value.args) == 3:
                    value = value.args[2]  # DeltaStep(cursor, frame, reason)
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    found.add(value.value)
    return found


def test_every_reason_has_one_meaning_and_each_order_names_only_those() -> None:
    assert len(set(KAFKA_ORDER)) == len(KAFKA_ORDER)
    assert len(set(FULL_REASONS)) == len(FULL_REASONS)
    assert set(KAFKA_ORDER) <= set(MEANING) and set(FULL_REASONS) <= set(MEANING)
    used = set(KAFKA_ORDER) | set(FULL_REASONS) | {DELTA, DIGEST, "other"}
    assert set(MEANING) == used  # no meaning left without a planner that gives it
    assert all(text and text[0].islower() for text in MEANING.values())


def test_the_planners_take_their_reasons_from_the_table() -> None:
    assert frames.FALLBACK_REASONS is frame_reasons.FALLBACK_REASONS
    assert sse_frames.FULL_REASONS is frame_reasons.FULL_REASONS


def _no_delta_reasons() -> set[str]:
    """The strings ``frames.Prepared`` stores as why a change has no delta (``_delta``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(inspect.getsource(frames.Prepared))):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            target = node.targets[0]
            if isinstance(target, ast.Attribute) and target.attr == "_delta":
                found.add(str(node.value.value))
    return found


def test_the_kafka_planner_returns_only_its_reasons_in_their_order() -> None:
    returned = _returned_strings(frames, "_reason")
    no_delta = _no_delta_reasons()  # returned by _reason last, as Prepared.delta_reason
    assert no_delta == {"first", "empty", "unverified"}  # first: the change has no old surface
    assert returned | no_delta == set(KAFKA_ORDER)
    source = inspect.getsource(frames._reason)
    positions = [source.index(f'return "{name}"') for name in KAFKA_ORDER if name in returned]
    assert positions == sorted(positions)  # the table's order is the checks' order
    assert KAFKA_ORDER[-2:] == ("empty", "unverified")  # the delta's own checks come last


def test_the_sse_planner_returns_only_its_reasons() -> None:
    returned = _returned_strings(sse_frames, "_context_reason", "_patch_or_reason", "step")
    assert returned == set(FULL_REASONS) | {DELTA, "other"}


@pytest.mark.parametrize(
    ("module", "names"),
    [(frames, KAFKA_ORDER), (sse_frames, FULL_REASONS)],
    ids=["frames", "sse_frames"],
)
def test_each_planners_docstring_names_its_reasons(module: ModuleType, names: tuple[str]) -> None:
    doc = module.__doc__ or ""
    for name in names:
        assert f"\n  {name} " in doc, name


def test_docs_list_every_reason() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for name in MEANING:
        assert f"`{name}`" in text, name
