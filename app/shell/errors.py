"""The shell's exception tree: one root, and the type says whose fault it is (STYLE rule 4).

Refusals of producer input are values (``app.core.admission.refusal.Violation``), never exceptions.

``explain`` and ``report`` are how the CLI ends on any error (issue 19 item 2): one or two
lines that say what is wrong and what to do, exit status 2 for the operator's configuration or
command, no traceback unless ``--debug``. A library exception the operator can act on (the
broker went away, a record the producer will not send, a port in use) is explained as one of
ours; anything else is a bug, said as such.
"""

from __future__ import annotations

import errno
import sys
import traceback
from typing import TextIO

__all__ = [
    "A2uiStreamError",
    "BrokerUnavailableError",
    "EXIT_BUG",
    "EXIT_USAGE",
    "InternalError",
    "OperatorError",
    "explain",
    "report",
]

EXIT_USAGE = 2  # usage or configuration: the message says what to change
EXIT_BUG = 70  # EX_SOFTWARE (sysexits.h): a bug in a2ui-stream


class A2uiStreamError(Exception):
    """Root of every error a2ui-stream raises on purpose."""


class OperatorError(A2uiStreamError):
    """The operator's configuration or command is wrong; the message says what to change."""


class BrokerUnavailableError(OperatorError):
    """No usable Kafka broker: start one, set KAFKA_BOOTSTRAP, or install what the message names."""


class InternalError(A2uiStreamError):
    """A bug in a2ui-stream: please report it with the message."""


def explain(exc: BaseException) -> A2uiStreamError | None:
    """``exc`` as one of ours when the operator can act on it, else None (a bug)."""
    if isinstance(exc, A2uiStreamError):
        return exc
    from aiokafka import errors as kafka

    if isinstance(exc, kafka.KafkaConnectionError):
        return BrokerUnavailableError(
            "no answer as Kafka from the bootstrap address (the broker stopped, or "
            "KAFKA_BOOTSTRAP names something that is not a Kafka broker): check the address "
            "and that the broker runs, then retry"
        )
    if isinstance(exc, kafka.MessageSizeTooLargeError):
        return OperatorError(
            "a record is larger than the broker accepts on this topic (max.message.bytes): "
            "make it smaller, or check the topic's config with `a2ui-stream topics apply`"
        )
    if isinstance(exc, kafka.KafkaTimeoutError | TimeoutError):
        return BrokerUnavailableError(
            "the Kafka broker did not answer in time: check it is running and not overloaded, "
            "and retry"
        )
    if isinstance(exc, kafka.UnknownTopicOrPartitionError):
        return OperatorError(
            "a topic does not exist on this broker: run `a2ui-stream topics apply` with the "
            "worker's A2UI_STREAM_TOPIC_PREFIX"
        )
    if isinstance(exc, kafka.KafkaError) and not isinstance(exc, kafka.IllegalStateError):
        return BrokerUnavailableError(f"the Kafka broker refused the request: {exc}")
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return OperatorError(
            f"an address is already in use ({exc.strerror}): another a2ui-stream may be "
            "running; stop it, or choose another port (A2UI_STREAM_WEB_PORT)"
        )
    return None


def report(exc: BaseException, *, debug: bool = False, out: TextIO | None = None) -> int:
    """Print ``exc`` for a person (the traceback too with ``debug``); the exit status."""
    out = sys.stderr if out is None else out
    if debug:
        traceback.print_exception(exc, file=out)
    known = explain(exc)
    if isinstance(known, OperatorError):
        print(f"a2ui-stream: {known}", file=out)
        return EXIT_USAGE
    if known is not None:  # ours, not the operator's: InternalError and the root
        what = f"internal error: {known}"
    else:
        what = f"internal error: {type(exc).__name__}: {exc}"
    print(f"a2ui-stream: {what}", file=out)
    if not debug:
        print(
            "  this is a bug in a2ui-stream: run the command again with --debug for the "
            "traceback, and report it with that",
            file=out,
        )
    return EXIT_BUG
