"""Identifiers in an admission record, and the rule that no registered secret may be one.

Role: pure. SR-1 (openwop-a2ui.md §14) replaces a registered secret with
``[REDACTED:<secretId>]`` wherever it appears. In free text that is harmless; in an identifier
it breaks the record: ``[`` is outside every id grammar (runId, surfaceId, componentId, nodeId),
a redacted component id no longer matches the references to it, and a redacted surfaceId or
runId names another surface or run. A recorded event must stay valid under the profile it was
admitted by (issue 14 item 2), so an identifier that holds a secret is refused, never redacted:
``envelope_invalid``, rule ``identifier-secret``, at the identifier's JSON Pointer, with a
message that names the field and the secret's id, never its value.

The identifiers: the record's ``runId``; the envelope's ``correlationId``, ``envelopeId`` and
``nodeId``; in a v2 payload its ``surfaceId``, every message body's ``surfaceId``, every
component's ``id`` and its ``children`` and ``child`` references; in a v1 payload every
component's ``id`` (the viewer maps v1 ids onto v2 component ids and data paths); in a host
command its ``workflowId``, ``nodeId``, ``surfaceId``, ``sourceComponentId`` and ``sourceRunId``.

May import: the standard library and app.core.admission.redaction / app.core.admission.refusal /
app.core.admission.rules (pure).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from app.core.admission.redaction import Secrets
from app.core.admission.refusal import Violation
from app.core.admission.rules import IDENTIFIER_SECRET, RUN_ID, refuse

__all__ = [
    "RUN_ID_PATTERN",
    "identifiers",
    "run_id_error",
    "secret_in",
    "secret_identifier",
]

# The runId grammar (schemas/admission-record and host-command carry the same pattern): the
# OpenWOP v2 form ``<tenant>/<opaque>`` (ids.schema.json ``runId``; the tenant may be
# ``anon:<hash>``), with an opaque of any length, or one v1-style segment. ASCII only, so no
# whitespace or control character reaches a Kafka key, a header or a log line (issue 14).
RUN_ID_PATTERN: Final = r"^[A-Za-z0-9._~:-]{1,128}(/[A-Za-z0-9._~-]{1,128})?$"
_RUN_ID: Final = re.compile(RUN_ID_PATTERN)


def run_id_error(run_id: str) -> Violation | None:
    """Why ``run_id`` breaks the runId grammar, as a refusal; None when it is fine."""
    if _RUN_ID.fullmatch(run_id) is not None:  # (not match: its $ admits a final newline)
        return None
    return refuse(
        RUN_ID,
        "/runId",
        f"runId {run_id[:80]!r} is not a run id: use <tenant>/<id> (or one segment) of ASCII "
        "letters, digits and . _ ~ - (at most 128 each; : only in the tenant)",
        {"rule": RUN_ID.id},
    )


_ENVELOPE_IDS: Final = ("correlationId", "envelopeId", "nodeId")
_COMMAND_IDS: Final = ("workflowId", "nodeId", "surfaceId", "sourceComponentId", "sourceRunId")


def secret_in(text: str, secrets: Secrets) -> str | None:
    """The secretId of the first registered secret (longest first) that occurs in ``text``."""
    for value, secret_id, _ in secrets:
        if value in text:
            return secret_id
    return None


def identifiers(record: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:  # noqa: C901 - one defensive walk of the record's shape, level by level
    """``(JSON Pointer, what it is, value)`` for every identifier of an admission record. Only
    the shape is assumed that the record schema guarantees (``runId``, an ``envelope``
    object); the payload is walked defensively, whatever it holds."""
    yield "/runId", "the runId", record.get("runId")
    command = record.get("command")
    if isinstance(command, dict):  # a host command (app.core.admission.host_commands)
        for name in _COMMAND_IDS:
            if name in command:
                yield f"/command/{name}", f"the command's {name}", command[name]
    envelope = record.get("envelope")
    if not isinstance(envelope, dict):
        return
    for name in _ENVELOPE_IDS:
        if name in envelope:
            yield f"/envelope/{name}", f"the envelope's {name}", envelope[name]
    payload = envelope.get("payload")
    if not isinstance(payload, dict):
        return
    base = "/envelope/payload"
    if "surfaceId" in payload:
        yield base + "/surfaceId", "the payload's surfaceId", payload["surfaceId"]
    messages = payload.get("messages")
    if isinstance(messages, list):
        for index, message in enumerate(messages):
            if not isinstance(message, dict):
                continue
            for kind, body in message.items():
                if not isinstance(body, dict):
                    continue
                where = f"{base}/messages/{index}/{kind}"
                if "surfaceId" in body:
                    yield where + "/surfaceId", f"message {index}'s surfaceId", body["surfaceId"]
                yield from _components(body.get("components"), where + "/components")
    surface = payload.get("surface")
    if isinstance(surface, dict):
        yield from _components(surface.get("components"), base + "/surface/components")


def _components(components: Any, base: str) -> Iterator[tuple[str, str, Any]]:
    if not isinstance(components, list):
        return
    for index, component in enumerate(components):
        if not isinstance(component, dict):
            continue
        path = f"{base}/{index}"
        if "id" in component:
            yield path + "/id", f"component {index}'s id", component["id"]
        if "child" in component:
            yield path + "/child", f"component {index}'s child", component["child"]
        children = component.get("children")
        if isinstance(children, list):
            for at, child in enumerate(children):
                yield f"{path}/children/{at}", f"component {index}'s child {at}", child


def secret_identifier(record: Mapping[str, Any], secrets: Secrets) -> Violation | None:
    """The first identifier of ``record`` that holds a registered secret, as a refusal."""
    if not secrets:
        return None
    for path, what, value in identifiers(record):
        if not isinstance(value, str):
            continue
        secret_id = secret_in(value, secrets)
        if secret_id is not None:
            return refuse(
                IDENTIFIER_SECRET,
                path,
                f"{what} ({path}) contains the registered secret {secret_id!r}: an identifier "
                "is recorded as sent and cannot be redacted (a redacted id breaks the id "
                "grammar and every reference to it); use an identifier that holds no secret",
                {"rule": IDENTIFIER_SECRET.id, "secretId": secret_id, "field": path},
            )
    return None
