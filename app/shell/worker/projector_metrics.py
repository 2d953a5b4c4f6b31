"""What the projector reports: its frames, fallbacks, resyncs and cache, as ``/metrics`` lines.

Shell module, read by ``app.shell.worker.projector_loop`` (``ProjectorLoop.render_metrics``,
which the worker's ``/metrics`` serves: ``app.shell.worker.metrics``). It reads the loop's
counters and cache, never a payload value or a runId. It imports nothing of the app; the
loop's type only for annotations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.shell.worker.projector_loop import ProjectorLoop

__all__ = ["render_metrics"]


def render_metrics(loop: ProjectorLoop) -> list[str]:
    """The projector's metrics, in the Prometheus text format."""
    lines = [
        "# HELP a2ui_frames_sent_total Frames written to subscriber topics, by kind.",
        "# TYPE a2ui_frames_sent_total counter",
    ]
    lines += [f'a2ui_frames_sent_total{{kind="{k}"}} {n}' for k, n in sorted(loop.sent.items())]
    lines += [
        "# HELP a2ui_delta_fallbacks_total Full frames sent to delta subscribers, by reason.",
        "# TYPE a2ui_delta_fallbacks_total counter",
    ]
    lines += [
        f'a2ui_delta_fallbacks_total{{reason="{r}"}} {n}' for r, n in sorted(loop.fallbacks.items())
    ]
    lines += [
        "# HELP a2ui_resyncs_answered_total Resync requests answered with one full frame.",
        "# TYPE a2ui_resyncs_answered_total counter",
        f"a2ui_resyncs_answered_total {loop.resyncs_answered}",
        "# HELP a2ui_digest_checks_total Delta frames sent with a digest check (fullEvery).",
        "# TYPE a2ui_digest_checks_total counter",
        f"a2ui_digest_checks_total {loop.digest_checks}",
        "# HELP a2ui_drift_resyncs_total Resyncs answered after a failed digest check.",
        "# TYPE a2ui_drift_resyncs_total counter",
        f"a2ui_drift_resyncs_total {loop.drift_resyncs}",
        "# HELP a2ui_projector_runs Runs whose surfaces the projector holds (its cache).",
        "# TYPE a2ui_projector_runs gauge",
        f"a2ui_projector_runs {len(loop.runs)}",
        "# HELP a2ui_projector_evictions_total Idle runs evicted from the projector's cache.",
        "# TYPE a2ui_projector_evictions_total counter",
        f"a2ui_projector_evictions_total {loop.evicted}",
        "# HELP a2ui_projector_rebuilds_total Runs rebuilt from their recorded events, by "
        "where they were read.",
        "# TYPE a2ui_projector_rebuilds_total counter",
        *(
            f'a2ui_projector_rebuilds_total{{source="{s}"}} {loop.rebuilt[s]}'
            for s in ("store", "log")
        ),
        "# HELP a2ui_projector_fed_records_total Log records the read side's tail handed the "
        "projector (app.shell.worker.log_feed).",
        "# TYPE a2ui_projector_fed_records_total counter",
        f"a2ui_projector_fed_records_total {loop.feed.handed}",
        "# HELP a2ui_projector_feed_drops_total Times the tail dropped what was queued for a "
        "stuck projector (it reads those partitions again).",
        "# TYPE a2ui_projector_feed_drops_total counter",
        f"a2ui_projector_feed_drops_total {loop.feed.drops}",
        "# HELP a2ui_frames_failed_total Frames the broker would not take, by error.",
        "# TYPE a2ui_frames_failed_total counter",
    ]
    lines += [
        f'a2ui_frames_failed_total{{error="{e}"}} {n}' for e, n in sorted(loop.failed.items())
    ]
    return lines
