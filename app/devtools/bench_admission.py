"""``a2ui-stream bench admission [--json] [--iterations N]``: how long one in-process admission
decision takes, against the pure-Python ``jsonschema`` baseline measured in the same run.

Shell module (it reads the clock and the schema files). Two figures (issue 3 acceptance):

- ``rfc0209-positive``: the RFC 0209 positive example (openwop-a2ui.md §4) on a fresh run;
  target p50 <= 20 µs;
- ``components-512``: one ``updateComponents`` of 512 components on a surface a previous
  ``createSurface`` made live (so the fold admits it); target p50 <= 300 µs;

and one without a target, for the cost of a long run's state:

- ``positive-on-3000-entry-run``: the positive example (a new correlationId and surfaceId) on a
  run that already recorded 3000 such envelopes (the state's maps are hash tries by then). The
  state is built once with our rules and shared by every contender: it does not depend on
  which rules admitted the log.

Each figure is the whole ``decide`` (shape, catalog, E2, floor, branch, cross-field, fold,
SR-1, trust, the recorded event and the next state). The BASELINE is the same ``decide`` with
its schema checks done by ``jsonschema.Draft202012Validator`` (formats checked, as ours does)
over the same ``schemas/`` documents. It is printed, never asserted: timing belongs to people,
not to the test suite.

The records it decides are built in ``bench_admission_inputs``.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from app.compiled_core import core_build
from app.core.admission.decision import Admitted, decide
from app.core.admission.policy import HostPolicy
from app.core.admission.refusal import Violation
from app.core.admission.rules import BRANCH, ENVELOPE_SHAPE, Rule, refuse
from app.core.runlog.run_state import RunState
from app.devtools.bench_admission_inputs import (
    LARGE_RUN,
    NOW,
    components_512,
    large_run_state,
    numbered_positive,
    positive_record,
)
from app.devtools.bench_output import baseline_missing, emit

__all__ = ["register", "add_parser", "run", "JsonschemaRules", "positive_record", "components_512"]


TARGETS_US = {"rfc0209-positive": 20.0, "components-512": 300.0}
FIGURES: dict[str, float | None] = {**TARGETS_US, f"positive-on-{LARGE_RUN}-entry-run": None}


# --- the baseline: the same checks with pure-Python jsonschema ----------------------------------


class JsonschemaRules:
    """``decide``'s schema checks done by ``jsonschema.Draft202012Validator`` over the same
    documents. Only the verdict matters to the baseline, so a failure is a generic refusal."""

    def __init__(self, documents: Mapping[str, Mapping[str, Any]]) -> None:
        import jsonschema
        from referencing import Registry, Resource

        envelope = documents["ai-envelope"]
        registry: Any = Registry().with_resource(
            envelope["$id"], Resource.from_contents(dict(envelope))
        )
        cls = jsonschema.Draft202012Validator
        fmt = cls.FORMAT_CHECKER
        self._record = cls(documents["admission-record"], registry=registry, format_checker=fmt)
        self._v1 = cls(documents["a2ui-surface-v1"], format_checker=fmt)
        self._v2 = cls(documents["a2ui-surface-v2-profile"], format_checker=fmt)

    @staticmethod
    def _verdict(ok: bool, rule: Rule, path: str) -> Violation | None:
        return None if ok else refuse(rule, path, "invalid")

    def check_record(self, record: Any) -> Violation | None:
        return self._verdict(self._record.is_valid(record), ENVELOPE_SHAPE, "")

    def check_v1(self, payload: Any) -> Violation | None:
        return self._verdict(self._v1.is_valid(payload), BRANCH, "/envelope/payload")

    def check_v2(self, payload: Any) -> Violation | None:
        return self._verdict(self._v2.is_valid(payload), BRANCH, "/envelope/payload")


class _NoSchemaChecks:
    """Rules that pass everything: isolates the cost of the rest of ``decide``."""

    def check_record(self, record: Any) -> Violation | None:
        return None

    def check_v1(self, payload: Any) -> Violation | None:
        return None

    def check_v2(self, payload: Any) -> Violation | None:
        return None


# --- measuring ---------------------------------------------------------------------------------


def _samples(fn: Callable[[], object], iterations: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    clock = time.perf_counter_ns
    out = []
    # As timeit does: collect first, then time with the cyclic GC off, so one contender's
    # garbage (the pure-Python baseline makes plenty) is not collected during another's round.
    # The worker itself runs with raised GC thresholds (app/shell/worker/validator_loop.py).
    gc.collect()
    gc.disable()
    try:
        for _ in range(iterations):
            start = clock()
            fn()
            out.append((clock() - start) / 1000.0)
    finally:
        gc.enable()
    return out


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _cases(rules: Any, large: RunState | None = None) -> dict[str, Callable[[], object]]:
    """The figures' decisions; the large-run figure only when its state is given (it takes a
    few hundred milliseconds to build, once)."""
    policy = HostPolicy()
    positive = positive_record()
    following = numbered_positive(LARGE_RUN)
    create, big = components_512()
    live = decide(create, None, policy, rules, now=NOW)
    if not isinstance(live, Admitted):
        raise RuntimeError(f"bench input refused: {live}")
    state: RunState = live.state
    checks = [
        ("rfc0209-positive", decide(positive, None, policy, rules, now=NOW)),
        ("components-512", decide(big, state, policy, rules, now=NOW)),
    ]
    if large is not None:
        checks.append(("large run", decide(following, large, policy, rules, now=NOW)))
    for name, outcome in checks:
        if not isinstance(outcome, Admitted):  # the bench measures admissions only
            raise RuntimeError(f"bench input {name} was not admitted: {outcome}")
    cases: dict[str, Callable[[], object]] = {
        "rfc0209-positive": lambda: decide(positive, None, policy, rules, now=NOW),
        "components-512": lambda: decide(big, state, policy, rules, now=NOW),
    }
    if large is not None:
        cases[f"positive-on-{LARGE_RUN}-entry-run"] = lambda: decide(
            following, large, policy, rules, now=NOW
        )
    return cases


_ROUNDS = 5


def _interleaved(
    fns: dict[str, Callable[[], object]], counts: dict[str, int]
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Samples of each function, taken in ``_ROUNDS`` interleaved rounds so that ours and the
    baseline see the same machine load; also the best per-round p50 of each."""
    samples: dict[str, list[float]] = {k: [] for k in fns}
    best: dict[str, float] = {}
    for k, fn in fns.items():  # warm up every contender once before timing any
        _samples(fn, max(3, counts[k] // 10), 0)
    for _ in range(_ROUNDS):
        for k, fn in fns.items():
            part = _samples(fn, max(1, counts[k] // _ROUNDS), 0)
            samples[k] += part
            best[k] = min(best.get(k, float("inf")), statistics.median(part))
    return samples, best


def measure(iterations: int) -> dict[str, Any]:
    from app.core.admission.payload_rules import PayloadRules
    from app.shell.schema_files import load_schema_documents

    documents = load_schema_documents()
    ours = PayloadRules.from_documents(documents)
    large = large_run_state(ours)
    contenders = {
        "ours": _cases(ours, large),
        "baseline": _cases(JsonschemaRules(documents), large),
        "core": _cases(_NoSchemaChecks(), large),
    }
    base_iterations = max(_ROUNDS * 4, iterations // 20)
    counts = {"ours": iterations, "baseline": base_iterations, "core": iterations}
    figures = []
    for name, target in FIGURES.items():
        samples, best = _interleaved({k: c[name] for k, c in contenders.items()}, counts)
        mine, base = samples["ours"], samples["baseline"]
        p50, base_p50 = statistics.median(mine), statistics.median(base)
        figures.append(
            {
                "name": name,
                "target_p50_us": target,
                "p50_us": round(p50, 2),
                "p99_us": round(_percentile(mine, 0.99), 2),
                "p50_best_round_us": round(best["ours"], 2),
                "iterations": len(mine),
                "baseline_p50_us": round(base_p50, 2),
                "baseline_p99_us": round(_percentile(base, 0.99), 2),
                "baseline_iterations": len(base),
                "ratio": round(base_p50 / p50, 1) if p50 else None,
                # the same decide with every schema check passing: the rest of the rules,
                # the recorded event and the next state (where the time goes)
                "without_schema_checks_p50_us": round(statistics.median(samples["core"]), 2),
                "meets_target": None if target is None else p50 <= target,
            }
        )
    return {
        "bench": "admission",
        "baseline": "jsonschema.Draft202012Validator (pure Python), same decide()",
        "python": platform.python_version(),
        # "compiled": app/core's hot path built with mypyc (make install); "source": pure Python
        "core": core_build(),
        "machine": platform.machine(),
        "rounds": _ROUNDS,
        # other processes share this machine: a high load average inflates every figure, and
        # p50_best_round_us is the quietest of the interleaved rounds
        "load_average_1m": round(os.getloadavg()[0], 2),
        "figures": figures,
    }


def _table(result: dict[str, Any]) -> str:
    head = (
        f"{'figure':<26} {'target p50':>10} {'p50':>9} {'p99':>9} {'baseline p50':>13} "
        f"{'baseline p99':>13} {'ratio':>7} {'no-schema p50':>14} {'best-round p50':>15}"
    )
    lines = [
        f"admission decide(), µs (Python {result['python']}, {result['machine']}, core "
        f"{result['core']}); "
        f"baseline = {result['baseline']}; load average {result['load_average_1m']}",
        head,
        "-" * len(head),
    ]
    for f in result["figures"]:
        mark = {True: "", False: "  (above target)", None: "  (no target)"}[f["meets_target"]]
        target = "-" if f["target_p50_us"] is None else f"{f['target_p50_us']:.0f}"
        lines.append(
            f"{f['name']:<26} {target:>10} {f['p50_us']:>9.1f} "
            f"{f['p99_us']:>9.1f} {f['baseline_p50_us']:>13.1f} {f['baseline_p99_us']:>13.1f} "
            f"{str(f['ratio']) + 'x':>7} {f['without_schema_checks_p50_us']:>14.1f} "
            f"{f['p50_best_round_us']:>15.1f}{mark}"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.iterations < 1:
        print("a2ui-stream bench admission: --iterations must be at least 1", file=sys.stderr)
        return 2
    if baseline_missing(
        "admission", ("jsonschema", "referencing"), "the pure-Python `jsonschema` package"
    ):
        return 2
    return emit(measure(args.iterations), args.json, _table)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``admission`` under the ``bench`` subcommand's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "admission",
        help="p50/p99 of the admission decision vs the pure-Python jsonschema baseline",
        description=(
            "How long one in-process admission decision takes (p50, p99, per envelope shape), "
            "against the pure-Python jsonschema baseline measured in the same run. No broker "
            "is needed."
        ),
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--iterations",
        type=int,
        default=2000,
        metavar="N",
        help="timed decisions per figure (default 2000; the baseline runs N/20, at least 20)",
    )
    parser.set_defaults(func=run)
    return parser


register = add_parser
