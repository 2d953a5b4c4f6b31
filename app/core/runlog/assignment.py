"""Which member of a consumer group gets which partition: balanced, and warm where it can be.

Role: a pure decision (issue 15: a worker's cost follows the partitions it owns). Each worker
keeps a local store of the log partitions it has read (``app.shell.worker.run_store``); a
partition it is given back resumes from its checkpoint there, any other is read from the log's
beginning (measured: a worker of two restarted after a SIGKILL was ready in 69 s when the
group's round-robin order handed it the other worker's partitions, 11-15 s when it got its own
back). So every member says, with its join, which worker it is and which partitions it holds warm,
and the group's leader assigns (``assign``) as Kafka Streams' assignor weighs a task's lag:

1. balance first: each member gets ``n // m`` partitions, and ``n % m`` of them one more (those
   with the most warm partitions first);
2. then warmth: members with the fewest warm partitions choose first (scarcity), each taking
   its own warm partitions, lowest first, up to its share;
3. the rest round-robin, members in worker order.

Deterministic in what the members said (their worker ids, not their member ids, which change
with every join), so the validator's group and the projector's, joined by the same workers
with the same stores, agree, and a restarted worker gets its partitions back.

May import: the standard library, orjson.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import orjson

__all__ = ["Member", "assign", "decode_member", "encode_member"]


@dataclass(frozen=True, slots=True)
class Member:
    """What a member said with its join: its worker id and the partitions it holds warm."""

    worker: str
    warm: frozenset[int]


def encode_member(worker: str, warm: Iterable[int]) -> bytes:
    """A member's user data in its JoinGroup (``decode_member`` reads it)."""
    return orjson.dumps({"worker": worker, "warm": sorted(set(warm))})


def decode_member(member_id: str, data: bytes | None) -> Member:
    """A member's user data; a member that said nothing usable (another version, another
    assignor's data) is a worker named by its member id, with nothing warm."""
    try:
        doc = orjson.loads(data or b"")
    except orjson.JSONDecodeError:
        return Member(member_id, frozenset())
    if not isinstance(doc, dict):
        return Member(member_id, frozenset())
    worker, warm = doc.get("worker"), doc.get("warm")
    if not isinstance(worker, str) or not worker:
        worker = member_id
    partitions = (
        frozenset(p for p in warm if isinstance(p, int) and not isinstance(p, bool))
        if isinstance(warm, list)
        else frozenset()
    )
    return Member(worker, partitions)


def assign(partitions: Sequence[int], members: Mapping[str, Member]) -> dict[str, list[int]]:
    """Each member id's partitions (sorted): every partition exactly once, shares within one
    of each other (module docstring)."""
    if not members:
        return {}
    wanted = sorted(set(partitions))
    known = set(wanted)
    ids = sorted(members, key=lambda m: (members[m].worker, m))
    base, extra = divmod(len(wanted), len(ids))
    warm = {m: members[m].warm & known for m in ids}
    by_warmth = sorted(ids, key=lambda m: (-len(warm[m]), members[m].worker, m))
    share = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_warmth)}
    given: dict[str, list[int]] = {m: [] for m in ids}
    taken: set[int] = set()
    for m in sorted(ids, key=lambda m: (len(warm[m]), members[m].worker, m)):
        for p in sorted(warm[m]):
            if len(given[m]) >= share[m]:
                break
            if p not in taken:
                given[m].append(p)
                taken.add(p)
    turn = 0
    for p in wanted:
        if p in taken:
            continue
        while len(given[ids[turn % len(ids)]]) >= share[ids[turn % len(ids)]]:
            turn += 1
        given[ids[turn % len(ids)]].append(p)
        taken.add(p)
        turn += 1
    return {m: sorted(ps) for m, ps in given.items()}
