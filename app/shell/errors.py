"""The shell's exception tree: one root, and the type says whose fault it is (STYLE rule 4).

Refusals of producer input are values (``app.core.refusal.Violation``), never exceptions.
"""

from __future__ import annotations

__all__ = ["A2uiStreamError", "BrokerUnavailableError", "InternalError", "OperatorError"]


class A2uiStreamError(Exception):
    """Root of every error a2ui-stream raises on purpose."""


class OperatorError(A2uiStreamError):
    """The operator's configuration or command is wrong; the message says what to change."""


class BrokerUnavailableError(OperatorError):
    """No usable Kafka broker: start one, set KAFKA_BOOTSTRAP, or install what the message names."""


class InternalError(A2uiStreamError):
    """A bug in a2ui-stream: please report it with the message."""
