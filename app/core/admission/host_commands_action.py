"""The host command ``action.submit``: an action on a surface, re-checked against the run's
state by the validator before it is recorded (a2ui-action-confinement).

Role: a pure handler for app.core.admission.host_commands ``COMMANDS``. The HTTP layer checked
the component and the context against the materialized surface at ``expectedSequence``
(app.core.http.actions); here the name, the run and the surface are checked again as the run's
single writer sees them, in ``COMMANDS``' order of the rules: the name is resume or exchange, the
run is live, the surface is live, final and untainted, and it has not changed since
``expectedSequence``. Accepted: ``action.accepted`` (SR-1 redacted context).

May import: the standard library and app.core.* (pure).
"""

from __future__ import annotations

from typing import NamedTuple

from app.core.admission.host_commands_call import (
    CommandCall,
    ended_refusal,
    expected_sequence,
    invalid_command,
)
from app.core.admission.redaction import redact
from app.core.admission.refusal import Violation
from app.core.admission.rules import (
    ACTION_CONFINEMENT,
    SURFACE_FINAL,
    SURFACE_LIVE,
    SURFACE_UNCHANGED,
    UNTRUSTED_BLOCKS_APPROVAL,
    refuse,
)
from app.core.runlog.run_state import Recorded, RunState

__all__ = ["ACTION_NAMES", "submit_action"]

ACTION_NAMES = ("resume", "exchange")  # a2ui-action-confinement


class _Target(NamedTuple):
    """What the action check reads of the surface acted on (a v2 surface or the run's v1 one)."""

    live: bool
    last: Recorded | None  # the surface's last recorded envelope, None before any
    tainted: bool
    partial: bool
    nodes: frozenset[str]


def submit_action(call: CommandCall) -> Violation | None:
    """``action.submit {surfaceId, sourceComponentId, name, context, expectedSequence}``:
    ``action.accepted {surfaceId, sourceComponentId, name, context}``, or the first refusal."""
    command, state, secrets = call.command, call.state, call.secrets
    name = command.get("name")
    if name not in ACTION_NAMES:  # a2ui-action-confinement
        return refuse(
            ACTION_CONFINEMENT,
            "/command/name",
            f"an action's name is resume or exchange, not {name!r}",
            {"name": name},
        )
    ended = ended_refusal(state)
    if ended is not None:
        return ended
    sid = command.get("surfaceId")
    if not isinstance(sid, str):
        return invalid_command("/command/surfaceId", "surfaceId must be a string")
    target = _target(state, sid)
    refused = _surface_refusal(target, sid, expected_sequence(command), state)
    if refused is not None:
        return refused
    payload = {
        "surfaceId": sid,
        "sourceComponentId": command.get("sourceComponentId"),
        "name": name,
        "context": redact(command.get("context"), secrets),
    }
    node = next(iter(sorted(target.nodes)), None)
    call.emit("action.accepted", payload, node)
    return None


def _target(state: RunState, sid: str) -> _Target:
    """The surface ``sid`` as the run's state holds it (``~v1``: the run's v1 surface)."""
    if sid == "~v1":
        v1 = state.v1_surface
        if v1 is None:
            return _Target(False, None, False, False, frozenset[str]())
        return _Target(True, v1.last, v1.tainted, False, v1.node_ids)
    surface = state.surfaces.get(sid)
    if surface is None:
        return _Target(False, None, False, False, frozenset())
    return _Target(
        surface.status == "live", surface.last, surface.tainted, surface.partial, surface.node_ids
    )


def _surface_refusal(target: _Target, sid: str, expected: int, state: RunState) -> Violation | None:
    """Why the surface cannot take the action now (live, final, untainted, unchanged), or None."""
    if not target.live:
        return refuse(SURFACE_LIVE, "/command/surfaceId", f"no live surface {sid!r}")
    if target.partial:
        return refuse(
            SURFACE_FINAL,
            "/command/surfaceId",
            "the surface's last envelope is a partial chunk: actions wait for the final one (E1)",
        )
    if target.tainted:
        return refuse(
            UNTRUSTED_BLOCKS_APPROVAL,
            "/command/surfaceId",
            "untrusted_content_blocks_approval: this surface carries untrusted content",
            {"reason": "untrusted_content_blocks_approval", "surfaceIds": [sid]},
        )
    if target.last is None or target.last.sequence != expected:
        return refuse(
            SURFACE_UNCHANGED,
            "/command/expectedSequence",
            "the surface changed after the action was checked; submit it again",
            {"runStatus": state.lifecycle.status},
        )
    return None
