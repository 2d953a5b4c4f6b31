"""The scale bench's table for people: one row per figure, one column per design, beside issue
15's target.
"""

from __future__ import annotations

import statistics
from typing import Any

from app.devtools.bench_scale.designs import TARGETS

__all__ = ["table"]


def _mb(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f} MB"


def _s(values: list[float]) -> str:
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0]:.1f} s"
    return f"{statistics.median(values):.1f} s ({min(values):.1f}-{max(values):.1f})"


def _ms(figure: dict[str, Any] | None) -> str:
    if not figure:
        return "n/a"
    p50s, p99s = [r[0] for r in figure["rounds"]], [r[1] for r in figure["rounds"]]
    return (
        f"{figure['p50_ms']:.1f} / {figure['p99_ms']:.1f} ms (rounds {min(p50s):.1f}-"
        f"{max(p50s):.1f} / {min(p99s):.1f}-{max(p99s):.1f})"
    )


def _share(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.0f}%"


def _restart_cells(d: dict[str, Any]) -> list[tuple[str, str, str]]:
    kills = [r for r in d["restarts"] if r["signal"] == "SIGKILL"]
    terms = [r for r in d["restarts"] if r["signal"] == "SIGTERM"]
    rows = [
        (
            f"restart to ready, SIGKILL, median (min-max of {len(kills)})",
            _s([r["ready_s"] for r in kills]),
            f"<= {TARGETS['restart_ready_s_at_1m']} s (at 1M)",
        )
    ]
    rows += [
        (f"  {what}", _s([r[key] for r in kills]), "")
        for key, what in (
            ("web_s", "web server up"),
            ("reads_s", "reads served (a poll per partition)"),
            ("admission_s", "admitted (an envelope per partition: 201)"),
            ("validator_restored_s", "validator restored (gauge, every partition)"),
            ("quiet_s", "quiet (worker under 0.15 of a core)"),
        )
    ]
    rows += _waited_on(kills)
    rows.append(
        ("restart to ready, SIGTERM (stop, then start)", _s([r["ready_s"] for r in terms]), "")
    )
    killed = [r for r in terms if not r["exited_by_itself"]]
    rows.append(
        (
            "  of which stopping",
            _s([r["stopped_s"] for r in terms]) + (" (did not exit: SIGKILLed)" if killed else ""),
            "",
        )
    )
    if d["restarts"]:
        last = d["restarts"][-1]
        rows.append(
            (
                "  RSS before / peak during / after the last restart",
                f"{_mb(last['rss_mb_before'])} / {_mb(last['rss_mb_peak_during'])} / "
                f"{_mb(last['rss_mb_after'])}",
                "",
            )
        )
    return rows


def _worker_cells(d: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows = []
    for w in d["two_workers"]["workers"]:
        share = w["share_of_one"]
        rows += [
            (
                f"worker {w['worker']} of two: RSS (heap trimmed), data directory, partitions",
                f"{_mb(w['rss_mb'])} ({_mb(w.get('heap_trimmed_mb', 0.0))}), "
                f"{_mb(w['data_dir_mb'])}, {w['partitions']}",
                "",
            ),
            (
                "  read side runs in memory / validator run states / projector surfaces",
                f"{w['http_runs']:,} / {w['validator_run_states']:,} / {w['projector_surfaces']:,}",
                "",
            ),
            (
                "  the same as shares of one worker alone (RSS first)",
                f"{_share(share['rss_mb'])}; {_share(share['http_runs'])} / "
                f"{_share(share['validator_run_states'])} / "
                f"{_share(share['projector_surfaces'])}",
                f"each <= {100 * TARGETS['state_share_of_one']:.0f}%",
            ),
        ]
    return rows


def _read_cells(d: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows = []
    for kind, what in (("poll", "poll of the last event"), ("log", "event-log read")):
        figures = d["reads"].get(kind, {})
        rows += [
            (f"read p50 / p99, {what}, own partition", _ms(figures.get("own")), ""),
            (
                f"read p50 / p99, {what}, other's partition",
                _ms(figures.get("other")),
                f"other - own <= {TARGETS['forwarded_read_extra_p99_ms']} ms at p99",
            ),
        ]
    return rows


def _cells(d: dict[str, Any]) -> list[tuple[str, str, str]]:
    """One design's figures as (figure, value, target), in table order (the same labels for
    every design, so designs line up as columns)."""
    one, two = d["one_worker"], d["two_workers"]
    return [
        *_growth_cells(d),
        *_restart_cells(d),
        (
            "one worker: read side runs in memory / validator run states / projector surfaces",
            f"{one['http_runs']:,} / {one['validator_run_states']:,} / "
            f"{one['projector_surfaces']:,}",
            "",
        ),
        *_cpu_cells(one, two),
        ("second worker ready after it started", _s([two["join"]["ready_s"]]), ""),
        ("  partitions split and restored (gauge)", _s([two["join"]["validator_restored_s"]]), ""),
        ("  both quiet", _s([two["join"]["quiet_s"]]), ""),
        *_worker_cells(d),
        (
            "restart to ready, SIGKILL, one of two",
            _s([r["ready_s"] for r in two.get("restarts_one", [two["restart_one"]])]),
            "",
        ),
        *_waited_on(two.get("restarts_one", [two["restart_one"]])),
        *_read_cells(d),
    ]


def _waited_on(restarts: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """What the slowest of ``restarts`` waited on: the readiness probes' refusals seen last
    (seconds after the signal, first and last seen, and how often)."""
    if not restarts:
        return []
    slowest = max(restarts, key=lambda r: r["ready_s"])
    refusals = sorted(slowest.get("refusals", {}).items(), key=lambda kv: -kv[1][1])[:3]
    return [
        (
            f"  the slowest ({slowest['ready_s']:.1f} s) was refused: {text}",
            f"{first:.1f}-{last:.1f} s, {count:.0f}x",
            "",
        )
        for text, (first, last, count) in refusals
    ]


def _growth_cells(d: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The grow phase: how far it went, why it stopped, and RSS against envelopes."""
    slope, ratio = d["rss_kb_per_envelope"], d["rss_ratio_last_to_50k"]
    return [
        ("envelopes published", f"{d['envelopes_published']:,}", ""),
        ("stopped by", d["stopped"], ""),
        ("404s for decided runs (read-side bug)", f"{d['missing_reads']:,}", "0"),
        ("envelopes/s while growing", f"{d['envelopes_per_second']:,.0f}", ""),
        ("RSS per envelope (slope)", "n/a" if slope is None else f"{slope:,.1f} KB", "flat"),
        (
            "RSS at 1M envelopes",
            _mb(d["rss_mb_at_1m"])
            if d["rss_mb_at_1m"] is not None
            else _mb(d["rss_mb_at_1m_extrapolated"]) + " (extrapolated)",
            f"<= {TARGETS['rss_mb_at_1m']} MB",
        ),
        (
            "RSS at the last point / at 50k",
            "n/a" if ratio is None else f"{ratio:.2f}x",
            f"<= {TARGETS['rss_ratio_1m_to_50k']}x (at 1M)",
        ),
    ]


def _cpu_cells(one: dict[str, Any], two: dict[str, Any]) -> list[tuple[str, str, str]]:
    """CPU per envelope, one worker against two, and what the workers did in the window."""
    return [
        (
            f"CPU per envelope, one worker{_windows_of(one['cpu'])}",
            _us_windows(one["cpu"], "cpu_us_per_envelope"),
            "",
        ),
        (
            f"CPU per envelope, two workers together{_windows_of(two['cpu'])}",
            _us_windows(two["cpu"], "cpu_us_per_envelope"),
            "not above one worker's",
        ),
        ("  two / one, median windows", _ratio(one["cpu"], two["cpu"], ""), "<= 1.00"),
        (
            "  the same above the workers' idle CPU, one / two (idle cores: "
            f"{_window_cell(one, two, 'idle')})",
            f"{_us_windows(one['cpu'], 'cpu_us_per_envelope_above_idle')} / "
            f"{_us_windows(two['cpu'], 'cpu_us_per_envelope_above_idle')}",
            "",
        ),
        (
            "  two / one above idle, median windows",
            _ratio(one["cpu"], two["cpu"], "_above_idle"),
            "<= 1.00",
        ),
        *_paced_cells(one, two),
        ("  in that window, one / two workers: envelopes/s", _window_cell(one, two, "rate"), ""),
        ("  validator commits per 1k envelopes", _window_cell(one, two, "commits"), ""),
        ("  run states moved per envelope", _window_cell(one, two, "moves"), ""),
        ("  each worker's cores", _window_cell(one, two, "cores"), ""),
    ]


def _paced_cells(one: dict[str, Any], two: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The CPU windows offered at a fixed rate (``--cpu-rate``), when measured."""
    a, b = one.get("cpu_paced"), two.get("cpu_paced")
    if not a or not b:
        return []
    rate = f"{a['rate_offered']:,.0f}/s" if a.get("rate_offered") else "a fixed rate"
    return [
        (
            f"CPU per envelope at {rate} offered, one / two workers",
            f"{_us_windows(a, 'cpu_us_per_envelope')} / {_us_windows(b, 'cpu_us_per_envelope')}",
            "",
        ),
        ("  two / one at that rate, median windows", _ratio(a, b, ""), "<= 1.00"),
        (
            "  the same above idle, two / one",
            _ratio(a, b, "_above_idle"),
            "",
        ),
    ]


def _windows_of(window: dict[str, Any]) -> str:
    count = window.get("windows", 1)
    return "" if count == 1 else f", median (min-max of {count} windows)"


def _us_windows(window: dict[str, Any], key: str) -> str:
    """The median window's figure, with the range over the windows when there are several."""
    values = window.get(f"windows_{key}", [window.get(key, 0.0)])
    median = f"{window.get(key, 0.0):,.0f} µs"
    return median if len(values) == 1 else f"{median} ({min(values):,.0f}-{max(values):,.0f})"


def _ratio(one: dict[str, Any], two: dict[str, Any], suffix: str) -> str:
    """Two workers' CPU per envelope over one's: the median windows, and the range of every
    pair of windows (how far the noise alone moves it)."""
    key = "cpu_us_per_envelope" + suffix
    if not one.get(key):
        return "n/a"
    figure = f"{two.get(key, 0.0) / one[key]:.2f}"
    ones = [v for v in one.get(f"windows_{key}", []) if v]
    twos = two.get(f"windows_{key}", [])
    if len(ones) > 1 and len(twos) > 1:
        pairs = [b / a for a in ones for b in twos]
        figure += f" (pairs {min(pairs):.2f}-{max(pairs):.2f})"
    return figure


def _window_cell(one: dict[str, Any], two: dict[str, Any], what: str) -> str:
    """One figure of the two CPU windows (``cpu_window``), one worker / two workers."""

    def fig(window: dict[str, Any]) -> str:
        if what == "rate":
            return f"{window.get('envelopes_per_second', 0):,.0f}"
        if what == "commits":
            return f"{window.get('validator_commits_per_1k_envelopes', 0):,.1f}"
        if what == "above idle":
            return f"{window.get('cpu_us_per_envelope_above_idle', 0):,.0f} µs"
        if what == "idle":
            return " + ".join(f"{w.get('idle_cores', 0):.3f}" for w in window.get("workers", []))
        if what == "moves":
            return f"{window.get('run_state_moves_per_envelope', 0):.2f}"
        return " + ".join(f"{w['cores']:.2f}" for w in window.get("workers", []))

    return f"{fig(one['cpu'])} / {fig(two['cpu'])}"


def _curve_cells(d: dict[str, Any], mark: int) -> str:
    p = next((x for x in d["curve"] if x["envelopes"] == mark), None)
    if p is None:
        return "-"
    return (
        f"{_mb(p['rss_mb'])} (disk {_mb(p['data_dir_mb'])}), {p['http_runs']:,} runs in memory, "
        f"{p['cpu_us_per_envelope']:,.0f} µs/envelope"
    )


def table(r: dict[str, Any]) -> str:
    designs = r["designs"]
    names = list(designs)
    requested = f"{r['envelopes_requested']:,}" + (
        " (the default)" if r["envelopes_default"] else ""
    )
    mix = r["mix"]
    head = [
        f"bench scale ({r['code']}): --envelopes {requested}, at most {r['minutes']:g} min "
        "of publishing, "
        f"worker RSS budget {r['max_rss_mb']:,} MB; {r['partitions']} partitions, "
        f"{r['broker']}, {r['machine']}, load {r['load_average_1m_before']:.1f} -> "
        f"{r['load_average_1m_after']:.1f} (a shared machine: timings are noisy)",
        f"mix: {mix['active_runs']} runs open at a time, {mix['envelopes_per_run'][0]}-"
        f"{mix['envelopes_per_run'][1]} envelopes each on {mix['surfaces_per_run'][0]}-"
        f"{mix['surfaces_per_run'][1]} surfaces, {100 * mix['cancelled']:.0f}% cancelled, "
        f"{100 * mix['deleted']:.0f}% deleted, {100 * mix['refused']:.0f}% of envelopes "
        f"refused, {100 * mix['duplicated']:.0f}% re-sent; admission records of "
        f"{r['record_bytes_mean']:,.0f} B on average",
        *(f"column {n}: {r['columns'][n]}" for n in names),
    ]
    marks = sorted({p["envelopes"] for d in designs.values() for p in d["curve"]})
    rows: list[tuple[str, dict[str, str], str]] = [
        ("worker RSS against envelopes recorded, one worker", {}, ""),
        *((f"  {m:,}", {n: _curve_cells(designs[n], m) for n in names}, "") for m in marks),
    ]
    per_design = {n: _cells(designs[n]) for n in names}
    for i, (label, _, target) in enumerate(per_design[names[0]]):
        rows.append((label, {n: per_design[n][i][1] for n in names}, target))
    width = max(len(label) for label, _, _ in rows)
    cols = {n: max([len(n)] + [len(cells.get(n, "")) for _, cells, _ in rows]) for n in names}

    def line(label: str, cells: dict[str, str], target: str) -> str:
        body = "  ".join(f"{cells.get(n, ''):<{cols[n]}}" for n in names)
        return f"  {label:<{width}}  {body}  {target}".rstrip()

    return "\n".join(
        [*head, line("", {n: n for n in names}, "target (issue 15)")] + [line(*row) for row in rows]
    )
