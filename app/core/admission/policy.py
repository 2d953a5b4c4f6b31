"""The host policy: which envelope kinds this host admits, at which per-kind floor, how strictly,
and which SR-1 secrets each run registered.

Role: plain configuration data read by ``app.core.admission.decision.decide``. The shell builds it
from settings (and from the run's BYOK vault for secrets); the core never reads the environment.

May import: the standard library and app.core.admission.limits (pure data).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal

from app.core.admission.limits import Limits

__all__ = [
    "SURFACE_KIND",
    "UNIVERSAL_KINDS",
    "SURFACE_VERSIONS",
    "Strictness",
    "HostPolicy",
]

SURFACE_KIND: Final = "ui.a2ui-surface"

# openwop-a2ui.md §2: universal kinds are always known, whatever the catalog says.
UNIVERSAL_KINDS: Final[frozenset[str]] = frozenset(
    {"clarification.request", "schema.request", "schema.response", "error"}
)

# The per-kind schema versions of ui.a2ui-surface this host can validate (§1 version map):
# 0 / 1 select payloadV1, 2 selects payloadV2.
SURFACE_VERSIONS: Final[frozenset[int]] = frozenset({0, 1, 2})

Strictness = Literal["warn", "strict"]


def _default_versions() -> Mapping[str, int]:
    # The v2 host "advertises version 2 by its floor" (openwop-a2ui.md §5).
    return MappingProxyType({SURFACE_KIND: 2})


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """What this host admits.

    - ``kinds``: ``supportedEnvelopes.kinds``. Universal kinds are known even when absent; an
      empty tuple refuses every non-universal kind (§5 (1): absent is not unrestricted).
      Only ``ui.a2ui-surface`` can be listed: it is the only kind this host can validate, and
      listing a kind we cannot validate would admit it unchecked.
    - ``schema_versions``: ``schemaVersions.kinds``, the per-kind floor; an unlisted kind has
      floor 0 (§5 (2)).
    - ``strictness``: ``envelopeStrictness.mode``; ``"warn"`` is the default (§5 (3)).
    - ``secrets``: SR-1 registrations, ``{runId: ((secretId, plaintext value), ...)}``
      (openwop-a2ui.md §14: values the run's vault resolved at user/tenant/run scope). A run
      without an entry has no secrets. The shell replaces the policy (``dataclasses.replace``)
      when a run registers a new secret; decisions already made are not revisited.
    - ``limits``: the resource limits of the ``limits`` step (``app.core.admission.limits.Limits``;
      docs/admission.md "Limits").
    - ``command_key``: the gateway key host commands are sealed with
    (app.core.admission.command_seal);
      ``None`` accepts no host command at all. Neither it nor ``secrets`` is in the repr, so
      a policy printed in a log or a traceback shows no secret.
    """

    kinds: tuple[str, ...] = (SURFACE_KIND,)
    schema_versions: Mapping[str, int] = field(default_factory=_default_versions)
    strictness: Strictness = "warn"
    secrets: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict, repr=False)
    limits: Limits = Limits()
    command_key: bytes | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # Operator errors: refuse to build a policy the core cannot honour.
        if self.strictness not in ("warn", "strict"):
            raise ValueError(f"strictness must be 'warn' or 'strict', not {self.strictness!r}")
        unknown = [k for k in self.kinds if k != SURFACE_KIND and k not in UNIVERSAL_KINDS]
        if unknown:
            raise ValueError(
                f"this host can only validate {SURFACE_KIND!r}; cannot admit kinds {unknown!r}"
            )
        floor = self.schema_versions.get(SURFACE_KIND, 0)
        if floor not in SURFACE_VERSIONS:
            raise ValueError(
                f"schema_versions[{SURFACE_KIND!r}] must be one of {sorted(SURFACE_VERSIONS)}, "
                f"not {floor!r}"
            )
        object.__setattr__(self, "schema_versions", MappingProxyType(dict(self.schema_versions)))
        object.__setattr__(
            self,
            "secrets",
            MappingProxyType({r: tuple(map(tuple, s)) for r, s in self.secrets.items()}),
        )

    def knows(self, kind: str) -> bool:
        """§5 (1): universal kinds, or members of the catalog."""
        return kind in UNIVERSAL_KINDS or kind in self.kinds

    def floor(self, kind: str) -> int:
        """§5 (2): the advertised per-kind version, 0 when the kind is not listed."""
        return self.schema_versions.get(kind, 0)

    def secrets_for(
        self, run_id: str, lineage: tuple[str, ...] = ()
    ) -> tuple[tuple[str, str], ...]:
        """The run's SR-1 registrations, those of the runs it was forked from (``lineage``,
        ``RunState.lifecycle.lineage``: a fork inherits its ancestors' secrets), and the
        deployment-wide ones (key ``"*"``)."""
        secrets = self.secrets
        if not secrets:
            return ()
        found = secrets.get(run_id, ())
        for ancestor in lineage:
            found += secrets.get(ancestor, ())
        return found + secrets.get("*", ())
