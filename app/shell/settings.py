"""Settings from the environment: the one place that reads ``A2UI_STREAM_*`` variables.

Every variable is listed in ``VARIABLES`` (name, default, meaning: the table is
``app.shell.settings_table``, importable from here too) and in the README's table;
tests/shell/test_settings.py checks that the two agree. This module parses and checks the
values into ``Settings``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.core.admission.command_seal import MIN_KEY_BYTES
from app.core.admission.limits import DEPTH_CEILING, DEPTH_FLOOR, Limits
from app.core.http.guard import is_loopback_bind
from app.core.runlog.ownership import advertised_url_problem
from app.shell.errors import OperatorError
from app.shell.settings_table import VARIABLES

__all__ = [
    "SECRET_VARIABLES",
    "advertised_url_of",
    "VARIABLES",
    "Settings",
    "check_exposure",
    "floor_and_strictness",
    "load_secrets",
    "load_settings",
    "shown_value",
]

_DEFAULTS = {name: default for name, default, _ in VARIABLES}

# Variables whose values are credentials: `a2ui-stream config` says whether they are set, never
# what they hold. A name that says TOKEN, PASSWORD, SECRET or KEY is treated as one too (so a
# variable added later is masked before anyone remembers to list it), except a *_FILE path:
# the path is fine to show, its content never.
SECRET_VARIABLES: frozenset[str] = frozenset({"A2UI_STREAM_HTTP_TOKENS"})
_SECRET_WORDS = ("TOKEN", "PASSWORD", "SECRET", "KEY")


def _is_secret(name: str) -> bool:
    if name in SECRET_VARIABLES:
        return True
    return not name.endswith("_FILE") and any(word in name for word in _SECRET_WORDS)


def shown_value(name: str, value: str | None, default: str) -> str:
    """How `a2ui-stream config` shows a variable: the value and where it came from, or for a
    credential only whether it is set (and, for the token list, how many tokens it holds)."""
    if value is None:
        return f"{default or '(unset)'} (default)"
    if not _is_secret(name):
        return f"{value} (set)"
    if name == "A2UI_STREAM_HTTP_TOKENS":
        count = len([t for t in value.split(",") if t.strip()])
        return f"(set, {count} token{'' if count == 1 else 's'}; values hidden)"
    return "(set; value hidden)" if value else "(set, empty)"


@dataclass(frozen=True)
class Settings:
    kafka_bootstrap: str
    broker: str
    require_kafka: bool
    topic_prefix: str
    partitions: int
    replication: int
    app_id: str
    web_host: str
    web_port: int
    data_dir: Path
    fast_groups: bool
    floor: int
    strictness: str
    log_level: str
    worker_id: str
    transactions: str
    max_record_bytes: int
    roles: frozenset[str]
    http_tokens: tuple[str, ...] = ()
    http_tokens_file: str = ""
    http_auth: bool = True
    seams: bool = False
    delta_transport: bool = True
    http_wait_seconds: int = 10
    http_read_timeout_seconds: int = 15
    sse_keepalive_seconds: int = 15
    secrets_file: str = ""
    limits: Limits = Limits()
    gateway_key: str = field(default="", repr=False)
    advertised_url: str = ""
    run_cache_mb: int = 64
    projector_cache_surfaces: int = 2_000
    validator_cache_runs: int = 2_000
    batch_ms: int = 10
    commit_interval_ms: int = 1_000
    heap_trim_mb: int = 32


def _int(env: Mapping[str, str], name: str, low: int, high: int) -> int:
    raw = env.get(name, _DEFAULTS[name]).strip()
    try:
        value = int(raw)
    except ValueError as exc:
        raise OperatorError(f"{name}={raw!r} is not an integer") from exc
    if not low <= value <= high:
        raise OperatorError(f"{name}={value} is out of range [{low}, {high}]")
    return value


def _flag(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, _DEFAULTS[name]).strip().lower() in ("1", "true", "yes", "on")


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    value = env.get(name, _DEFAULTS[name]).strip().lower()
    if value not in choices:
        raise OperatorError(f"{name}={value!r} must be one of: {', '.join(choices)}")
    return value


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read the settings; a bad value raises ``OperatorError`` naming the variable."""
    env = os.environ if env is None else env
    settings = Settings(
        kafka_bootstrap=env.get("KAFKA_BOOTSTRAP", "").strip(),
        broker=_choice(env, "A2UI_STREAM_BROKER", ("auto", "external", "docker", "kafka", "tansu")),
        require_kafka=_flag(env, "A2UI_STREAM_REQUIRE_KAFKA"),
        topic_prefix=env.get("A2UI_STREAM_TOPIC_PREFIX", _DEFAULTS["A2UI_STREAM_TOPIC_PREFIX"]),
        partitions=_int(env, "A2UI_STREAM_PARTITIONS", 1, 1024),
        replication=_int(env, "A2UI_STREAM_REPLICATION", 1, 16),
        app_id=env.get("A2UI_STREAM_APP_ID", _DEFAULTS["A2UI_STREAM_APP_ID"]).strip()
        or "a2ui-stream",
        web_host=env.get("A2UI_STREAM_WEB_HOST", _DEFAULTS["A2UI_STREAM_WEB_HOST"]).strip(),
        web_port=_int(env, "A2UI_STREAM_WEB_PORT", 0, 65535),
        data_dir=Path(
            env.get("A2UI_STREAM_DATA_DIR", _DEFAULTS["A2UI_STREAM_DATA_DIR"])
        ).expanduser(),
        fast_groups=_flag(env, "A2UI_STREAM_FAST_GROUPS"),
        floor=_int(env, "A2UI_STREAM_FLOOR", 1, 2),
        strictness=_choice(env, "A2UI_STREAM_STRICTNESS", ("warn", "strict")),
        log_level=_choice(env, "A2UI_STREAM_LOG_LEVEL", ("debug", "info", "warning", "error")),
        worker_id=env.get("A2UI_STREAM_WORKER_ID", "").strip() or socket.gethostname(),
        transactions=_choice(env, "A2UI_STREAM_TRANSACTIONS", ("auto", "on", "off")),
        max_record_bytes=_int(env, "A2UI_STREAM_MAX_RECORD_BYTES", 1024, 4 * 1024 * 1024),
        roles=_roles(env),
        http_tokens=tuple(
            t.strip() for t in env.get("A2UI_STREAM_HTTP_TOKENS", "").split(",") if t.strip()
        ),
        http_tokens_file=env.get("A2UI_STREAM_HTTP_TOKENS_FILE", "").strip(),
        http_auth=_flag(env, "A2UI_STREAM_HTTP_AUTH"),
        seams=_flag(env, "A2UI_STREAM_SEAMS"),
        delta_transport=_flag(env, "A2UI_STREAM_DELTA_TRANSPORT"),
        http_wait_seconds=_int(env, "A2UI_STREAM_HTTP_WAIT_SECONDS", 1, 600),
        http_read_timeout_seconds=_int(env, "A2UI_STREAM_HTTP_READ_TIMEOUT_SECONDS", 1, 300),
        sse_keepalive_seconds=_int(env, "A2UI_STREAM_SSE_KEEPALIVE_SECONDS", 1, 30),
        secrets_file=env.get("A2UI_STREAM_SECRETS_FILE", "").strip(),
        limits=_limits(env),
        gateway_key=_gateway_key(env),
        advertised_url=_advertised_url(env),
        run_cache_mb=_int(env, "A2UI_STREAM_RUN_CACHE_MB", 1, 65536),
        projector_cache_surfaces=_int(env, "A2UI_STREAM_PROJECTOR_CACHE_SURFACES", 1, 10_000_000),
        validator_cache_runs=_int(env, "A2UI_STREAM_VALIDATOR_CACHE_RUNS", 0, 10_000_000),
        batch_ms=_int(env, "A2UI_STREAM_BATCH_MS", 1, 1000),
        commit_interval_ms=_int(env, "A2UI_STREAM_COMMIT_INTERVAL_MS", 0, 60_000),
        heap_trim_mb=_int(env, "A2UI_STREAM_HEAP_TRIM_MB", 0, 65536),
    )
    check_exposure(settings)
    return settings


def _advertised_url(env: Mapping[str, str]) -> str:
    url = env.get("A2UI_STREAM_ADVERTISED_URL", "").strip()
    if not url:
        return ""  # derived from the web host and port: advertised_url_of
    problem = advertised_url_problem(url)
    if problem is not None:
        raise OperatorError(f"A2UI_STREAM_ADVERTISED_URL={url!r}: {problem}")
    return url.rstrip("/")


def advertised_url_of(settings: Settings) -> str:
    """Where other workers reach this one: A2UI_STREAM_ADVERTISED_URL, or the web server's
    own address (the host name when it binds every interface)."""
    if settings.advertised_url:
        return settings.advertised_url
    host = settings.web_host
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = socket.gethostname()
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{settings.web_port}"


def _gateway_key(env: Mapping[str, str]) -> str:
    key = env.get("A2UI_STREAM_GATEWAY_KEY", "").strip()
    if key and len(key) < MIN_KEY_BYTES:
        raise OperatorError(
            f"A2UI_STREAM_GATEWAY_KEY is {len(key)} characters; use at least {MIN_KEY_BYTES} "
            "(e.g. `python3 -c 'import secrets; print(secrets.token_hex(32))'`), the same on "
            "every worker"
        )
    return key


def check_exposure(settings: Settings) -> None:
    """Refuse settings that would serve the HTTP API without a token beyond this machine
    (issue 14 item 4). Checked on loading and again when the worker's app is built."""
    if not settings.http_auth and not is_loopback_bind(settings.web_host):
        raise OperatorError(
            f"A2UI_STREAM_HTTP_AUTH=off with A2UI_STREAM_WEB_HOST={settings.web_host or '(empty)'}"
            " would let anyone on the network admit envelopes and read every run: set "
            "A2UI_STREAM_WEB_HOST=127.0.0.1, or A2UI_STREAM_HTTP_AUTH=on with "
            "A2UI_STREAM_HTTP_TOKENS"
        )


def floor_and_strictness(env: Mapping[str, str] | None = None) -> tuple[int, str]:
    """``(floor, strictness)`` of ui.a2ui-surface as the worker reads them
    (A2UI_STREAM_FLOOR, A2UI_STREAM_STRICTNESS), for ``a2ui-stream check``. A bad value
    raises ``OperatorError`` naming the variable."""
    env = os.environ if env is None else env
    return _int(env, "A2UI_STREAM_FLOOR", 1, 2), _choice(
        env, "A2UI_STREAM_STRICTNESS", ("warn", "strict")
    )


def admission_limits(env: Mapping[str, str] | None = None) -> tuple[int, Limits]:
    """``(max_record_bytes, limits)``: the part of the settings intake and the admission
    decision read, for ``a2ui-stream check`` (which decides as the worker does without needing
    the rest of the worker's configuration). A bad value raises ``OperatorError``."""
    env = os.environ if env is None else env
    return _int(env, "A2UI_STREAM_MAX_RECORD_BYTES", 1024, 4 * 1024 * 1024), _limits(env)


def _limits(env: Mapping[str, str]) -> Limits:
    chain = _int(env, "A2UI_STREAM_MAX_CHILDREN_DEPTH", 0, 32768)
    if chain in (1, 2):
        raise OperatorError(f"A2UI_STREAM_MAX_CHILDREN_DEPTH={chain} must be 0 (off) or at least 3")
    return Limits(
        max_depth=_int(env, "A2UI_STREAM_MAX_DEPTH", DEPTH_FLOOR, DEPTH_CEILING),
        max_string_chars=_int(env, "A2UI_STREAM_MAX_STRING_CHARS", 1024, 4 * 1024 * 1024),
        max_components=_int(env, "A2UI_STREAM_MAX_COMPONENTS", 16, 32768),
        max_children_depth=chain,
    )


def _roles(env: Mapping[str, str]) -> frozenset[str]:
    raw = env.get("A2UI_STREAM_ROLES", _DEFAULTS["A2UI_STREAM_ROLES"])
    roles = frozenset(r.strip().lower() for r in raw.split(",") if r.strip())
    unknown = roles - {"validator", "projector"}
    if not roles or unknown:
        raise OperatorError(
            f"A2UI_STREAM_ROLES={raw!r}: list validator and/or projector, comma-separated"
        )
    return roles


def load_secrets(path: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """The SR-1 registrations in ``path`` (A2UI_STREAM_SECRETS_FILE): ``{runId | "*": [{secretId,
    value}]}``. A bad file raises ``OperatorError`` naming the file, never a value."""
    if not path:
        return {}
    import json

    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError) as exc:
        raise OperatorError(
            f"A2UI_STREAM_SECRETS_FILE={path}: cannot read it as JSON ({type(exc).__name__})"
        ) from None
    if not isinstance(document, dict):
        raise OperatorError(f"A2UI_STREAM_SECRETS_FILE={path}: expected an object by runId")
    secrets: dict[str, tuple[tuple[str, str], ...]] = {}
    for run_id, entries in document.items():
        pairs = []
        for entry in entries if isinstance(entries, list) else ():
            if not (
                isinstance(entry, dict)
                and isinstance(entry.get("secretId"), str)
                and isinstance(entry.get("value"), str)
            ):
                raise OperatorError(
                    f"A2UI_STREAM_SECRETS_FILE={path}: entries of {run_id!r} must be "
                    "{secretId, value} strings"
                )
            pairs.append((entry["secretId"], entry["value"]))
        secrets[str(run_id)] = tuple(pairs)
    return secrets
