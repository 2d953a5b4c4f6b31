"""Dead-letter records (schemas/dead-letter.schema.json): a refusal plus the original bytes.

Pure: standard library and app.core. "Nothing lost" without storing registered secrets
(openwop-a2ui.md §14; docs/pipeline.md): the original bytes are kept, base64, except that every
registered SR-1 secret of the run is replaced in them, both as raw UTF-8 and in its JSON-escaped
form, by ``[REDACTED:<secretId>]``; the refusal (path, message, details) and the runId and
correlationId the letter names are redacted the same way, so a dead letter is the one sink
where every refusal is scrubbed, whichever rule produced it. ``sha256`` and ``size`` are of
the bytes as received, so a replay can prove which record it was; ``redacted`` says whether
anything was replaced.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from app.core.admission.redaction import Secrets, redact_text, redact_violation
from app.core.admission.refusal import Violation

__all__ = ["dead_letter", "redact_bytes"]


def redact_bytes(data: bytes, secrets: Secrets) -> bytes:
    """Replace each secret's UTF-8 bytes and JSON-escaped bytes; longest first (§14)."""
    if not secrets:
        return data
    try:
        # Text first: overlapping secrets merge into one marker exactly as in recorded events.
        return redact_text(data.decode("utf-8"), secrets).encode("utf-8")
    except UnicodeDecodeError:
        out = data
        for value, secret_id, escaped in secrets:
            marker = f"[REDACTED:{secret_id}]".encode()
            out = out.replace(value.encode("utf-8"), marker).replace(escaped, marker)
        return out


def dead_letter(
    violation: Violation,
    original: bytes | None,
    *,
    topic: str,
    partition: int,
    offset: int,
    now: str,
    run_id: str | None,
    correlation_id: str | None,
    secrets: Secrets = (),
    keep_bytes: bool = True,
) -> dict[str, Any]:
    """The dead letter (schemas/dead-letter) of the record at ``topic``/``partition``/``offset``
    refused with ``violation``, redacted as the module docstring says; ``keep_bytes=False`` keeps
    none of the original bytes."""
    raw = original or b""
    kept = raw if keep_bytes else b""
    if secrets:
        violation = redact_violation(violation, secrets)
        run_id = None if run_id is None else redact_text(run_id, secrets)
        correlation_id = None if correlation_id is None else redact_text(correlation_id, secrets)
    if secrets and kept:
        kept = redact_bytes(raw, secrets)
        # JSON escapes can spell a secret in other ways (\u0041...): the decoded text is also
        # checked, and if a secret survives in it the bytes are not kept at all.
        escaped_leftover = any(v in _lenient_text(kept) for v, _, _ in secrets)
        if escaped_leftover:
            kept = b""
    return {
        "code": violation.code,
        "rule": violation.rule,
        "path": violation.path,
        "message": violation.message,
        "details": dict(violation.details),
        "runId": run_id,
        "correlationId": correlation_id,
        "source": {"topic": topic, "partition": partition, "offset": offset},
        "timestamp": now,
        "original": {
            "base64": base64.b64encode(kept).decode("ascii"),
            "sha256": hashlib.sha256(raw).hexdigest(),
            "size": len(raw),
            "redacted": kept != raw,
        },
    }


def _lenient_text(data: bytes) -> str:
    """The bytes as text with JSON \\uXXXX escapes decoded, for the leftover check only."""
    text = data.decode("utf-8", "replace")
    if "\\u" not in text:
        return text
    try:
        return text.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:
        return text
