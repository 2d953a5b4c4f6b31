"""The worker's Faust app and web server: Faust as the service host, aiohttp without Faust's pages.

Shell module, built by ``app.shell.worker.faust_app.create_app`` (which gives it the routes'
guard, ``app.shell.http.guard.request_guard``, as ``guard``). The web server (issue 14) listens
on A2UI_STREAM_WEB_HOST only (Faust's ``web_bind``, which otherwise defaults to every
interface), serves none of Faust's built-in pages (``/``, ``/router``, ``/table``, ``/stats``,
``/assignment``, ``/graph``, ``/performance``: they answer without a token, disclose the worker
URLs and the assignment, and ``/router/x/`` raised), reads bodies up to
A2UI_STREAM_MAX_RECORD_BYTES plus the record's wrapper (``BODY_ROOM``) and closes a connection
whose request head is not in within A2UI_STREAM_HTTP_READ_TIMEOUT_SECONDS. It imports the
shared shell modules.
"""

from __future__ import annotations

from typing import Any

import faust
from aiohttp.web import AppRunner
from faust.web.drivers.aiohttp import Web as AiohttpWeb

from app.shell.settings import Settings

__all__ = ["BODY_ROOM", "SHUTDOWN_GRACE_SECONDS", "WorkerApp", "WorkerWeb", "worker_app"]

# What the web server reads beyond A2UI_STREAM_MAX_RECORD_BYTES: room for the record around a
# body (``{"runId": ..., "envelope": ...}``, a runId of up to 256 characters escaped), so a body
# just over the limit is refused by intake with its exact size (app.core.http.admission).
BODY_ROOM = 64 * 1024

# How long the web server waits for a running request when the worker stops (WorkerWeb).
SHUTDOWN_GRACE_SECONDS = 2.0


class WorkerWeb(AiohttpWeb):
    """Faust's aiohttp web server without Faust's built-in pages, and with a deadline on the
    request head. Faust chooses its blueprints from these class attributes (faust.web.base)."""

    default_blueprints = ()  # /router, /table
    production_blueprints = ()  # the "/" index
    debug_blueprints = ()  # /graph, /stats, /assignment
    optional_blueprints = ()  # /performance

    def __init__(self, app: faust.App, *, read_timeout: float, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        # aiohttp has no header timeout of its own, but its keep-alive timer starts when a
        # connection opens and again after each response, and closes the connection if no
        # complete request head has arrived by then (aiohttp.web_protocol.RequestHandler). Set
        # short, it is the header timeout; it also ends idle keep-alive connections. A handler
        # that is running (an SSE stream) is never cut by it.
        # shutdown_timeout: on stop, a request still running (an SSE stream, a long poll) gets
        # this long to end, and then as long again once cancelled; aiohttp's 60 s default held
        # a Ctrl-C for two minutes while a viewer was open (issue 19 item 7). Clients reconnect.
        self._runner = AppRunner(
            self.web_app,
            access_log=None,
            keepalive_timeout=read_timeout,
            shutdown_timeout=SHUTDOWN_GRACE_SECONDS,
        )


class WorkerApp(faust.App):
    """The Faust app with the worker's web server (``WorkerWeb``)."""

    def __init__(self, *args: Any, read_timeout: float, **kwargs: Any) -> None:
        self.read_timeout = read_timeout
        super().__init__(*args, **kwargs)

    def _new_web(self) -> WorkerWeb:
        return WorkerWeb(self, read_timeout=self.read_timeout)


def _broker_url(bootstrap: str) -> str:
    servers = [server.strip() for server in bootstrap.split(",") if server.strip()]
    return ";".join(f"kafka://{server}" for server in servers)


def worker_app(settings: Settings, bootstrap: str, guard: Any) -> WorkerApp:
    """The Faust app: the service host and its web server (the routes' ``guard`` middleware in
    front), with Faust's own pages, topic declaration and agents off."""
    group_timeouts: dict[str, Any] = (
        # Joins in ~5 s instead of ~30 s (../shared/spec/kafka.md); laptops and tests only.
        {
            "broker_session_timeout": 10,
            "broker_heartbeat_interval": 1,
            "broker_rebalance_timeout": 10,
        }
        if settings.fast_groups
        else {}
    )
    return WorkerApp(
        settings.app_id,
        read_timeout=settings.http_read_timeout_seconds,
        broker=_broker_url(bootstrap),
        web_host=settings.web_host,
        web_bind=settings.web_host,  # Faust's default binds every interface
        web_port=settings.web_port,
        web_application_options={
            "client_max_size": settings.max_record_bytes + BODY_ROOM,
            "middlewares": [guard],
        },
        # Faust's built-in pages, off by their own settings too (WorkerWeb serves none).
        web_router_enabled=False,
        web_tables_enabled=False,
        web_stats_enabled=False,
        web_graph_enabled=False,
        web_metrics_enabled=False,
        datadir=str(settings.data_dir),
        topic_replication_factor=settings.replication,
        topic_partitions=settings.partitions,
        topic_allow_declare=False,  # topics are owned by `a2ui-stream topics apply`
        producer_acks=-1,
        web_enabled=True,
        autodiscover=False,
        **group_timeouts,
    )
