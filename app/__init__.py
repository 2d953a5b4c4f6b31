"""a2ui-stream: an event-sourced Kafka host for OpenWOP ``ui.a2ui-surface`` envelopes.

``app.core`` is pure (decisions and data); ``app.shell`` does the I/O, in rooms by role (worker,
http, cli; README "Architecture"); ``app.devtools`` (benchmarks, fault scenarios, soak) uses
the product, which never imports it. Importing any of them does no I/O: the entry points
(``app.shell.cli.main``, tests/conftest.py, scripts/) install the compiled core
(app/compiled_core.py) before they import it.
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
