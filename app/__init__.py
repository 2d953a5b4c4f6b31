"""a2ui-stream: an event-sourced Kafka host for OpenWOP ``ui.a2ui-surface`` envelopes.

``app.core`` is pure (decisions and data); ``app.shell`` does the I/O (Faust, Kafka, HTTP, CLI).
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
