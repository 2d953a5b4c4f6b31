"""The consumer-group assignor of the validator and the projector: ``app.core.runlog.assignment``.

Shell module: the aiokafka side of the pure decision. With its JoinGroup each member says
which worker it is and which partitions its read side's store holds warm
(``RunIndex.warm_partitions``); the group's leader, whichever member that is, assigns with
``app.core.runlog.assignment.assign``: balanced, each worker its warm partitions where it can, the
same answer in both groups.

It is the only protocol a member offers. aiokafka 0.14 sends one JoinGroup per configured
assignor, the first offering only the first protocol, the next the first two, and so on
(aio-libs/aiokafka#1168, open): with round-robin offered second as a fallback, every join of a
member rebalanced the group again, and two workers under load never settled (CI, stop 22: the
second worker's validator had no assignment after 90 s). So a deployment moves to this
assignor all at once: a member of an older version (round-robin only) in the same group makes
the broker refuse the join (``InconsistentGroupProtocolError``); stop every worker, then start
the new ones (docs/http.md, "Ownership").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from app.core.runlog.assignment import assign, decode_member, encode_member

__all__ = ["WarmAssignor", "strategies"]

log = logging.getLogger("a2ui_stream.worker")


class WarmAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
    """``app.core.runlog.assignment`` as an aiokafka assignor (an instance: it knows its worker)."""

    name = "a2ui-warm"
    version = 0

    def __init__(self, worker: str, warm: Callable[[], Iterable[int]]) -> None:
        self.worker = worker
        self.warm = warm

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        try:
            warm = list(self.warm())
        except Exception as exc:  # the store cannot say: nothing warm, still a member
            log.warning("assignor: warm partitions unknown (%s)", type(exc).__name__)
            warm = []
        return ConsumerProtocolMemberMetadata(
            self.version, sorted(topics), encode_member(self.worker, warm)
        )

    def assign(
        self,
        cluster: ClusterMetadata,
        members: Mapping[str, ConsumerProtocolMemberMetadata],
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        said = {m: decode_member(m, md.user_data) for m, md in members.items()}
        given: dict[str, dict[str, list[int]]] = {m: {} for m in members}
        topics = sorted({t for md in members.values() for t in md.subscription})
        for topic in topics:
            partitions = sorted(cluster.partitions_for_topic(topic) or ())
            subscribed = {m: said[m] for m, md in members.items() if topic in md.subscription}
            for member, mine in assign(partitions, subscribed).items():
                if mine:
                    given[member][topic] = mine
        log.info(
            "assignor: %s",
            "; ".join(f"{said[m].worker}: {sorted(given[m].items())}" for m in sorted(given)),
        )
        return {
            m: ConsumerProtocolMemberAssignment(self.version, sorted(given[m].items()), b"")
            for m in members
        }

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        return None


def strategies(assignor: WarmAssignor | None) -> tuple[object, ...]:
    """``partition_assignment_strategy`` for a group consumer: ours alone (module docstring:
    aiokafka joins once per strategy), else aiokafka's round-robin."""
    if assignor is None:
        return (RoundRobinPartitionAssignor,)
    return (assignor,)
