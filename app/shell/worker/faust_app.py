"""The Faust application: configuration, the declared topics and the worker's web views.

Shell module, the worker process's composition root. Faust adds nothing to the wire: every
topic uses raw bytes for keys and values (STYLE rule 6); the records' shapes are defined by
``schemas/`` and the topics by ``topics/``. Agents are registered by their own modules
(``register(app, topics)``) and talk only through topics.

``create_app`` builds the Faust app and its web server (``app.shell.worker.faust_web``: our
routes only, none of Faust's pages, every request through ``app.shell.http.guard.request_guard``
first), the validator and projector loops as its services (``app.shell.worker.faust_loops``),
the read side of the owned partitions and the HTTP API over it. It is the one worker module
that imports ``app.shell.http`` (tests/shell/test_layers.py).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import faust
import mode

from app import __version__
from app.core.admission.host_commands_run import FIXTURES
from app.core.admission.payload_rules import PayloadRules
from app.core.admission.policy import HostPolicy
from app.core.http.discovery import DiscoveryConfig, serves_envelope_accept
from app.core.http.routes import ROUTES, served
from app.core.runlog.topic_plan import TopicSpec
from app.shell import log_safety
from app.shell.gateway_key import gateway_key
from app.shell.http.api import HttpApi
from app.shell.http.forward import Forwarder
from app.shell.http.gateway import AdmissionGateway
from app.shell.http.guard import request_guard
from app.shell.http.principals_file import principals_for
from app.shell.http.streams import DeltaMemo, RunStreams
from app.shell.http.viewer import register as register_viewer
from app.shell.schema_files import load_schema_documents
from app.shell.settings import Settings, advertised_url_of, check_exposure, load_secrets
from app.shell.worker.assignor import WarmAssignor
from app.shell.worker.faust_loops import build_loops, host_loops
from app.shell.worker.faust_web import worker_app
from app.shell.worker.heap_trim import HeapTrimmer, glibc
from app.shell.worker.metrics import Metrics
from app.shell.worker.ownership import Ownership
from app.shell.worker.projector_loop import ProjectorLoop
from app.shell.worker.run_index import RunIndex
from app.shell.worker.topics_admin import desired_for
from app.shell.worker.validator_loop import ValidatorLoop

__all__ = ["StreamTopics", "create_app", "policy_from"]


def policy_from(settings: Settings) -> HostPolicy:
    """The host policy the settings describe (floor and strictness are configuration; host
    commands are verified with the deployment's gateway key, app.shell.gateway_key)."""
    return HostPolicy(
        secrets=load_secrets(settings.secrets_file),
        schema_versions={"ui.a2ui-surface": settings.floor},
        strictness=settings.strictness,  # type: ignore[arg-type]
        limits=settings.limits,
        command_key=gateway_key(settings),
    )


@dataclass(frozen=True)
class StreamTopics:
    """The Faust topic objects of this deployment, by topic id (topics/topics.json)."""

    specs: dict[str, TopicSpec]
    topics: dict[str, Any]

    def __getitem__(self, topic_id: str) -> Any:
        return self.topics[topic_id]


def create_app(settings: Settings, bootstrap: str) -> tuple[faust.App, StreamTopics]:
    """Build the Faust app for ``bootstrap`` with every topic declared as raw bytes. Raises
    ``OperatorError`` for settings that would expose the API (``check_exposure``)."""
    check_exposure(settings)
    discovery = _discovery(settings)
    # the routes served at this configuration (app.core.http.routes): the guard, the dispatcher
    # and the OpenAPI document read the same table
    routes = served(ROUTES, seams=settings.seams, envelope_accept=serves_envelope_accept(discovery))
    _quiet_payload_loggers()
    log_safety.install()  # a producer's bytes in a log argument cannot start a line of its own
    guard = request_guard(
        loopback_only=not settings.http_auth,
        max_record_bytes=settings.max_record_bytes,
        routes=routes,
    )
    app = worker_app(settings, bootstrap, guard)
    stream_topics = _declared_topics(app, settings)
    specs = stream_topics.specs
    metrics = Metrics()
    rules = PayloadRules.from_documents(load_schema_documents())
    policy = policy_from(settings)
    validator, projector = build_loops(settings, bootstrap, specs, policy, rules, metrics)
    host_loops(app, settings.roles, validator, projector, metrics)
    ownership, index, forwarder, gateway = _read_side(
        settings, bootstrap, specs, policy, validator, projector
    )
    streams = RunStreams(index, DeltaMemo(rules), settings.sse_keepalive_seconds)
    # who may do what in which tenant (issue 18): the tokens file is read once, here
    principals = principals_for(settings)
    api = HttpApi(
        index=index,
        ownership=ownership,
        forwarder=forwarder,
        gateway=gateway,
        streams=streams,
        discovery=discovery,
        principals=principals,
        delta_transport=settings.delta_transport,
        wait_seconds=settings.http_wait_seconds,
        max_record_bytes=settings.max_record_bytes,
        read_timeout=settings.http_read_timeout_seconds,
        routes=routes,
    )
    app.service(_http_service(index, gateway, ownership, forwarder, streams))
    # what a catch-up freed goes back to the system (heap_trim: glibc keeps it otherwise)
    trimmer = HeapTrimmer(settings.heap_trim_mb * 1024 * 1024, glibc())
    app.service(_heap_service(trimmer))
    metrics.extra.append(trimmer.render_metrics)
    metrics.extra.append(lambda: _http_metrics(index, streams, ownership, forwarder))
    # every route through the one dispatcher; the viewer at /ui/ (docs/viewer.md)
    viewer = register_viewer(index, settings, ownership, forwarder, principals)
    api.register(app, {**viewer, **_pages(app, settings, specs, metrics)})
    return app, stream_topics


def _discovery(settings: Settings) -> DiscoveryConfig:
    """What discovery advertises at these settings (app.core.http.discovery)."""
    return DiscoveryConfig(
        floor=settings.floor,
        strictness=settings.strictness,
        seams=settings.seams,
        delta_transport=settings.delta_transport,
        # §12/§16a: the fixtures are served and advertised only where the seams are.
        fixtures=FIXTURES if settings.seams else (),
        version=__version__,
    )


def _pages(
    app: faust.App, settings: Settings, specs: dict[str, TopicSpec], metrics: Metrics
) -> dict[str, Any]:
    """The handlers of the health and metrics routes (app.core.http.routes names them)."""
    web = app.web

    async def health(request: Any) -> Any:
        return web.json(
            {
                "status": "ok",
                "version": __version__,
                "appId": settings.app_id,
                "roles": sorted(settings.roles),
                "topics": {topic_id: spec.name for topic_id, spec in specs.items()},
            }
        )

    async def metrics_page(request: Any) -> Any:
        return web.text(metrics.render(), content_type="text/plain; version=0.0.4")

    return {"health": health, "metrics": metrics_page}


def _declared_topics(app: faust.App, settings: Settings) -> StreamTopics:
    """Every topic of topics/topics.json declared on ``app`` (raw bytes both ways)."""
    specs = {spec.id: spec for spec in desired_for(settings)}
    topics = {
        topic_id: app.topic(
            spec.name,
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=spec.partitions,
            internal=False,
        )
        for topic_id, spec in specs.items()
    }
    return StreamTopics(specs, topics)


def _read_side(
    settings: Settings,
    bootstrap: str,
    specs: dict[str, TopicSpec],
    policy: HostPolicy,
    validator: ValidatorLoop,
    projector: ProjectorLoop,
) -> tuple[Ownership, RunIndex, Forwarder, AdmissionGateway]:
    """The read side of the owned partitions and what routes requests to owners: the
    ownership map, the run index, the forwarder and the admission gateway."""
    # The read side serves the partitions this worker's validator owns (issue 15 item 2): the
    # validator tells `ownership` its assignment, which tells the index and the other workers.
    ownership = Ownership(
        bootstrap, specs["owners"].name, settings.worker_id, advertised_url_of(settings)
    )
    validator.ownership = ownership
    index = RunIndex(
        bootstrap,
        specs["log"].name,
        specs["deadletter"].name,
        settings.data_dir / "run-store" / specs["log"].name / settings.worker_id,
        cache_bytes=settings.run_cache_mb * 1024 * 1024,
        feed=projector.feed,  # the one log consumer of the process feeds the projector
    )
    projector.store = index.opened_store  # a rebuild reads a run's events there first
    # Both groups assign alike, each worker its warm partitions (app.shell.worker.assignor).
    validator.assignor = WarmAssignor(settings.worker_id, index.warm_partitions)
    projector.assignor = WarmAssignor(settings.worker_id, index.warm_partitions)
    ownership.on_assigned.append(index.assigned)
    ownership.on_revoked.append(index.revoked)
    forwarder = Forwarder(
        settings.worker_id,
        # the longest answer a run route waits for: a 60 s poll after the owner's own wait
        read_seconds=60 + settings.http_wait_seconds + 5,
    )
    gateway = AdmissionGateway(
        bootstrap,
        specs["admission"].name,
        specs["admission"].partitions,
        index,
        command_key=policy.command_key,
        validator_group=f"{settings.app_id}-validator",
    )
    return ownership, index, forwarder, gateway


def _http_metrics(
    index: RunIndex, streams: RunStreams, ownership: Ownership, forwarder: Forwarder
) -> list[str]:
    return [
        "# HELP a2ui_http_sse_streams Open SSE run streams on this worker.",
        "# TYPE a2ui_http_sse_streams gauge",
        f"a2ui_http_sse_streams {streams.open_streams}",
        "# HELP a2ui_http_runs Runs held in memory by the read side (cached or being read).",
        "# TYPE a2ui_http_runs gauge",
        f"a2ui_http_runs {index.in_memory()}",
        "# HELP a2ui_http_run_cache_bytes Bytes of the read side's run cache (estimated).",
        "# TYPE a2ui_http_run_cache_bytes gauge",
        f"a2ui_http_run_cache_bytes {index.cached_bytes}",
        "# HELP a2ui_http_owned_partitions Partitions this worker serves, and of them ready.",
        "# TYPE a2ui_http_owned_partitions gauge",
        f'a2ui_http_owned_partitions{{state="owned"}} {len(ownership.owned)}',
        f'a2ui_http_owned_partitions{{state="ready"}} {len(index.ready_partitions)}',
        "# HELP a2ui_http_records_read_total Log records the read side tailed into its store.",
        "# TYPE a2ui_http_records_read_total counter",
        f"a2ui_http_records_read_total {index.records_read}",
        "# HELP a2ui_http_forwarded_total Run requests forwarded to their owner (and failed).",
        "# TYPE a2ui_http_forwarded_total counter",
        f'a2ui_http_forwarded_total{{result="sent"}} {forwarder.forwarded}',
        f'a2ui_http_forwarded_total{{result="failed"}} {forwarder.failed}',
    ]


def _http_service(
    index: RunIndex,
    gateway: AdmissionGateway,
    ownership: Ownership,
    forwarder: Forwarder,
    streams: RunStreams,
) -> type[mode.Service]:
    class HttpService(mode.Service):
        """The read side of the owned partitions (the run index and the owners map) and the
        admission producer of the OpenWOP HTTP API."""

        async def on_start(self) -> None:
            self._stopping = asyncio.Event()
            await index.start()
            await ownership.start()
            await gateway.start()

        @mode.Service.task
        async def _tail(self) -> None:
            await index.run(self._stopping)

        @mode.Service.task
        async def _owners(self) -> None:
            await ownership.run(self._stopping)

        async def on_stop(self) -> None:
            self._stopping.set()
            await ownership.stop()
            await forwarder.stop()
            await gateway.stop()
            await streams.keepalive.close()
            await index.stop()

    return HttpService


def _heap_service(trimmer: HeapTrimmer) -> type[mode.Service]:
    class HeapService(mode.Service):
        """Gives the heap a catch-up freed back to the system (``heap_trim``)."""

        async def on_start(self) -> None:
            self._stopping = asyncio.Event()

        @mode.Service.task
        async def _trim(self) -> None:
            await trimmer.run(self._stopping)

        async def on_stop(self) -> None:
            self._stopping.set()

    return HeapService


# Loggers that write record keys and VALUES at DEBUG (aiokafka's producer logs "Sending
# (key=..., value=...)"): a payload may hold a registered secret or a user's input, and SR-1
# says redacted material never reaches logs (§14). They stay at INFO whatever
# A2UI_STREAM_LOG_LEVEL says; tests/integration/test_security_invariants.py runs at debug.
PAYLOAD_LOGGERS = ("aiokafka", "kafka", "faust.transport", "faust.topics")


def _quiet_payload_loggers() -> None:
    import logging

    for name in PAYLOAD_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(max(logger.getEffectiveLevel(), logging.INFO))
