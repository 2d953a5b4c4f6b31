"""Test kit for the pipeline on a real broker: worker processes, a corpus with its expected
outcomes, publishing, and the accounting that proves nothing was lost or duplicated.

The kit lives in the package (``app.shell.fault_kit``) so that ``a2ui-stream soak`` runs the
same code as the tests; this module re-exports it under the names the tests import.

The oracle is the pure core itself: deciding the corpus in publication order per run
(exactly what `a2ui-stream check` does) gives the one correct outcome of every record, so the
log and the dead-letter topic must match it record for record, whatever crashed in between.
"""

from __future__ import annotations

from app.shell.fault_kit import (
    BASIC,
    RULES,
    Expected,
    Observed,
    Published,
    WorkerProcess,
    account,
    apply_topics,
    components,
    corpus,
    create,
    data,
    delete,
    envelope,
    expected_outcomes,
    image,
    observe,
    publish,
    wait_for_outcomes,
)

__all__ = [
    "BASIC",
    "RULES",
    "Expected",
    "Observed",
    "Published",
    "WorkerProcess",
    "account",
    "apply_topics",
    "components",
    "corpus",
    "create",
    "data",
    "delete",
    "envelope",
    "expected_outcomes",
    "image",
    "observe",
    "publish",
    "wait_for_outcomes",
]
