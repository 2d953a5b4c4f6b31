"""The projector's configuration: its topics, its group, the log's partitions, its cache bound.

Shell module, a value: ``app.shell.worker.faust_app`` builds it from the settings
(``app.shell.settings``), ``app.shell.worker.projector_loop`` and its helpers read it. It
imports nothing of the app.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_CACHE_SURFACES", "ProjectorConfig"]

DEFAULT_CACHE_SURFACES = 2_000


@dataclass(frozen=True)
class ProjectorConfig:
    bootstrap: str
    log_topic: str
    subscriptions_topic: str
    resync_topic: str
    topic_prefix: str
    replication: int
    group_id: str
    partitions: int  # of the log (co-partitioned with admission: partition_for_run)
    fast_groups: bool = False
    cache_surfaces: int = DEFAULT_CACHE_SURFACES
