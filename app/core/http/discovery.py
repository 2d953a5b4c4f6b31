"""The discovery document ``GET /.well-known/openwop`` (openwop-a2ui.md §12, §13), one per
major: the open v1 document and the closed v2 one, chosen by the ``OpenWOP-Version`` header.

Role: plain data built from ``DiscoveryConfig``; the shell builds the config from settings and
serves ``document_for(request.headers.get("OpenWOP-Version"), config)`` as JSON. What is
advertised must be what the admission path enforces (``app.core.admission.policy``): the same kinds,
the same floor, the same strictness.

May import: the standard library, ``app.core.admission.policy`` and ``app.core.http.run_list``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from app.core.admission.policy import SURFACE_KIND, SURFACE_VERSIONS, UNIVERSAL_KINDS
from app.core.http.run_list import FILTERS, MAX_LIMIT

__all__ = [
    "HEADERS",
    "IMPLEMENTATION_NAME",
    "PREFERRED_VERSION",
    "PROTOCOL_VERSIONS",
    "SEAMS_PROFILE",
    "V1_PROTOCOL_VERSION",
    "DiscoveryConfig",
    "document_for",
    "requested_major",
    "serves_delta_transport",
    "serves_envelope_accept",
    "v1_document",
    "v2_document",
]

IMPLEMENTATION_NAME = "a2ui-stream"
V1_PROTOCOL_VERSION = "1.0"
# RFC 0165 §A: every <major>.<minor> this host speaks, newest first.
PROTOCOL_VERSIONS = ("2.0", V1_PROTOCOL_VERSION)
# RFC 0179 / versioning.md §1.3: the version a header-less request gets (see document_for).
PREFERRED_VERSION = V1_PROTOCOL_VERSION
SEAMS_PROFILE = "openwop-conformance-seams-v2"  # §12: v2 conformance.seamsProfile is a const
_SINCE, _UNTIL = "2.0", "2.1"  # §12: a record that is not stable needs ``until``
# v1 capabilities require ``limits`` (three counters). This host runs no model: it never asks
# for clarifications or schema rounds and has no chat turn, so all three are 0, as the v2
# reference host advertises them.
_V1_LIMITS = {"clarificationRounds": 0, "schemaRounds": 0, "envelopesPerTurn": 0}
# The response headers of every discovery answer. capabilities.md §4 (the suite's
# ``discovery`` scenario): the document SHOULD carry Cache-Control so clients cache it. It holds
# configuration only (no run data, no caller-specific view: it is served without a token), so
# any cache may keep it; a minute bounds how long a redeployed floor or strictness goes unseen.
# The document depends on the ``OpenWOP-Version`` request header (v1 or v2), so a cache must
# key on it (RFC 9110 §12.5.5).
HEADERS: Mapping[str, str] = MappingProxyType(
    {"Cache-Control": "public, max-age=60", "Vary": "OpenWOP-Version"}
)
# ``OpenWOP-Version``: ``<major>`` or ``<major>.<minor>`` (RFC 0149 §C grammar, the minor
# optional), or ``<major>.x``; surrounding whitespace is not part of the value (RFC 9110 §5.5).
_VERSION = re.compile(r"\s*(0|[1-9][0-9]{0,8})(?:\.(?:0|[1-9][0-9]{0,8}|x))?\s*")


@dataclass(frozen=True, slots=True, kw_only=True)
class DiscoveryConfig:
    """What this host advertises (keyword-only: two booleans in a row are easy to swap).

    - ``floor``: ``schemaVersions`` of ``ui.a2ui-surface`` (the admission floor, §5 (2));
    - ``strictness``: ``envelopeStrictness`` (``"warn"`` or ``"strict"``, §5 (3));
    - ``seams``: the conformance seams are mounted (§13), so v2 advertises the seams profile
      and the fixtures;
    - ``delta_transport``: the RFC 0114 delta transport is asked for (A2UI_STREAM_DELTA_TRANSPORT);
      it is advertised (v1 ``a2uiSurface.deltaTransport``, §10; never on v2) and served only
      where it works, see ``serves_delta_transport``;
    - ``fixtures``: fixture workflow ids served to the conformance suite;
    - ``version``: this application's version (``implementation.version``).
    """

    floor: int
    strictness: str
    seams: bool
    delta_transport: bool
    fixtures: tuple[str, ...] = ()
    version: str

    def __post_init__(self) -> None:
        # Operator errors: never advertise what the admission path cannot honour.
        if self.strictness not in ("warn", "strict"):
            raise ValueError(f"strictness must be 'warn' or 'strict', not {self.strictness!r}")
        if isinstance(self.floor, bool) or self.floor not in SURFACE_VERSIONS:
            raise ValueError(f"floor must be one of {sorted(SURFACE_VERSIONS)}, not {self.floor!r}")
        object.__setattr__(self, "fixtures", tuple(self.fixtures))


def serves_delta_transport(config: DiscoveryConfig) -> bool:
    """Whether the RFC 0114 delta transport is advertised and served: asked for, and the floor
    admits v1 surfaces (below 2). At floor 2 the v1 seam and admission refuse every v1 surface,
    so the suite's live delta legs cannot work, and RFC 0209 (§10): a v2 host SHOULD NOT
    advertise the facet. One predicate for the advert and the serving path, so they never
    disagree."""
    return config.delta_transport and config.floor < 2


ENVELOPE_ACCEPT_SEAM = "/v1/host/sample/envelope/accept"
V1_EMIT_SEAM = "/v1/host/sample/a2ui/emit-surface"


def serves_envelope_accept(config: DiscoveryConfig) -> bool:
    """Whether the v1 envelope accept seam (app.core.http.envelope_accept) is served and advertised:
    with the seams, and where the floor admits v1 surfaces (below 2). The suite's v1 A2UI
    legs send schemaVersion-1 surfaces through it; at floor 2 the production path refuses
    every one of them, so the seam could only give answers the legs read as failures (the
    replay leg's first surface is never recorded, so no correlation conflict follows). A 404
    tells the suite the seam is absent (inapplicable). One predicate for the advert and the
    route, as ``serves_delta_transport``."""
    return config.seams and config.floor < 2


def _implementation(config: DiscoveryConfig) -> dict[str, str]:
    return {"name": IMPLEMENTATION_NAME, "version": config.version}


def v1_document(config: DiscoveryConfig) -> dict[str, Any]:
    """The v1 document (open root; v1 capabilities.schema.json). ``supportedEnvelopes`` lists
    the universal kinds too: §12 requires them whenever the list is non-empty. The floor and
    strictness are plain values in v1."""
    doc: dict[str, Any] = {
        "protocolVersion": V1_PROTOCOL_VERSION,
        "protocolVersions": list(PROTOCOL_VERSIONS),
        "preferredVersion": PREFERRED_VERSION,
        "implementation": _implementation(config),
        "supportedEnvelopes": sorted(UNIVERSAL_KINDS | {SURFACE_KIND}),
        "schemaVersions": {SURFACE_KIND: config.floor},
        "envelopeStrictness": config.strictness,
        "limits": dict(_V1_LIMITS),
        "a2uiSurface": {"deltaTransport": serves_delta_transport(config)},
    }
    if config.seams:
        doc["fixtures"] = list(config.fixtures)
        # the v1 seams this host serves (host-sample-test-seams.md; the v1 root is open)
        doc["seams"] = [V1_EMIT_SEAM] + (
            [ENVELOPE_ACCEPT_SEAM] if serves_envelope_accept(config) else []
        )
    return doc


def _stable(witness: str, **facets: Any) -> dict[str, Any]:
    return {"status": "stable", "since": _SINCE, "witness": witness, **facets}


def _experimental(witness: str, **facets: Any) -> dict[str, Any]:
    return {
        "status": "experimental",
        "since": _SINCE,
        "until": _UNTIL,
        "witness": witness,
        **facets,
    }


def v2_document(config: DiscoveryConfig) -> dict[str, Any]:
    """The closed v2 document: family records ``{status, since, until?, witness, ...facets}``
    (§12). ``supportedEnvelopes.kinds`` lists only ``ui.a2ui-surface``: universal kinds "need
    not be listed" (facet seat). The RFC 0114 ``a2uiSurface.deltaTransport`` facet is deprecated
    for major 2 (§10) and never appears here.

    ``runList`` (RFC 0182; schemas/v2/capabilities.schema.json ``runList``: status, since,
    witness, ``maxPageSize`` 1..1000 required, ``filters`` a subset of workflowId/status; the
    corpus's maturity is experimental): ``GET /runs`` is served at every configuration (the
    route table's ``list_runs`` is ``when="always"``), so the record is always there, and it
    says what ``app.core.http.run_list`` enforces: pages of at most ``MAX_LIMIT`` rows, filtered
    by ``FILTERS``. runs.md §Surface: an unadvertised gated operation answers 404, so a host
    that serves the listing must advertise it.

    No ``replay`` record, although ``POST /runs/{runId}:fork`` is served: the record promises
    what this host does not give (replay.md: ``GET /host/effect-seams``, no fan-out of a fork's
    fixed history to outward consumers, re-execution from ``fromSeq``); docs/http.md "Fork"."""
    doc: dict[str, Any] = {
        "protocolVersions": list(PROTOCOL_VERSIONS),
        "preferredVersion": PREFERRED_VERSION,
        "implementation": _implementation(config),
        "supportedEnvelopes": _stable("witnessable-gated", kinds=[SURFACE_KIND]),
        "schemaVersions": _stable("witnessable-gated", kinds={SURFACE_KIND: config.floor}),
        "envelopeStrictness": _experimental("claims-check", mode=config.strictness),
        "runList": _experimental("witnessable-gated", maxPageSize=MAX_LIMIT, filters=list(FILTERS)),
    }
    if config.seams:
        doc["conformance"] = {"seamsProfile": SEAMS_PROFILE}
        doc["fixtures"] = list(config.fixtures)
    return doc


def requested_major(version_header: str | None) -> int | None:
    """The major an ``OpenWOP-Version`` header asks for (``2``, ``2.0``, ``2.x`` -> 2), or None
    when the header is absent, empty or malformed."""
    if version_header is None:
        return None
    match = _VERSION.fullmatch(version_header)
    return int(match.group(1)) if match else None


def document_for(version_header: str | None, config: DiscoveryConfig) -> dict[str, Any]:
    """The document for a request's ``OpenWOP-Version`` header: major 2 -> ``v2_document``;
    absent, major 1, or anything else -> ``v1_document``.

    Why v1 for an unknown or malformed header: v1 is what a header-less request gets
    (``preferredVersion``), and its root is open, so every client can read it and learn from
    ``protocolVersions`` which majors this host speaks. Refusing (406) would leave such a client
    with nothing to negotiate from. A shell that must refuse can test ``requested_major``."""
    if requested_major(version_header) == 2:
        return v2_document(config)
    return v1_document(config)
