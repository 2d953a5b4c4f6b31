"""Who may issue a host command: only an HTTP gateway of this deployment (issue 14 item 5).

Role: pure. Host commands (app.core.admission.host_commands) travel on the admission topic beside AI
envelopes, so that the run's single writer orders them. But what a command says is what a
person did: ``interrupt.resolve`` approves a gate, ``action.submit`` reports a click. Anyone who
may publish envelopes may write the admission topic, so the topic alone cannot tell a person's
decision from a producer's forgery. The gateway (the worker's HTTP API, after it authenticated
the caller and checked the action against the materialized surface, app.core.http.actions) seals
each command record it publishes: the Kafka header ``a2ui-gateway`` carries
``v1:<hex HMAC-SHA256 of the record's bytes>`` under the deployment's gateway key
(``A2UI_STREAM_GATEWAY_KEY``, which only workers hold). The validator decides a command only
when the seal verifies; any other command record is refused (``forbidden``, rule
``command-gateway``) and recorded nowhere. The seal covers the whole value, runId included, so
it cannot be moved to another run or edited.

What it does not stop: a principal that can READ the admission topic could re-publish a sealed
record as it was. An interrupt resolves once (``interrupt_already_resolved``), but a replayed
action is accepted again while its surface is unchanged, so producers should get Write and not
Read on the admission topic (README, "Security model").

May import: the standard library only.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from typing import Final

__all__ = ["HEADER", "MIN_KEY_BYTES", "seal", "sealed_by"]

HEADER: Final = "a2ui-gateway"
MIN_KEY_BYTES: Final = 32
_VERSION: Final = b"v1:"


def seal(key: bytes, value: bytes) -> bytes:
    """The ``a2ui-gateway`` header value for a command record's bytes."""
    return _VERSION + hmac.new(key, value, hashlib.sha256).hexdigest().encode("ascii")


def sealed_by(key: bytes | None, value: bytes, headers: Sequence[tuple[str, bytes]]) -> bool:
    """Whether ``headers`` carry exactly one valid seal of ``value`` under ``key`` (no key:
    nothing is sealed). Compared in constant time."""
    if key is None:
        return False
    found = [v for name, v in headers if name == HEADER]
    if len(found) != 1 or not isinstance(found[0], bytes):
        return False
    return hmac.compare_digest(found[0], seal(key, value))
