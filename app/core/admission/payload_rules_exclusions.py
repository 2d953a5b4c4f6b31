"""The payload rules' table of exclusions: every affordance the OpenWOP profile refuses, the
security invariant it protects and why (openwop-a2ui.md §4 "Excluded by the profile" and §15;
RFC 0209 §B), as data (STYLE rule 1).

Role: pure data read by app.core.admission.payload_rules_violations (which names the exclusion in
a refusal's details) and app.core.admission.payload_rules_affordances and payload_rules (which
detect them).

May import: the standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ALLOWED_EVENT_NAMES",
    "EXCLUDED_COMPONENTS",
    "EXCLUSIONS",
    "Exclusion",
]

NO_CODE_EXEC: Final = "a2ui-surface-no-code-exec"
ACTION_CONFINEMENT: Final = "a2ui-action-confinement"
NO_NETWORK_EGRESS: Final = "a2ui-surface-no-network-egress"
NO_SECRET_INPUT: Final = "a2ui-surface-no-secret-input"


@dataclass(frozen=True, slots=True)
class Exclusion:
    """One affordance the profile refuses: the invariant it protects and the reason, in words."""

    invariant: str
    reason: str


EXCLUSIONS: Final[Mapping[str, Exclusion]] = {
    # Components that fetch from the network (RFC 0209 §B.3).
    "Image": Exclusion(NO_NETWORK_EGRESS, "it loads a remote URL"),
    "Video": Exclusion(NO_NETWORK_EGRESS, "it loads a remote URL"),
    "AudioPlayer": Exclusion(NO_NETWORK_EGRESS, "it loads a remote URL"),
    "Icon": Exclusion(NO_NETWORK_EGRESS, "deferred by the profile (named or svgPath icons)"),
    # Basic-catalog components outside the closed profile (RFC 0209 §B.2).
    "List": Exclusion(NO_CODE_EXEC, "not in the OpenWOP profile of the basic catalog"),
    "Tabs": Exclusion(NO_CODE_EXEC, "not in the OpenWOP profile of the basic catalog"),
    "Modal": Exclusion(NO_CODE_EXEC, "not in the OpenWOP profile of the basic catalog"),
    "Slider": Exclusion(NO_CODE_EXEC, "not in the OpenWOP profile of the basic catalog"),
    # Affordances inside otherwise admitted components and messages.
    "functionCall": Exclusion(ACTION_CONFINEMENT, "a client function is not resume/exchange"),
    "event-name": Exclusion(ACTION_CONFINEMENT, "an action reaches only resume or exchange"),
    "obscured": Exclusion(NO_SECRET_INPUT, "a surface must not solicit a secret"),
    "iconUrl": Exclusion(NO_NETWORK_EGRESS, "the renderer would fetch it"),
    "sendDataModel": Exclusion(ACTION_CONFINEMENT, "only event.context is ever submitted"),
    "template": Exclusion(NO_CODE_EXEC, "data-model templates generate components from data"),
    "function-value": Exclusion(NO_CODE_EXEC, "only checks[].condition may call `required`"),
    "nested-call": Exclusion(NO_CODE_EXEC, "`required` takes a binding, never a call"),
    "foreign-catalog": Exclusion(NO_CODE_EXEC, "only the pinned basic catalog renders"),
    "unknown-component": Exclusion(NO_CODE_EXEC, "the catalog is closed and fails closed"),
    "extra-property": Exclusion(NO_CODE_EXEC, "components and messages are closed objects"),
    "action-target": Exclusion(ACTION_CONFINEMENT, "an action reaches only resume or exchange"),
}

# Basic-catalog component names that are excluded outright (a subset of the keys above).
EXCLUDED_COMPONENTS: Final = frozenset(
    {"Image", "Video", "AudioPlayer", "Icon", "List", "Tabs", "Modal", "Slider"}
)

ALLOWED_EVENT_NAMES: Final = ("resume", "exchange")  # RFC 0209 §B.3; v1 action.target too
