"""The worker's two loops: the validator and the projector, configured from the settings and
hosted as mode services, and how much state they hold.

Shell module, used by ``app.shell.worker.faust_app.create_app``: ``build_loops`` builds both
loops (whatever the roles: the state metrics read both), ``host_loops`` makes each a service of
the Faust app when its role is on (``validator_service``, ``projector_service``: each runs for
the life of the worker) and adds their metrics, and ``state_metrics`` is what
``a2ui-stream bench scale`` reads of them. It imports ``app.core``,
the shared shell modules and ``app.shell.worker``.
"""

from __future__ import annotations

import asyncio

import faust
import mode

from app.core.admission.payload_rules import PayloadRules
from app.core.admission.policy import HostPolicy
from app.core.runlog.topic_plan import TopicSpec
from app.shell.settings import Settings
from app.shell.worker.metrics import Metrics
from app.shell.worker.projector_config import ProjectorConfig
from app.shell.worker.projector_loop import ProjectorLoop
from app.shell.worker.validator_config import ValidatorConfig
from app.shell.worker.validator_loop import ValidatorLoop

__all__ = [
    "build_loops",
    "host_loops",
    "projector_service",
    "state_metrics",
    "validator_service",
]


def build_loops(
    settings: Settings,
    bootstrap: str,
    specs: dict[str, TopicSpec],
    policy: HostPolicy,
    rules: PayloadRules,
    metrics: Metrics,
) -> tuple[ValidatorLoop, ProjectorLoop]:
    """The validator and projector loops, configured (built whatever the roles: the state
    metrics read both)."""
    validator = ValidatorLoop(
        ValidatorConfig(
            bootstrap=bootstrap,
            admission_topic=specs["admission"].name,
            log_topic=specs["log"].name,
            deadletter_topic=specs["deadletter"].name,
            partitions=specs["admission"].partitions,
            resumes_topic=specs["resumes"].name,
            changelog_topic=specs["runstate"].name,
            group_id=f"{settings.app_id}-validator",
            transactional_id=f"{settings.app_id}-validator-{settings.worker_id}",
            transactions=settings.transactions,
            max_record_bytes=settings.max_record_bytes,
            fast_groups=settings.fast_groups,
            cache_runs=settings.validator_cache_runs,
            batch_ms=settings.batch_ms,
            changelog_interval=settings.commit_interval_ms / 1000,
            state_dir=str(settings.data_dir / "validator-state" / settings.worker_id),
        ),
        policy,
        rules,
        metrics,
    )
    metrics.lag = validator.lag
    projector = ProjectorLoop(
        ProjectorConfig(
            bootstrap=bootstrap,
            log_topic=specs["log"].name,
            subscriptions_topic=specs["subscriptions"].name,
            resync_topic=specs["resync"].name,
            topic_prefix=settings.topic_prefix,
            replication=settings.replication,
            group_id=f"{settings.app_id}-projector",
            partitions=specs["log"].partitions,
            fast_groups=settings.fast_groups,
            cache_surfaces=settings.projector_cache_surfaces,
        ),
        policy,
    )
    return validator, projector


def host_loops(
    app: faust.App,
    roles: frozenset[str],
    validator: ValidatorLoop,
    projector: ProjectorLoop,
    metrics: Metrics,
) -> None:
    """Each loop whose role is on as a service of ``app``, and the metrics of both."""
    if "validator" in roles:
        app.service(validator_service(validator))
    if "projector" in roles:
        metrics.extra.append(projector.render_metrics)
        app.service(projector_service(projector))
    metrics.extra.append(lambda: state_metrics(validator, projector, roles))


def validator_service(validator: ValidatorLoop) -> type[mode.Service]:
    class ValidatorService(mode.Service):
        """Runs the validator loop for the life of the worker."""

        async def on_start(self) -> None:
            self._stopping = asyncio.Event()
            await validator.start()

        @mode.Service.task
        async def _validate(self) -> None:
            await validator.run(self._stopping)

        async def on_stop(self) -> None:
            self._stopping.set()
            await validator.stop()

    return ValidatorService


def projector_service(projector: ProjectorLoop) -> type[mode.Service]:
    class ProjectorService(mode.Service):
        """Runs the projector loop for the life of the worker."""

        async def on_start(self) -> None:
            self._stopping = asyncio.Event()
            await projector.start()

        @mode.Service.task
        async def _project(self) -> None:
            await projector.run(self._stopping)

        async def on_stop(self) -> None:
            self._stopping.set()
            await projector.stop()

    return ProjectorService


def state_metrics(
    validator: ValidatorLoop, projector: ProjectorLoop, roles: frozenset[str]
) -> list[str]:
    """How much state this worker holds (issue 15; read by ``a2ui-stream bench scale``): the
    validator's run states per admission partition it owns (those restored), and every surface
    the projector holds. Each is a ``len`` (O(1)): cheap on every scrape."""
    lines: list[str] = []
    if "validator" in roles:
        lines += [
            "# HELP a2ui_validator_run_states Run states held by this worker's validator, per "
            "admission partition it owns (restored): in memory and in its local store.",
            "# TYPE a2ui_validator_run_states gauge",
        ]
        lines += [
            f'a2ui_validator_run_states{{partition="{p}"}} {state.held}'
            for p, state in sorted(validator.partitions.items())
        ]
    if "projector" in roles:
        lines += [
            "# HELP a2ui_projector_surfaces Materialized surfaces held by this worker's "
            "projector (its cache, of the partitions it owns).",
            "# TYPE a2ui_projector_surfaces gauge",
            f"a2ui_projector_surfaces {projector.held}",
        ]
    return lines
