"""``python -m app.shell.cli``: the ``a2ui-stream`` command (the worker processes that the
tests and benchmarks start run it so)."""

import sys

from app.shell.cli import main

sys.exit(main())
