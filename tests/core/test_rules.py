"""The rule registry (app.core.admission.rules)
against every refusal app/ can build, by a static scan.

Every ``Violation(...)`` in app/ either carries the rule of an existing violation (its
``rule`` argument is ``<violation>.rule``: a step that moves the pointer or rewords the
message) or is ``refuse``'s own, in app/core/admission/rules.py, from a registry entry
(``rule.id``). ``refuse`` takes a ``Rule`` (mypy), never a string; no ``Rule(...)`` is built outside
the registry; no rule id is written as a string literal where a refusal's rule is named or read
(``"rule": "..."`` in details, ``x.rule == "..."``). So a rule named by a free string fails
here, and every id on the wire is registered. The other way round: every entry is used.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from app.core.admission import rules
from app.core.admission.refusal import CODES, Violation
from app.core.admission.rules import RULES, Rule, refuse, rule_of

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"
REGISTRY = APP / "core" / "admission" / "rules.py"
APP_FILES = sorted(p for p in APP.rglob("*.py") if "viewer_dist" not in p.parts)

# Rule ids written as literals on purpose, with the reason.
LITERAL_RULES_ALLOWED = {
    # The HTTP request guards (host-loopback, origin, content-type) answer HttpErrors with
    # HTTP codes (forbidden, unsupported_media_type) before any admission: not refusals of a
    # record, never dead letters, and outside app.core.admission.refusal CODES.
    APP / "core" / "http" / "guard.py",
}

_ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")  # the grammar of a rule id

# The module-level Rule constants of the registry, by name.
CONSTANTS = {name: value for name, value in vars(rules).items() if isinstance(value, Rule)}


def _rule_argument(call: ast.Call) -> ast.expr | None:
    if len(call.args) >= 2:
        return call.args[1]
    return next((k.value for k in call.keywords if k.arg == "rule"), None)


def _called(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _text(node: ast.expr | None) -> str | None:
    """The string a literal holds, or None when ``node`` is not a string literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _is_text(node: ast.expr | None) -> bool:
    return _text(node) is not None


def _is_rule_read(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "rule"


def free_rules(path: Path) -> list[str]:  # noqa: C901 - one AST walk, one finding per kind of node
    """Where ``path`` names a refusal's rule other than through the registry."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    literals_ok = path in LITERAL_RULES_ALLOWED
    found: list[str] = []
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Call) and _called(node) == "Violation":
            rule = _rule_argument(node)
            carried = rule is not None and _is_rule_read(rule)
            built = (
                path == REGISTRY
                and isinstance(rule, ast.Attribute)
                and rule.attr == "id"
                and isinstance(rule.value, ast.Name)
                and rule.value.id == "rule"
            )
            if not (carried or built):
                shown = "?" if rule is None else ast.unparse(rule)
                found.append(f"{where}: Violation(..., {shown}, ...): use rules.refuse(RULE, ...)")
        elif isinstance(node, ast.Call) and _called(node) == "Rule" and path != REGISTRY:
            found.append(f"{where}: Rule(...) outside the registry")
        elif isinstance(node, ast.Call) and _called(node) in ("refuse", "rule_of"):
            first = node.args[0] if node.args else None
            if first is None or _is_text(first):
                found.append(f"{where}: {_called(node)}() of a string: use the registry constant")
        if literals_ok:
            continue
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if _text(key) == "rule" and _is_text(value):
                    found.append(f"{where}: details {{'rule': {ast.unparse(value)}}}: use RULE.id")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_rule_read(s) for s in sides) and any(_is_text(s) for s in sides):
                found.append(f"{where}: {ast.unparse(node)}: compare with RULE.id")
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == "rule"
            and any(_ID.fullmatch(_text(a) or "") for a in node.args[1:])
        ):
            found.append(f"{where}: {ast.unparse(node)}: a rule id as a literal default")
    return found


def used_constants(path: Path) -> set[str]:
    """The registry constants ``path`` refers to (imported by name, or as ``rules.X``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    by_alias: dict[str, str] = {}
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "app.core.admission.rules":
            by_alias.update({a.asname or a.name: a.name for a in node.names})
        elif isinstance(node, ast.ImportFrom):  # ``from app.core.admission import rules``
            named = [
                a for a in node.names if f"{node.module}.{a.name}" == "app.core.admission.rules"
            ]
            modules.update(a.asname or a.name for a in named)
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in by_alias:
            used.add(by_alias[node.id])
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            used.add(node.attr)
    return used & set(CONSTANTS)


def test_rules_scan_covers_the_refusal_builders() -> None:
    names = {p.relative_to(APP).as_posix() for p in APP_FILES}
    assert {
        "core/admission/rules.py",
        "core/admission/intake.py",
        "core/admission/decision.py",
        "shell/cli/check.py",
    } <= (names)


@pytest.mark.parametrize("path", APP_FILES, ids=lambda p: p.relative_to(APP).as_posix())
def test_rules_every_refusal_names_a_registered_rule(path: Path) -> None:
    assert free_rules(path) == []


def test_rules_scan_catches_free_strings(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from app.core.admission.refusal import Violation\n"
        "a = Violation('validation_error', 'free-rule', '', 'm')\n"
        "b = Violation(code='envelope_invalid', rule='other', path='', message='m')\n"
        "c = refuse('free-rule', '', 'm')\n"
        "d = Rule('x', 'validation_error', 'step', 'ours', 'advice')\n"
        "e = {'rule': 'free-rule'}\n"
        "f = v.rule == 'record-json'\n"
        "g = details.pop('rule', 'record-shape')\n"
        "h = rule_of('record-json')\n"
        "i = Violation(v.code, v.rule, '/x', v.message)\n",  # carried: fine
        encoding="utf-8",
    )
    problems = free_rules(bad)
    assert len(problems) == 8, problems
    assert not any(":10:" in p for p in problems), problems


def test_rules_every_entry_is_used_in_app() -> None:
    used: set[str] = set()
    for path in APP_FILES:
        if path != REGISTRY:
            used |= used_constants(path)
    assert sorted(set(CONSTANTS) - used) == []


def test_rules_registry_is_the_constants() -> None:
    assert list(RULES) == [rule.id for rule in RULES.values()]
    assert {id(rule) for rule in RULES.values()} == {id(rule) for rule in CONSTANTS.values()}
    assert set(CONSTANTS) <= set(rules.__all__)
    for name, rule in CONSTANTS.items():  # the constant is the id, spelled as a name
        assert name == rule.id.upper().replace("-", "_")


@pytest.mark.parametrize("rule", list(RULES.values()), ids=lambda r: r.id)
def test_rules_entry_is_complete(rule: Rule) -> None:
    assert _ID.fullmatch(rule.id)
    assert rule.code in CODES
    assert set(rule.also) <= CODES
    assert rule.code not in rule.also
    assert rule.step and rule.advice and "\n" not in rule.advice
    assert rule.spec == "ours" or re.match(r"(openwop-a2ui|a2ui-v09)\.md §\d", rule.spec)


def test_rules_refuse_takes_the_code_from_the_entry() -> None:
    made = refuse(rules.FOLD, "/envelope/payload/messages/0", "m", {"index": 0})
    assert made == Violation(
        "envelope_invalid", "fold", "/envelope/payload/messages/0", "m", {"index": 0}
    )
    assert refuse(rules.RECORD_BYTES, "", "m").details == {}
    other = refuse(rules.INTERRUPT_PENDING, "/n", "m", code="interrupt_already_resolved")
    assert other.code == "interrupt_already_resolved"
    with pytest.raises(ValueError, match="does not refuse with"):
        refuse(rules.FOLD, "", "m", code="validation_error")


def test_rules_unknown_code_or_id_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unregistered refusal code"):
        Rule("x", "no_such_code", "step", "ours", "advice")
    with pytest.raises(ValueError, match="registered twice"):
        rules._rule("fold", "envelope_invalid", "fold", "ours", "advice")
    assert len(RULES) == len(CONSTANTS)
    with pytest.raises(KeyError):
        rule_of("no-such-rule")
    assert rule_of("record-json") is rules.RECORD_JSON


# --- the admission order (app.core.admission.validator ADMISSION, RULE_ORDER) ---------------------

# Registered rules applied outside the decision of one admission record, with the reason.
OUTSIDE_THE_ORDER = {
    rules.RECORD_WRITE.id: (
        "the broker would not take an outcome (app.core.admission.validator_batch)"
    ),
    rules.ACTION_SHAPE.id: "an action checked at HTTP before its command is sent",
    rules.COMPONENT_BUTTON.id: "an action checked at HTTP before its command is sent",
    rules.CONTEXT_PATH.id: "an action checked at HTTP before its command is sent",
}

# The modules the decision of one record runs (validate and what it calls), all of the
# admission room.
ADMISSION_PATH = [
    APP / "core" / "admission" / f"{name}.py"
    for name in (
        "intake",
        "validator",
        "validator_steps",
        "validator_outputs",
        "decision",
        "decision_steps",
        "decision_outcomes",
        "host_commands",
        "host_commands_call",
        "host_commands_run",
        "host_commands_action",
        "host_commands_fork",
        "identifiers",
        "payload_rules",
        "payload_rules_exclusions",
        "payload_rules_affordances",
        "payload_rules_violations",
        "limits",
        "limits_envelope",
        "children",
        "cross_field",
        "fold",
    )
]


def _ordered() -> set[str]:
    from app.core.admission.validator import RULE_ORDER

    return {rule.id for _stage, _step, found in RULE_ORDER for rule in found}


def test_rules_every_rule_is_in_the_admission_order_or_said_why_not() -> None:
    ordered = _ordered()
    assert ordered | set(OUTSIDE_THE_ORDER) == set(RULES)
    assert not ordered & set(OUTSIDE_THE_ORDER)


def test_rules_the_admission_path_emits_only_rules_in_the_order() -> None:
    used: set[str] = set()
    for path in ADMISSION_PATH:
        used |= {CONSTANTS[name].id for name in used_constants(path)}
    assert sorted(used - _ordered()) == []


def test_rules_registry_step_names_the_rules_place_in_the_order() -> None:
    from app.core.admission.validator import RULE_ORDER

    places = {"action", "write"}
    for stage, step, _found in RULE_ORDER:
        places |= {stage, step.split()[-1]}
    for stage, step, found in RULE_ORDER:
        for rule in found:
            steps = set(rule.step.split(", "))
            assert steps <= places, (rule.id, rule.step)
            assert steps & {stage, step.split()[-1]}, (rule.id, stage, step, rule.step)


def test_rules_the_order_tables_are_built_once() -> None:
    from app.core.admission.decision import STEPS
    from app.core.admission.host_commands import COMMANDS
    from app.core.admission.intake import INTAKE
    from app.core.admission.validator import ADMISSION, RULE_ORDER

    assert [stage.name for stage in ADMISSION] == ["intake", "run", "command", "envelope"]
    # the intake stage is INTAKE itself, not a copy: the same steps with the same check
    # functions (compiled, a ``Final`` tuple read from another module is a new tuple object,
    # so the tuple's identity is not the test)
    assert ADMISSION[0].steps == INTAKE
    assert all(
        mine[2] is theirs[2] for mine, theirs in zip(ADMISSION[0].steps, INTAKE, strict=True)
    )
    steps = [(stage.name, name) for stage in ADMISSION for name, _r, _c in stage.steps]
    assert len(steps) == len(set(steps))
    assert [name for name, _r, _c in STEPS] == [
        step.removeprefix("decide ") for _s, step, _r in RULE_ORDER if step.startswith("decide ")
    ]
    commanded = [step.split()[1] for _s, step, _r in RULE_ORDER if step.startswith("command ")]
    assert commanded == list(COMMANDS)
    for stage in ADMISSION:
        for _name, found, _check in stage.steps:
            assert all(isinstance(rule, Rule) and RULES[rule.id] is rule for rule in found)
