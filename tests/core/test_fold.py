"""The fold guard as a table (openwop-a2ui.md §6), E1 partial chunks against E2 re-emission,
and the v1 surface identity (docs/admission.md)."""

from __future__ import annotations

import copy

import pytest

from app.core.admission.decision import Admitted, Deduplicated, Refused
from app.core.admission.fold import ILLEGAL, TRANSITIONS, guard, kinds_of, message_kind
from app.core.admission.policy import HostPolicy
from app.core.runlog.pmap import PMap
from tests.core.admission_support import (
    V1_LATER,
    V1_SURFACE,
    Host,
    components_msg,
    create_msg,
    data_msg,
    delete_msg,
    envelope,
    v2,
)

C, U, D, X = "createSurface", "updateComponents", "updateDataModel", "deleteSurface"


@pytest.mark.parametrize(
    ("status", "kinds", "index"),
    [
        ("absent", [C], None),
        ("absent", [C, U, D, X], None),
        ("absent", [U], 0),  # §6 (i)
        ("absent", [D], 0),
        ("absent", [X], 0),
        ("live", [C], 0),  # §6 (ii)
        ("live", [U, D, U], None),
        ("live", [X, C, U], None),  # delete then re-create in one envelope
        ("live", [X, U], 1),  # §6 (iii)
        ("deleted", [U], 0),
        ("deleted", [X], 0),
        ("deleted", [C, C], 1),
        ("absent", [C, "unknown"], 1),
    ],
)
def test_fold_guard_table(status: str, kinds: list[str], index: int | None) -> None:
    violation = guard(status, "s", kinds)  # type: ignore[arg-type]
    if index is None:
        assert violation is None
    else:
        assert violation is not None
        assert violation.details["index"] == index
        assert violation.path == f"/envelope/payload/messages/{index}"
        assert violation.code == "envelope_invalid"


def test_fold_transition_table_is_exactly_the_spec() -> None:
    assert dict(TRANSITIONS) == {
        ("absent", C): "live",
        ("live", U): "live",
        ("live", D): "live",
        ("live", X): "deleted",
        ("deleted", C): "live",
    }
    assert set(ILLEGAL) == {"absent", "live", "deleted"}


def test_fold_message_kind() -> None:
    assert message_kind(create_msg("s")) == C
    assert message_kind({"version": "v0.9"}) is None
    assert message_kind([]) is None
    assert kinds_of([delete_msg("s"), {}]) == (X, "unknown")


def test_fold_partial_chunks_share_a_correlation_and_dedupe_per_index() -> None:
    host = Host()
    sid = "s-p"

    def chunk(index: int, *messages: dict[str, object], final: bool = False) -> dict[str, object]:
        return envelope(
            v2(sid, *messages),
            correlation_id="emission-1",
            partial={"isPartial": not final, "index": index, "total": 3},
        )

    first = host.emit(chunk(0, create_msg(sid)))
    assert isinstance(first, Admitted)
    assert host.state().surfaces[sid].partial is True
    second = host.emit(chunk(1, components_msg(sid)))
    assert isinstance(second, Admitted) and second.sequence == 1
    # the same chunk again is a re-emission of THAT chunk
    assert host.emit(chunk(0, create_msg(sid))) == Deduplicated(
        0, first.event["eventId"], "emission-1"
    )
    last = host.emit(chunk(2, data_msg(sid), final=True))
    assert isinstance(last, Admitted)
    assert host.state().surfaces[sid].partial is False
    assert host.state().correlations["emission-1"].complete
    # after the final chunk, any re-emission answers with the completing record
    again = host.emit(chunk(7, data_msg(sid)))
    assert again == Deduplicated(last.sequence, last.event["eventId"], "emission-1")


def test_fold_v1_surface_is_the_last_full_payload_of_the_run() -> None:
    host = Host(HostPolicy(schema_versions={"ui.a2ui-surface": 1}))
    first = host.emit(
        envelope(copy.deepcopy(V1_SURFACE), schema_version=1, node_id="gate", trust="untrusted")
    )
    later = host.emit(envelope(copy.deepcopy(V1_LATER), schema_version=0))
    assert isinstance(first, Admitted) and isinstance(later, Admitted)
    v1 = host.state().v1_surface
    assert v1 is not None
    assert v1.last.event_id == later.event["eventId"]
    assert v1.tainted  # sticky, as for v2 surfaces
    assert host.state().tainted_surfaces_for_node("gate") == ("v1",)
    assert len(host.state().surfaces) == 0  # v1 bodies never join the v2 fold


def test_fold_warn_admitted_v1_envelope_with_v2_body_joins_the_fold() -> None:
    host = Host()
    assert isinstance(host.emit(envelope(v2("s", create_msg("s")), schema_version=1)), Admitted)
    assert host.state().surface_status("s") == "live"
    refused = host.emit(envelope(v2("s", create_msg("s")), schema_version=2))
    assert isinstance(refused, Refused) and refused.violation.rule == "fold"


def test_fold_pmap_structural_sharing_keeps_old_versions() -> None:
    versions: list[PMap[str, int]] = [PMap()]
    for i in range(200):
        versions.append(versions[-1].set(f"k{i}", i))
    for n, m in enumerate(versions):
        assert len(m) == n
        assert dict(m.items()) == {f"k{i}": i for i in range(n)}
    assert versions[100].get("k150") is None and versions[200]["k150"] == 150
