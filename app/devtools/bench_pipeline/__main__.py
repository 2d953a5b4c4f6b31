"""``python -m app.devtools.bench_pipeline passthrough BOOTSTRAP ADMISSION LOG GROUP [MODE]``: the
pass-through ceiling as its own process (the bench's passes start it); MODE ``partition``
(default) or ``worker`` (``passthrough.MODES``)."""

from __future__ import annotations

import sys

from app.devtools.bench_pipeline.passthrough import passthrough_main

if __name__ == "__main__":
    if sys.argv[1:2] == ["passthrough"]:
        sys.exit(passthrough_main(sys.argv[2:]))
    sys.exit(
        "usage: python -m app.devtools.bench_pipeline passthrough BOOTSTRAP ADMISSION LOG GROUP "
        "[partition|worker]"
    )
