"""SR-1 redaction (openwop-a2ui.md §14): replace registered secret values with
``[REDACTED:<secretId>]`` everywhere in a JSON value before it is recorded.

Rules implemented:
- substring replacement, never a regex; values shorter than 8 characters are not redacted;
- longest value first: where occurrences of several secrets overlap (or one contains another),
  the whole overlapping span becomes ONE marker naming the longest secret in it, so no part of
  any secret survives (sequential ``str.replace`` would leave the tail of an overlapping one);
- every string leaf, at any depth, in objects and arrays, ``reasoning`` included; object KEYS
  too (a data-model key is as recorded as a value, and §14 says redacted material MUST NOT
  appear in an emitted RunEventDoc). If two keys of one object redact to the same text the
  later one wins, as with duplicate keys in JSON;
- key order preserved, and a value with nothing to redact is returned as the SAME object
  (the recorded envelope must stay byte-equal to the received one, RFC 0209 §C.11).

The walk is iterative (no recursion limit on deep input). May import: the standard library,
orjson and app.core.admission.refusal.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import orjson

from app.core.admission.refusal import Violation

__all__ = ["MIN_SECRET_LENGTH", "Secrets", "prepare", "redact_text", "redact", "redact_violation"]

MIN_SECRET_LENGTH: Final = 8

# Prepared secrets: (value, secretId, JSON-escaped value), longest value first.
Secrets = tuple[tuple[str, str, bytes], ...]


def prepare(registered: Iterable[tuple[str, str]]) -> Secrets:
    """Order ``(secretId, value)`` registrations for redaction: drop values under 8 characters
    (§14), drop repeated values (the first registration names it), longest first, ties by id."""
    seen: dict[str, str] = {}
    for secret_id, value in registered:
        if isinstance(value, str) and len(value) >= MIN_SECRET_LENGTH and value not in seen:
            seen[value] = str(secret_id)
    ordered = sorted(seen.items(), key=lambda item: (-len(item[0]), item[1], item[0]))
    return tuple((value, sid, orjson.dumps(value)[1:-1]) for value, sid in ordered)


def redact_text(text: str, secrets: Secrets) -> str:
    """Replace every occurrence of every secret in ``text``; overlapping occurrences merge into
    one span marked with the longest secret among them."""
    spans: list[tuple[int, int, int]] = []  # (start, end, rank); rank 0 is the longest secret
    for rank, (value, _, _) in enumerate(secrets):
        start = text.find(value)
        while start != -1:
            spans.append((start, start + len(value), rank))
            start = text.find(value, start + 1)
    if not spans:
        return text
    spans.sort()
    out: list[str] = []
    pos = 0
    cur_start, cur_end, cur_rank = spans[0]
    for start, end, rank in spans[1:]:
        if start < cur_end:  # overlapping: one span, named by the longest secret inside it
            cur_end = max(cur_end, end)
            cur_rank = min(cur_rank, rank)
            continue
        out.append(text[pos:cur_start])
        out.append(f"[REDACTED:{secrets[cur_rank][1]}]")
        pos = cur_end
        cur_start, cur_end, cur_rank = start, end, rank
    out.append(text[pos:cur_start])
    out.append(f"[REDACTED:{secrets[cur_rank][1]}]")
    out.append(text[cur_end:])
    return "".join(out)


def _may_contain(value: Any, secrets: Secrets) -> bool:
    """A fast, conservative pre-check: orjson escapes character by character, so a secret in any
    string or key shows up as its escaped form in the serialized value."""
    try:
        blob = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return True  # cannot tell cheaply: walk it
    return any(escaped in blob for _, _, escaped in secrets)


def redact(value: Any, secrets: Secrets) -> Any:
    """Return ``value`` with every secret replaced; ``value`` itself when nothing matches."""
    if not secrets:
        return value
    if isinstance(value, str):
        return redact_text(value, secrets)
    if not isinstance(value, dict | list) or not _may_contain(value, secrets):
        return value
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        src, dst = stack.pop()
        pairs = src.items() if isinstance(src, dict) else enumerate(src)
        for key, item in pairs:
            if isinstance(item, dict | list):
                child: Any = {} if isinstance(item, dict) else []
                stack.append((item, child))
                item = child
            elif isinstance(item, str):
                item = redact_text(item, secrets)
            if isinstance(dst, dict):
                dst[redact_text(key, secrets) if isinstance(key, str) else key] = item
            else:
                dst.append(item)
    return root


def redact_violation(violation: Violation, secrets: Secrets) -> Violation:
    """§14: redacted material must not appear in an error either: the path, the message and
    the details of a refusal, scrubbed like a recorded event (``violation`` itself when there
    are no secrets)."""
    if not secrets:
        return violation
    return Violation(
        violation.code,
        violation.rule,
        redact_text(violation.path, secrets),
        redact_text(violation.message, secrets),
        redact(dict(violation.details), secrets),
    )
