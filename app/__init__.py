"""a2ui-stream: an event-sourced Kafka host for OpenWOP ``ui.a2ui-surface`` envelopes.

``app.core`` is pure (decisions and data); ``app.shell`` does the I/O, in rooms by role (worker,
http, cli; README "Architecture"); ``app.devtools`` (benchmarks, fault scenarios, soak) uses
the product, which never imports it.
"""

from app.compiled_core import CORE_BUILD

__all__ = ["CORE_BUILD", "__version__"]
__version__ = "0.1.0"
