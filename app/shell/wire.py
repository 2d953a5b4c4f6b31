"""The record header names on the wire, for every room of the shell: one import point.

Shared shell module. Each name is defined where the pure core writes it (the core cannot import
the shell): ``a2ui-source: <partition>:<offset>`` on every validator output and ``a2ui-type:
<event type>`` on every log record (app.core.admission.validator_batch), ``a2ui-resync:
<partition>:<offset>`` on a resync answer (app.core.projection.projector_runs). The worker, the CLI
and devtools read them from here instead of from one another's modules (the validator and
projector loops re-exported them) or by repeating the string (the run index did).

May import: app.core only.
"""

from __future__ import annotations

from app.core.admission.validator_batch import SOURCE_HEADER, TYPE_HEADER
from app.core.projection.projector_runs import RESYNC_HEADER

__all__ = ["RESYNC_HEADER", "SOURCE_HEADER", "TYPE_HEADER"]
