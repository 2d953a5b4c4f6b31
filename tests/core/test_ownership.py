"""The owners map and the routing of a run request
(app.core.runlog.ownership), as tables and laws."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import jsonschema
import pytest

from app.core.runlog.ownership import (
    Forward,
    Local,
    Owner,
    Unavailable,
    advertised_url_problem,
    apply_owner,
    decode_owner,
    encode_owner,
    route,
)
from app.shell.schema_files import load_schema_documents

A = Owner(2, "w-a", "inst-a", "http://127.0.0.1:6066", 5, "2026-12-01T00:00:00Z", True)
B = Owner(2, "w-b", "inst-b", "http://127.0.0.1:6067", 6, "2026-12-01T00:00:01Z", True)


def test_a_record_round_trips_and_fits_its_schema() -> None:
    key, value = encode_owner(A)
    assert key == b"2"
    schema = load_schema_documents()["partition-owner"]
    jsonschema.validate(json.loads(value), schema)
    assert decode_owner(key, value) == A


@pytest.mark.parametrize(
    ("name", "key", "doc"),
    [
        ("tombstone", b"2", None),
        ("not json", b"2", b"{"),
        ("key is not the partition", b"3", None),
        ("no url", b"2", {"url": None}),
        ("a url with a path", b"2", {"url": "http://10.0.0.1:6066/evil"}),
        ("a url with credentials", b"2", {"url": "http://u:p@10.0.0.1:6066"}),
        ("a generation that is a bool", b"2", {"generation": True}),
        ("owned is not a bool", b"2", {"owned": "yes"}),
        ("a list", b"2", []),
    ],
)
def test_anything_but_an_owner_record_is_ignored(name: str, key: bytes, doc: Any) -> None:
    _, good = encode_owner(A)
    if doc is None and name != "key is not the partition":
        value = None
    elif isinstance(doc, dict):
        value = json.dumps({**json.loads(good), **doc}).encode()
    elif isinstance(doc, list):
        value = json.dumps(doc).encode()
    elif isinstance(doc, bytes):
        value = doc
    else:
        value = good
    assert decode_owner(key, value) is None, name


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("http://127.0.0.1:6066", True),
        ("https://worker-3.a2ui.internal:443", True),
        ("http://[::1]:6066/", True),
        ("http://127.0.0.1", False),  # a port is required
        ("ftp://127.0.0.1:21", False),
        ("http://127.0.0.1:6066/runs", False),
        ("http://127.0.0.1:6066?x=1", False),
        ("http://127.0.0.1:6066#x", False),
        ("http://user@127.0.0.1:6066", False),
        ("http://127.0.0.1:70000", False),
        ("127.0.0.1:6066", False),
        ("", False),
    ],
)
def test_only_an_origin_can_be_advertised(url: str, ok: bool) -> None:
    assert (advertised_url_problem(url) is None) is ok, url


def test_a_newer_claim_replaces_an_older_one_and_not_the_reverse() -> None:
    assert apply_owner(None, A) == A
    assert apply_owner(A, B) == B
    assert apply_owner(B, A) == B  # a claim of generation 5 arriving after generation 6's


def test_a_release_clears_only_its_own_claim() -> None:
    released_a = replace(A, owned=False)
    assert apply_owner(A, released_a) == released_a
    assert apply_owner(B, released_a) == B  # A let go after B took over: B stays
    assert apply_owner(None, released_a) is None
    # a release from an older generation than the same instance's claim does not clear it
    reclaimed = replace(A, generation=7)
    assert apply_owner(reclaimed, released_a) == reclaimed


def test_without_generations_the_topic_order_decides() -> None:
    a, b = replace(A, generation=-1), replace(B, generation=-1)
    assert apply_owner(b, a) == a


def test_a_restarted_worker_replaces_its_dead_predecessor() -> None:
    restarted = replace(A, instance="inst-a2", generation=8)
    assert apply_owner(A, restarted) == restarted
    assert apply_owner(restarted, replace(A, owned=False, generation=9)) == restarted


OWNERS = {2: B, 3: replace(A, partition=3, owned=False)}


@pytest.mark.parametrize(
    ("partition", "owned", "ready", "forwarded", "expected"),
    [
        (1, {1}, {1}, False, Local()),
        (1, {1}, {1}, True, Local()),  # a forwarded request for a partition held here
        (1, {1}, set(), False, Unavailable),  # restoring
        (2, set(), set(), False, Forward("http://127.0.0.1:6067", "w-b")),
        (2, set(), set(), True, Unavailable),  # never forwarded twice
        (3, set(), set(), False, Unavailable),  # released, nobody took it yet
        (4, set(), set(), False, Unavailable),  # never claimed
    ],
)
def test_route(
    partition: int, owned: set[int], ready: set[int], forwarded: bool, expected: Any
) -> None:
    got = route(
        partition, owned=owned, ready=ready, owners=OWNERS, instance="inst-a", forwarded=forwarded
    )
    if expected is Unavailable:
        assert isinstance(got, Unavailable) and str(partition) in got.reason
    else:
        assert got == expected


def test_a_stale_entry_naming_this_worker_is_not_followed() -> None:
    """The map still says A holds partition 2 (A's release is not read back yet), but A's
    validator no longer does: A answers 503 rather than forward to itself."""
    owners = {2: A}
    got = route(2, owned=set(), ready=set(), owners=owners, instance="inst-a", forwarded=False)
    assert isinstance(got, Unavailable)
