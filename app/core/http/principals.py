"""Principals: who a bearer token is, which tenants it may reach and with which rights (issue 18).

Role: pure. The shell reads the tokens file (``A2UI_STREAM_HTTP_TOKENS_FILE``) once at start and
passes its text to ``parse_principals``; the route dispatcher calls ``authorize`` (a run route)
or ``authenticate`` and ``may`` (a route without a run, e.g. the run listing) before anything
else, and answers ``Unknown`` exactly as it answers a run it has never seen: the 404 of an
unknown run, same status, body and work. A right the caller lacks in one of its own tenants
is ``Forbidden`` (403). That is the no-existence-oracle rule: the outcome depends on the
token, the right and the runId's tenant, never on whether the run exists.

The tokens file (JSON, documented in docs/http.md, "Tenant-scoped tokens")::

    {"principals": [
      {"name": "team-a", "token_sha256": "<64 hex digits>",
       "tenants": ["acme", "beta*"], "rights": ["read", "emit"]}
    ]}

- Tokens are stored as SHA-256 digests only; a plaintext ``token`` field is refused (a copy of
  the file, a backup, a config repository then holds nothing a caller can present). Tokens are
  random secrets (``secrets.token_hex(32)``), so a fast hash is enough: there is nothing to
  guess by brute force.
- ``tenants``: exact tenant ids (ids.schema.json ``tenantId``) or prefixes ending in ``*``
  (``beta*`` reaches ``beta`` and ``beta-eu``; ``*`` alone reaches every tenant). A runId without
  a tenant segment (v1) belongs to the default tenant the caller passes (the shell passes
  ``app.core.http.snapshot.DEFAULT_TENANT``, ``local``, the tenant its snapshot names).
- ``rights``: ``read`` (snapshots, the event-log read, poll, SSE, the listing, the viewer's API),
  ``emit`` (envelopes, fork, the seams), ``approve`` (interrupt resolve), ``act`` (user
  actions), ``admin`` (run deletion, dead-letter replay). None implies another.

The plain ``A2UI_STREAM_HTTP_TOKENS`` list is ``plain_principals``: every tenant, every right.
The laptop mode (``A2UI_STREAM_HTTP_AUTH=off``, loopback only) is ``TOKENLESS``: a mode, not a
principal with a token: every request is ``Allowed(LAPTOP)``, whatever it presents.

In memory only digests are kept; ``Principal``'s repr leaves the digest out. A presented token
is hashed once and compared (``hmac.compare_digest``) with every principal's digest, with no
early exit, so the time taken does not say which principal, or how many, matched.

May import: the standard library only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = [
    "LAPTOP",
    "RIGHTS",
    "TOKENLESS",
    "Allowed",
    "Decision",
    "Forbidden",
    "Malformed",
    "Principal",
    "Principals",
    "Right",
    "Unauthenticated",
    "Unknown",
    "authenticate",
    "authorize",
    "bearer_token",
    "joined",
    "may",
    "parse_principals",
    "plain_principals",
    "tenant_of",
    "token_digest",
]

Right = Literal["read", "emit", "approve", "act", "admin"]
RIGHTS: Final[tuple[Right, ...]] = ("read", "emit", "approve", "act", "admin")

# ids.schema.json tenantId (the only colon is the ``anon:`` prefix); app.core.http.snapshot
# reads a runId's tenant with the same grammar, so a snapshot's owner.tenant and the tenant
# authorized here are one value.
_TENANT: Final = re.compile(r"(anon:)?[A-Za-z0-9._~-]{1,128}")
# A prefix pattern: what may start a tenant id, then ``*``.
_PREFIX: Final = re.compile(r"(anon:)?[A-Za-z0-9._~-]{0,127}\*")
_NAME: Final = re.compile(r"[A-Za-z0-9._-]{1,64}")  # safe to log: the name is not a secret
_HEX_DIGEST: Final = re.compile(r"[0-9A-Fa-f]{64}")
_ENTRY_FIELDS: Final = frozenset({"name", "token_sha256", "tenants", "rights"})


@dataclass(frozen=True)
class Principal:
    """One caller: its name (for logs and errors), tenant patterns, rights, token digest."""

    name: str
    tenants: tuple[str, ...]
    rights: frozenset[Right]
    digest: bytes = field(default=b"", repr=False)


@dataclass(frozen=True)
class Principals:
    """Every principal this worker knows. ``tokenless``: the laptop mode (no token at all)."""

    entries: tuple[Principal, ...] = ()
    tokenless: bool = False

    def __len__(self) -> int:
        return len(self.entries)


LAPTOP: Final = Principal("laptop", ("*",), frozenset(RIGHTS))
TOKENLESS: Final = Principals((), tokenless=True)


@dataclass(frozen=True)
class Malformed:
    """Why a tokens file is refused: ``where`` (e.g. ``principals[2] (team-b).rights[0]``) and
    a ``message`` that says what to fix. Never holds a token or a digest."""

    where: str
    problem: str

    @property
    def message(self) -> str:
        """The problem, prefixed with where in the file it is."""
        return f"{self.where}: {self.problem}" if self.where else self.problem


@dataclass(frozen=True)
class Allowed:
    """The caller may do what it asked: ``principal`` is who it is."""

    principal: Principal


@dataclass(frozen=True)
class Forbidden:
    """The run's tenant is one of the caller's, but the caller lacks ``right`` there: 403. It
    reveals nothing about the run: the answer is the same whether the run exists or not."""

    principal: Principal
    right: Right


@dataclass(frozen=True)
class Unknown:
    """The run is outside the caller's tenants: answer exactly as for a run never seen (404)."""


@dataclass(frozen=True)
class Unauthenticated:
    """No token, or one no principal holds (401). ``tokens_configured``: whether any token is
    configured at all (the 401 then says which variable to set)."""

    tokens_configured: bool


Decision = Allowed | Forbidden | Unknown | Unauthenticated


def token_digest(token: str) -> bytes:
    """SHA-256 of a token's UTF-8 bytes: what the tokens file's ``token_sha256`` holds (hex)."""
    return hashlib.sha256(token.encode("utf-8")).digest()


def plain_principals(tokens: Iterable[str]) -> Principals:
    """``A2UI_STREAM_HTTP_TOKENS``: each token a principal of every tenant and every right,
    named by its position (``A2UI_STREAM_HTTP_TOKENS[1]``), never by its value."""
    entries = tuple(
        Principal(f"A2UI_STREAM_HTTP_TOKENS[{n}]", ("*",), frozenset(RIGHTS), token_digest(t))
        for n, t in enumerate((t for t in tokens if t), start=1)
    )
    return Principals(entries)


def joined(first: Principals, second: Principals) -> Principals | Malformed:
    """Both sets of principals, or ``Malformed`` when a token belongs to two of them (which
    principal it is would be ambiguous, and a plain token's every-right would undo a scoped
    one)."""
    entries = first.entries + second.entries
    clash = _same_digest(entries)
    if clash is not None:
        a, b = clash
        return Malformed(
            "", f"{a.name} and {b.name} have the same token: give each principal its own"
        )
    return Principals(entries, tokenless=first.tokenless and second.tokenless)


def _same_digest(entries: tuple[Principal, ...]) -> tuple[Principal, Principal] | None:
    seen: dict[bytes, Principal] = {}
    for entry in entries:
        if entry.digest in seen:
            return seen[entry.digest], entry
        seen[entry.digest] = entry
    return None


# -- the tokens file -------------------------------------------------------------------------


class _Duplicate(Exception):
    """A member name twice in one object (internal: never leaves this module)."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return obj


def _shown(value: Any) -> str:
    """A value the file holds, for an error message (not a token field: those are never shown)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parse_principals(text: str | bytes) -> Principals | Malformed:
    """The principals a tokens file's content declares, or the first thing to fix in it."""
    try:
        document = json.loads(text, object_pairs_hook=_unique)
    except _Duplicate as exc:
        return Malformed("", f"the member {_shown(str(exc))} appears twice in one object: keep one")
    except UnicodeDecodeError:
        return Malformed("", "the file is not UTF-8: write it as UTF-8 JSON")
    except json.JSONDecodeError as exc:  # its message names a position, never the content
        return Malformed(
            "", f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): see docs/http.md"
        )
    if not isinstance(document, dict) or set(document) != {"principals"}:
        return Malformed("", 'expected one object {"principals": [...]} and nothing else beside it')
    listed = document["principals"]
    if not isinstance(listed, list) or not listed:
        return Malformed("principals", "list at least one principal {name, token_sha256, ...}")
    entries: list[Principal] = []
    names: dict[str, int] = {}
    for index, raw in enumerate(listed):
        entry = _entry(index, raw)
        if isinstance(entry, Malformed):
            return entry
        if entry.name in names:
            return Malformed(
                f"principals[{index}].name",
                f"{entry.name!r} is also principals[{names[entry.name]}]'s name: names are unique",
            )
        names[entry.name] = index
        entries.append(entry)
    clash = _same_digest(tuple(entries))
    if clash is not None:
        a, b = clash
        return Malformed(
            f"principals[{names[b.name]}] ({b.name}).token_sha256",
            f"the same token as principals[{names[a.name]}] ({a.name}): give each its own token",
        )
    return Principals(tuple(entries))


def _entry(index: int, raw: Any) -> Principal | Malformed:
    where = f"principals[{index}]"
    if not isinstance(raw, dict):
        return Malformed(where, "expected an object {name, token_sha256, tenants, rights}")
    name = raw.get("name")
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        return Malformed(
            f"{where}.name", "a name of 1-64 ASCII letters, digits and . _ - is required"
        )
    where = f"{where} ({name})"
    if "token" in raw:
        return Malformed(
            f"{where}.token",
            "plaintext tokens are not accepted: store its SHA-256 as token_sha256 "
            '(printf %s "$TOKEN" | sha256sum) and remove token',
        )
    unknown = sorted(set(raw) - _ENTRY_FIELDS)
    if unknown:
        return Malformed(
            f"{where}.{unknown[0][:40]}",
            "not a field of a principal: use name, token_sha256, tenants and rights",
        )
    digest = raw.get("token_sha256")
    if not isinstance(digest, str) or _HEX_DIGEST.fullmatch(digest) is None:
        return Malformed(
            f"{where}.token_sha256",
            '64 hex digits are required: the SHA-256 of the token (printf %s "$TOKEN" | sha256sum)',
        )
    tenants = _tenants(where, raw.get("tenants"))
    if isinstance(tenants, Malformed):
        return tenants
    rights = _rights(where, raw.get("rights"))
    if isinstance(rights, Malformed):
        return rights
    return Principal(name, tenants, rights, bytes.fromhex(digest))


def _tenants(where: str, raw: Any) -> tuple[str, ...] | Malformed:
    if not isinstance(raw, list) or not raw:
        return Malformed(
            f"{where}.tenants",
            'list at least one tenant: an exact id ("acme"), a prefix ("acme-*") or "*" for all',
        )
    for n, pattern in enumerate(raw):
        if not isinstance(pattern, str) or not (
            _TENANT.fullmatch(pattern) or _PREFIX.fullmatch(pattern)
        ):
            return Malformed(
                f"{where}.tenants[{n}]",
                f"{_shown(pattern)} is neither a tenant id (ASCII letters, digits, . _ ~ -, "
                "an optional anon: prefix, at most 128) nor one followed by a single trailing *",
            )
    return tuple(raw)


def _rights(where: str, raw: Any) -> frozenset[Right] | Malformed:
    if not isinstance(raw, list) or not raw:
        return Malformed(f"{where}.rights", f"list at least one right of: {', '.join(RIGHTS)}")
    rights: set[Right] = set()
    for n, right in enumerate(raw):
        if right not in RIGHTS:
            return Malformed(
                f"{where}.rights[{n}]",
                f"{_shown(right)} is not a right: use {', '.join(RIGHTS)}",
            )
        rights.add(right)
    return frozenset(rights)


# -- decisions -------------------------------------------------------------------------------


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme case-insensitive,
    RFC 6750 §2.1), or None when there is none."""
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def authenticate(principals: Principals, presented: str | None) -> Principal | Unauthenticated:
    """The principal whose token is ``presented`` (the bearer token, None for none). Every
    digest is compared, with no early exit (digests are unique, so at most one matches)."""
    if principals.tokenless:
        return LAPTOP
    configured = bool(principals.entries)
    if not presented:
        return Unauthenticated(configured)
    given = token_digest(presented)
    found: Principal | None = None
    for entry in principals.entries:
        if hmac.compare_digest(given, entry.digest):
            found = entry
    return found if found is not None else Unauthenticated(configured)


def _reaches(principal: Principal, tenant: str) -> bool:
    return any(
        tenant.startswith(p[:-1]) if p.endswith("*") else tenant == p for p in principal.tenants
    )


def may(principal: Principal, right: Right, tenant: str) -> bool:
    """Whether ``principal`` holds ``right`` in ``tenant`` (its patterns: exact names, and
    trailing-``*`` prefixes)."""
    return right in principal.rights and _reaches(principal, tenant)


def tenant_of(run_id: str, default_tenant: str) -> str:
    """The tenant a runId belongs to: its ``<tenant>/`` segment when that is a tenant id
    (ids.schema.json runId), else ``default_tenant`` (a v1 runId, one segment). The same
    reading as the owner.tenant of app.core.http.snapshot's snapshot."""
    tenant, slash, _ = run_id.partition("/")
    return tenant if slash and _TENANT.fullmatch(tenant) else default_tenant


def authorize(
    principals: Principals,
    presented: str | None,
    right: Right,
    run_id: str,
    default_tenant: str,
) -> Decision:
    """What a request for ``right`` on run ``run_id`` with bearer token ``presented`` gets:
    ``Allowed``; ``Unauthenticated`` (401); ``Unknown`` when the run's tenant is none of the
    caller's (answer it as the unknown run's 404); ``Forbidden`` when it is, but the right is
    missing (403). Whether the run exists plays no part: check this before reading the run."""
    who = authenticate(principals, presented)
    if isinstance(who, Unauthenticated):
        return who
    tenant = tenant_of(run_id, default_tenant)
    if not _reaches(who, tenant):
        return Unknown()
    if right not in who.rights:
        return Forbidden(who, right)
    return Allowed(who)
