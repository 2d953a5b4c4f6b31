"""Worker metrics in the Prometheus text format (served at ``/metrics``).

Shell module. Counters only carry outcome names and refusal codes: never a payload value, a
runId or anything a producer wrote (no registered secret can reach a metric).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

__all__ = ["Metrics"]


class Metrics:
    def __init__(self) -> None:
        self.outcomes: Counter[str] = Counter()
        self.refused_by_code: Counter[str] = Counter()
        self.lag: Callable[[], Mapping[int, int]] = dict
        # Other loops' lines (the projector's frames and fallbacks), rendered after ours.
        self.extra: list[Callable[[], list[str]]] = []

    def count(self, outcome: str, code: str | None = None) -> None:
        self.outcomes[outcome] += 1
        if code is not None:
            self.refused_by_code[code] += 1

    def render(self) -> str:
        lines = [
            "# HELP a2ui_admitted_total Admission records recorded in the per-run log.",
            "# TYPE a2ui_admitted_total counter",
            f"a2ui_admitted_total {self.outcomes['admitted']}",
            "# HELP a2ui_refused_total Admission records sent to the dead-letter topic, by code.",
            "# TYPE a2ui_refused_total counter",
        ]
        lines += [
            f'a2ui_refused_total{{code="{code}"}} {n}'
            for code, n in sorted(self.refused_by_code.items())
        ]
        lines += [
            "# HELP a2ui_deduplicated_total Re-emissions of a recorded correlationId (E2).",
            "# TYPE a2ui_deduplicated_total counter",
            f"a2ui_deduplicated_total {self.outcomes['deduplicated']}",
            "# HELP a2ui_redelivered_skipped_total Records whose outcome was already written "
            "before a restart.",
            "# TYPE a2ui_redelivered_skipped_total counter",
            f"a2ui_redelivered_skipped_total {self.outcomes['skipped']}",
            "# HELP a2ui_consumer_lag Admission records not yet processed, per partition.",
            "# TYPE a2ui_consumer_lag gauge",
        ]
        lines += [
            f'a2ui_consumer_lag{{topic="admission",partition="{p}"}} {n}'
            for p, n in sorted(self.lag().items())
        ]
        for more in self.extra:
            lines += more()
        return "\n".join(lines) + "\n"
