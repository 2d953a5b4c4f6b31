"""Principals (issue 18 item 1, the pure half of item 2): the tokens file's parse and its
refusals, prefix matching, each right missing in turn, and the no-existence-oracle law."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.admission.identifiers import RUN_ID_PATTERN
from app.core.http.principals import (
    LAPTOP,
    RIGHTS,
    TOKENLESS,
    Allowed,
    Forbidden,
    Malformed,
    Principal,
    Principals,
    Unauthenticated,
    Unknown,
    authenticate,
    authorize,
    bearer_token,
    joined,
    may,
    parse_principals,
    plain_principals,
    tenant_of,
    token_digest,
)
from app.core.http.snapshot import DEFAULT_TENANT, snapshot

TOKEN_A = "tok-a-" + "1" * 32
TOKEN_B = "tok-b-" + "2" * 32
TOKEN_C = "tok-c-" + "3" * 32


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _entry(**fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": "team-a",
        "token_sha256": _sha(TOKEN_A),
        "tenants": ["acme"],
        "rights": ["read"],
    }
    entry.update(fields)
    return {k: v for k, v in entry.items() if v is not None}


def _file(*entries: object) -> str:  # an entry of any JSON shape, to refuse
    return json.dumps({"principals": list(entries)})


FILE = _file(
    _entry(tenants=["acme", "beta*"], rights=["read", "emit"]),
    _entry(name="ops", token_sha256=_sha(TOKEN_B).upper(), tenants=["*"], rights=list(RIGHTS)),
    _entry(name="laptop-runs", token_sha256=_sha(TOKEN_C), tenants=["local"], rights=["read"]),
)


def _parsed(text: str = FILE) -> Principals:
    found = parse_principals(text)
    assert isinstance(found, Principals), found
    return found


def test_a_file_parses_into_frozen_principals_holding_digests_only() -> None:
    found = _parsed()
    assert len(found) == 3 and not found.tokenless
    team = found.entries[0]
    assert team == Principal("team-a", ("acme", "beta*"), frozenset({"read", "emit"}), team.digest)
    assert team.digest == hashlib.sha256(TOKEN_A.encode()).digest()
    assert found.entries[1].digest == token_digest(TOKEN_B)  # upper-case hex is read too
    with pytest.raises(AttributeError):
        team.name = "other"  # type: ignore[misc]
    shown = repr(found) + str(found)
    for token in (TOKEN_A, TOKEN_B, TOKEN_C):
        assert token not in shown and _sha(token) not in shown.lower()
    assert parse_principals(FILE.encode()) == found  # bytes as read from the file


@pytest.mark.parametrize(
    ("text", "where", "fragment"),
    [
        ("", "", "not JSON (Expecting value at line 1 column 1)"),
        ("{", "", "not JSON"),
        (b"\xff\xfe\xfa", "", "not UTF-8"),
        ("[]", "", 'expected one object {"principals": [...]}'),
        ('{"principals": [], "extra": 1}', "", "nothing else beside it"),
        ('{"principals": [], "principals": []}', "", "'principals' appears twice"),
        ('{"principals": []}', "principals", "list at least one principal"),
        ('{"principals": {}}', "principals", "list at least one principal"),
        (_file("team-a"), "principals[0]", "expected an object"),
        (_file(_entry(name=None)), "principals[0].name", "a name of 1-64"),
        (_file(_entry(name="team a")), "principals[0].name", "a name of 1-64"),
        (_file(_entry(name="x" * 65)), "principals[0].name", "a name of 1-64"),
        (_file(_entry(), _entry()), "principals[1].name", "also principals[0]'s name"),
        (
            _file(_entry(token=TOKEN_A)),
            "principals[0] (team-a).token",
            "plaintext tokens are not accepted",
        ),
        (_file(_entry(tenats=["acme"])), "principals[0] (team-a).tenats", "not a field"),
        (_file(_entry(token_sha256=None)), "principals[0] (team-a).token_sha256", "64 hex"),
        (_file(_entry(token_sha256=TOKEN_A)), "principals[0] (team-a).token_sha256", "64 hex"),
        (_file(_entry(token_sha256="ab" * 31)), "principals[0] (team-a).token_sha256", "64 hex"),
        (
            _file(_entry(), _entry(name="b", tenants=["*"])),
            "principals[1] (b).token_sha256",
            "the same token as principals[0] (team-a)",
        ),
        (_file(_entry(tenants=None)), "principals[0] (team-a).tenants", "at least one tenant"),
        (_file(_entry(tenants=[])), "principals[0] (team-a).tenants", "at least one tenant"),
        (_file(_entry(tenants="acme")), "principals[0] (team-a).tenants", "at least one tenant"),
        (
            _file(_entry(tenants=["acme", "a*b"])),
            "principals[0] (team-a).tenants[1]",
            "'a*b' is neither a tenant id",
        ),
        (_file(_entry(tenants=["**"])), "principals[0] (team-a).tenants[0]", "neither"),
        (_file(_entry(tenants=["ac:me"])), "principals[0] (team-a).tenants[0]", "neither"),
        (_file(_entry(tenants=[""])), "principals[0] (team-a).tenants[0]", "neither"),
        (_file(_entry(tenants=[7])), "principals[0] (team-a).tenants[0]", "7 is neither"),
        (_file(_entry(tenants=["a" * 129])), "principals[0] (team-a).tenants[0]", "neither"),
        (_file(_entry(rights=None)), "principals[0] (team-a).rights", "at least one right"),
        (_file(_entry(rights=[])), "principals[0] (team-a).rights", "at least one right"),
        (
            _file(_entry(rights=["read", "wirte"])),
            "principals[0] (team-a).rights[1]",
            "'wirte' is not a right: use read, emit, approve, act, admin",
        ),
        (_file(_entry(rights=["READ"])), "principals[0] (team-a).rights[0]", "not a right"),
        (_file(_entry(rights=["*"])), "principals[0] (team-a).rights[0]", "not a right"),
    ],
)
def test_a_malformed_file_says_which_entry_and_field_to_fix(
    text: str | bytes, where: str, fragment: str
) -> None:
    found = parse_principals(text)
    assert isinstance(found, Malformed), found
    assert found.where == where
    assert fragment in found.message, found.message
    assert "\n" not in found.message
    assert TOKEN_A not in found.message and _sha(TOKEN_A) not in found.message


def test_an_entry_may_repeat_a_right_and_end_up_with_it_once() -> None:
    found = _parsed(_file(_entry(rights=["read", "read"])))
    assert found.entries[0].rights == frozenset({"read"})


@pytest.mark.parametrize(
    ("patterns", "tenant", "reached"),
    [
        (["acme"], "acme", True),
        (["acme"], "acme-eu", False),
        (["acme"], "Acme", False),
        (["acme"], "acm", False),
        (["acme*"], "acme", True),
        (["acme*"], "acme-eu", True),
        (["acme*"], "acm", False),
        (["acme-*"], "acme", False),
        (["*"], "anything", True),
        (["*"], "anon:9f3c", True),
        (["anon:*"], "anon:9f3c", True),
        (["anon:*"], "anonymous", False),
        (["beta", "acme*"], "beta", True),
        (["beta", "acme*"], "gamma", False),
        (["local"], DEFAULT_TENANT, True),
    ],
)
def test_may_matches_exact_names_and_trailing_star_prefixes(
    patterns: list[str], tenant: str, reached: bool
) -> None:
    principal = _parsed(_file(_entry(tenants=patterns, rights=list(RIGHTS)))).entries[0]
    for right in RIGHTS:
        assert may(principal, right, tenant) is reached


@pytest.mark.parametrize(
    ("run_id", "tenant"),
    [
        ("acme/r-0123456789abcdef", "acme"),
        ("anon:9f3c/r-0123456789abcdef", "anon:9f3c"),
        ("demo", "local"),  # a v1 runId: the default tenant
        ("ac:me/r1", "local"),  # not a tenant id (the only colon is anon:'s), as the snapshot
        ("/r1", "local"),
    ],
)
def test_the_tenant_of_a_run_id(run_id: str, tenant: str) -> None:
    assert tenant_of(run_id, "local") == tenant
    assert snapshot(run_id, "running", 0, [])["owner"]["tenant"] == tenant


@given(st.from_regex(RUN_ID_PATTERN, fullmatch=True))
def test_the_tenant_authorized_is_the_snapshots_owner_tenant(run_id: str) -> None:
    """One reading of a runId's tenant: what GET /runs/{runId} says the owner is, is what the
    authorization checks."""
    assert (
        tenant_of(run_id, DEFAULT_TENANT) == snapshot(run_id, "running", 0, [])["owner"]["tenant"]
    )


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("BEARER  abc ", "abc"),
        ("Bearer ", None),
        ("Basic abc", None),
        ("abc", None),
        ("", None),
        (None, None),
    ],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_authenticate_finds_the_principal_or_says_unauthenticated() -> None:
    found = _parsed()
    assert authenticate(found, TOKEN_A) == found.entries[0]
    assert authenticate(found, TOKEN_B) == found.entries[1]
    assert authenticate(found, "nope") == Unauthenticated(tokens_configured=True)
    assert authenticate(found, None) == Unauthenticated(tokens_configured=True)
    assert authenticate(found, "") == Unauthenticated(tokens_configured=True)
    assert authenticate(Principals(), TOKEN_A) == Unauthenticated(tokens_configured=False)


@pytest.mark.parametrize("presented", [TOKEN_A, TOKEN_B, TOKEN_C, "nope"])
def test_every_digest_is_compared_whichever_matches(
    presented: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No early exit: the time taken does not say which principal, or whether any, matched."""
    compared: list[bytes] = []
    real = hmac.compare_digest  # the module app.core.http.principals calls

    def counting(a: bytes, b: bytes) -> bool:
        compared.append(b)
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    found = _parsed()
    authenticate(found, presented)
    assert compared == [entry.digest for entry in found.entries]


def test_the_plain_token_list_is_every_tenant_every_right() -> None:
    plain = plain_principals(["t1", "", "t2"])
    assert [p.name for p in plain.entries] == [
        "A2UI_STREAM_HTTP_TOKENS[1]",
        "A2UI_STREAM_HTTP_TOKENS[2]",
    ]
    assert "t1" not in repr(plain)
    for right in RIGHTS:
        for run_id in ("acme/r-0123456789abcdef", "demo", "anon:x/r1"):
            decided = authorize(plain, "t2", right, run_id, DEFAULT_TENANT)
            assert decided == Allowed(plain.entries[1])


def test_joined_keeps_both_and_refuses_a_token_held_twice() -> None:
    both = joined(plain_principals(["t1"]), _parsed())
    assert isinstance(both, Principals) and len(both) == 4
    clash = joined(plain_principals([TOKEN_A]), _parsed())
    assert isinstance(clash, Malformed)
    assert "A2UI_STREAM_HTTP_TOKENS[1] and team-a have the same token" in clash.message
    assert TOKEN_A not in clash.message


@pytest.mark.parametrize("presented", [None, "", "anything", TOKEN_A])
def test_the_laptop_mode_allows_every_request(presented: str | None) -> None:
    for right in RIGHTS:
        for run_id in ("acme/r-0123456789abcdef", "demo"):
            assert authorize(TOKENLESS, presented, right, run_id, DEFAULT_TENANT) == Allowed(LAPTOP)


@pytest.mark.parametrize("missing", RIGHTS)
def test_each_right_missing_in_turn(missing: str) -> None:
    """A principal of tenant acme with every right but ``missing``: that right is 403 on acme's
    runs, the others are allowed; on beta's runs every right is the unknown run's answer."""
    held = [r for r in RIGHTS if r != missing]
    found = _parsed(_file(_entry(tenants=["acme"], rights=held)))
    who = found.entries[0]
    own, foreign = "acme/r-0123456789abcdef", "beta/r-0123456789abcdef"
    for right in RIGHTS:
        decided = authorize(found, TOKEN_A, right, own, DEFAULT_TENANT)
        assert decided == (Forbidden(who, right) if right == missing else Allowed(who))
        assert may(who, right, "acme") is (right != missing)
        assert authorize(found, TOKEN_A, right, foreign, DEFAULT_TENANT) == Unknown()
        assert authorize(found, "nope", right, own, DEFAULT_TENANT) == Unauthenticated(True)


_TENANTS = st.from_regex(r"\A(anon:)?[A-Za-z0-9._~-]{1,12}\Z", fullmatch=True)
_OPAQUES = st.from_regex(r"\A[A-Za-z0-9._~-]{16,40}\Z", fullmatch=True)
_PRESENTED = st.sampled_from([TOKEN_A, TOKEN_B, TOKEN_C, "nope", None])


@given(_PRESENTED, st.sampled_from(RIGHTS), _TENANTS, _OPAQUES, _OPAQUES)
def test_no_existence_oracle(
    presented: str | None, right: Any, tenant: str, seen: str, never_seen: str
) -> None:
    """For every (token, run) the outcome depends on the run's tenant only: a run of another
    tenant (``seen``: say it exists) gets the very value a never-seen runId of that tenant
    gets, and when the tenant is not the caller's, that value is Unknown (the unknown run's
    404), whatever the right."""
    found = _parsed()
    first = authorize(found, presented, right, f"{tenant}/{seen}", DEFAULT_TENANT)
    assert first == authorize(found, presented, right, f"{tenant}/{never_seen}", DEFAULT_TENANT)
    who = authenticate(found, presented)
    if isinstance(who, Principal) and not any(may(who, r, tenant) for r in RIGHTS):
        assert first == Unknown()
        for other in RIGHTS:
            assert authorize(found, presented, other, f"{tenant}/{seen}", DEFAULT_TENANT) == first


@given(_PRESENTED, st.sampled_from(RIGHTS), st.from_regex(r"\A[A-Za-z0-9._~-]{1,40}\Z"))
def test_v1_run_ids_are_the_default_tenants(presented: str | None, right: Any, run_id: str) -> None:
    found = _parsed()
    assert authorize(found, presented, right, run_id, DEFAULT_TENANT) == authorize(
        found, presented, right, f"{DEFAULT_TENANT}/{run_id}", DEFAULT_TENANT
    )
