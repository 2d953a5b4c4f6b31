"""docs/admission.md's rule list is the registry's (scripts/rules_doc.py generates it)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from app.core.admission.rules import RULES

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "rules_doc.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rules_doc", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("rules_doc", module)
    spec.loader.exec_module(module)
    return module


rules_doc = _script()


def test_rules_doc_committed_section_is_generated() -> None:
    text = rules_doc.DOC.read_text(encoding="utf-8")
    assert rules_doc.updated(text) == text, "docs/admission.md is stale: run scripts/rules_doc.py"


def test_rules_doc_lists_every_rule_once() -> None:
    table = rules_doc.render()
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(RULES)
    assert "`not_found`, `interrupt_already_resolved`" in table  # the other codes too


def test_rules_doc_replaces_only_the_marked_section() -> None:
    text = "before\n<!-- rules:begin -->\nold table\n<!-- rules:end -->\nafter\n"
    new = rules_doc.updated(text)
    assert new.startswith("before\n" + rules_doc.BEGIN) and new.endswith(
        rules_doc.END + "\nafter\n"
    )
    assert "old table" not in new and rules_doc.updated(new) == new
    with pytest.raises(ValueError, match="section"):
        rules_doc.updated("no markers here")


def test_rules_doc_check_fails_on_a_stale_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "admission.md"
    doc.write_text("x\n<!-- rules:begin -->\nstale\n<!-- rules:end -->\n", encoding="utf-8")
    monkeypatch.setattr(rules_doc, "DOC", doc)
    monkeypatch.setattr(rules_doc, "ROOT", tmp_path)
    assert rules_doc.main(["--check"]) == 1
    assert rules_doc.main([]) == 0
    assert rules_doc.main(["--check"]) == 0
    assert "stale" not in doc.read_text(encoding="utf-8")


def test_rules_doc_rule_order_is_the_admission_table() -> None:
    from app.core.admission.validator import RULE_ORDER

    text = rules_doc.DOC.read_text(encoding="utf-8")
    assert rules_doc.ORDER_BEGIN in text and rules_doc.ORDER_END in text
    section = text[text.index(rules_doc.ORDER_BEGIN) : text.index(rules_doc.ORDER_END)]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| ")][2:]
    assert [(r[1], r[2].strip("`")) for r in rows] == [(s, step) for s, step, _ in RULE_ORDER]
    for row, (_stage, _step, found) in zip(rows, RULE_ORDER, strict=True):
        assert [cell.split("`")[1] for cell in row[3].split(", ") if "`" in cell] == [
            rule.id for rule in found
        ]
