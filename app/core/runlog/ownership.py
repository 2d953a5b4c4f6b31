"""Who serves run R: the partition owners' map and the routing of a request to the owner
(issue 15 item 2; docs/http.md, "Reading: the owner serves each run").

Role: pure. Run R lives on partition ``murmur2(R) mod N`` of the admission, log and dead-letter
topics (app.core.runlog.keys), and the owner of partition p is the worker whose validator group
member is assigned admission partition p. Each member advertises its HTTP address with its
assignment on the compacted owners topic (topics/topics.json, schemas/partition-owner.schema.json),
as Kafka Streams' members advertise ``application.server`` in the group's metadata; every worker
folds that topic into a map with ``apply_owner`` and routes each run request with ``route``:
served here, forwarded to the owner's advertised URL, or unavailable (503 with Retry-After)
while nobody, or a worker that is still catching up, holds the partition.

A record carries the group generation of the assignment that produced it, so a late claim or
release from an older generation never overrides a newer owner (two workers write the topic
during a rebalance, with no order between them), and the ``instance`` of the process that wrote
it, so a release only clears its own claim and a restarted worker's claims replace its dead
predecessor's.

May import: the standard library.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "FORWARDED_HEADER",
    "Forward",
    "Local",
    "Owner",
    "Route",
    "Unavailable",
    "advertised_url_problem",
    "apply_owner",
    "decode_owner",
    "encode_owner",
    "route",
]

# Set on a request one worker forwards to another: the receiver serves it or answers 503, and
# never forwards it again (a stale map on two workers cannot bounce a request between them).
FORWARDED_HEADER: Final = "A2UI-Stream-Forwarded"


@dataclass(frozen=True, slots=True)
class Owner:
    """One record of the owners topic (key = the partition, in decimal)."""

    partition: int
    worker_id: str
    instance: str  # this process's incarnation: a restarted worker is a new instance
    url: str  # the advertised HTTP address, e.g. http://10.0.0.7:6066
    generation: int  # the validator group's generation of the assignment; -1 when unknown
    at: str  # RFC 3339, when it was written (for operators; never compared)
    owned: bool  # False: released on revocation


def encode_owner(owner: Owner) -> tuple[bytes, bytes]:
    """The record's key and value bytes (schemas/partition-owner.schema.json)."""
    value = {
        "partition": owner.partition,
        "workerId": owner.worker_id,
        "instance": owner.instance,
        "url": owner.url,
        "generation": owner.generation,
        "at": owner.at,
        "owned": owner.owned,
    }
    return str(owner.partition).encode(), json.dumps(value, separators=(",", ":")).encode()


def decode_owner(key: bytes | None, value: bytes | None) -> Owner | None:
    """The record as an ``Owner``, or None when it is not one (a tombstone, another writer's
    bytes, a key that does not match its partition, a URL ``advertised_url_problem`` refuses:
    nothing that is not a well-formed owner record can point a request anywhere)."""
    if key is None or value is None:
        return None
    try:
        doc: Any = json.loads(value)
        partition = int(key.decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict):
        return None
    fields = (doc.get("workerId"), doc.get("instance"), doc.get("url"), doc.get("at"))
    generation, owned = doc.get("generation"), doc.get("owned")
    if (
        doc.get("partition") != partition
        or partition < 0
        or not all(isinstance(f, str) for f in fields)
        or not isinstance(generation, int)
        or isinstance(generation, bool)
        or not isinstance(owned, bool)
    ):
        return None
    worker_id, instance, url, at = (str(f) for f in fields)
    if advertised_url_problem(url) is not None:
        return None
    return Owner(partition, worker_id, instance, url, generation, at, owned)


def _newer_or_equal(update: Owner, current: Owner) -> bool:
    if update.generation < 0 or current.generation < 0:
        return True  # no generation known: the topic's order decides
    return update.generation >= current.generation


def apply_owner(current: Owner | None, update: Owner) -> Owner | None:
    """The partition's owner after ``update`` (the owners topic folded in its order).

    A claim replaces the current entry unless that entry is of a newer generation (a claim
    delayed past the next rebalance). A release clears only the claim of the same instance,
    and only when that claim is not newer than the release."""
    if update.owned:
        if current is None or _newer_or_equal(update, current):
            return update
        return current
    if (
        current is not None
        and current.instance == update.instance
        and _newer_or_equal(update, current)
    ):
        return update
    return current


# scheme://host:port and nothing else: a DNS name or IPv4 address, or an IPv6 literal in [].
_ORIGIN = re.compile(
    r"(?P<scheme>[a-z]+)://(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]{2,45}\])"
    r"(?::(?P<port>[0-9]{1,5}))?/?"
)


def advertised_url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as an advertised address (None: fine). Only an origin is
    accepted (``http`` or ``https``, a host and a port, nothing else): a forwarded request is
    that origin plus the run route's own path, so no record can add a path, a query or
    credentials to where a caller's token is sent."""
    found = _ORIGIN.fullmatch(url)
    if found is None:
        return "only scheme://host:port (no credentials, path, query or fragment)"
    if found["scheme"] not in ("http", "https"):
        return "the scheme must be http or https"
    port = found["port"]
    if port is None:
        return "a port is required (e.g. http://10.0.0.7:6066)"
    if not 1 <= int(port) <= 65535:
        return "the port must be 1 to 65535"
    return None


@dataclass(frozen=True, slots=True)
class Local:
    """This worker owns the partition and its store has read the log: serve the request."""


@dataclass(frozen=True, slots=True)
class Forward:
    """Another worker owns the partition: send the request to its advertised origin."""

    url: str
    worker_id: str


@dataclass(frozen=True, slots=True)
class Unavailable:
    """Nobody can answer for the partition right now (a rebalance): 503 with Retry-After."""

    reason: str


Route = Local | Forward | Unavailable


def route(
    partition: int,
    *,
    owned: Set[int],
    ready: Set[int],
    owners: Mapping[int, Owner],
    instance: str,
    forwarded: bool,
) -> Route:
    """Where a request for a run on ``partition`` is answered. ``owned`` are the partitions
    this worker's validator holds, ``ready`` those whose store has caught up with the log,
    ``owners`` the folded owners topic, ``instance`` this process's, ``forwarded`` whether the
    request already came from another worker (it is never forwarded twice)."""
    if partition in owned:
        if partition in ready:
            return Local()
        return Unavailable(f"partition {partition} is being restored on this worker")
    if forwarded:
        return Unavailable(f"partition {partition} is not owned by this worker (moved)")
    owner = owners.get(partition)
    if owner is None or not owner.owned:
        return Unavailable(f"partition {partition} has no owner yet (a rebalance)")
    if owner.instance == instance:
        return Unavailable(f"partition {partition} is moving off this worker")
    return Forward(owner.url.rstrip("/"), owner.worker_id)
