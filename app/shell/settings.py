"""Settings from the environment: the one place that reads ``A2UI_STREAM_*`` variables.

Every variable is listed in ``VARIABLES`` (name, default, meaning) and in the README's table;
tests/shell/test_settings.py checks that the two agree.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.core.command_seal import MIN_KEY_BYTES
from app.core.http_guard import is_loopback_bind
from app.core.limits import DEPTH_CEILING, DEPTH_FLOOR, Limits
from app.core.ownership import advertised_url_problem
from app.shell.errors import OperatorError

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

# (name, default, meaning). Defaults are for production, except where `a2ui-stream up` or the
# tests set something else explicitly.
VARIABLES: tuple[tuple[str, str, str], ...] = (
    (
        "KAFKA_BOOTSTRAP",
        "",
        "Kafka bootstrap servers (host:port,...). Unset: the harness starts a broker.",
    ),
    (
        "A2UI_STREAM_BROKER",
        "auto",
        "Force the harness path: auto, external, docker, kafka (local Apache Kafka) or tansu.",
    ),
    (
        "A2UI_STREAM_REQUIRE_KAFKA",
        "0",
        "1: a test that needs a broker feature fails instead of skipping, and falling back to tansu is an error (set by .ci/run).",
    ),
    (
        "A2UI_STREAM_CACHE",
        "~/.cache/a2ui-stream",
        "Where the Apache Kafka jars are cached (outside the clone).",
    ),
    ("A2UI_STREAM_TOPIC_PREFIX", "a2ui.", "Prefix of every topic name."),
    (
        "A2UI_STREAM_PARTITIONS",
        "6",
        "Partitions of the co-partitioned run topics (admission, log, dead letters).",
    ),
    ("A2UI_STREAM_REPLICATION", "1", "Replication factor of every topic."),
    (
        "A2UI_STREAM_APP_ID",
        "a2ui-stream",
        "Faust app id: the consumer group and the prefix of internal topics.",
    ),
    (
        "A2UI_STREAM_WEB_HOST",
        "127.0.0.1",
        "Address the worker's web server binds (and listens on: only this one). 0.0.0.0 or another non-loopback address needs A2UI_STREAM_HTTP_AUTH=on.",
    ),
    (
        "A2UI_STREAM_WEB_PORT",
        "6066",
        "Port of the worker's web server (/health, /metrics, OpenWOP HTTP).",
    ),
    (
        "A2UI_STREAM_DATA_DIR",
        "./.a2ui-stream",
        "Worker data directory (Faust table state, and the run store of the partitions this worker owns: run-store/).",
    ),
    (
        "A2UI_STREAM_ADVERTISED_URL",
        "",
        "The address other workers forward this worker's runs' requests to (scheme://host:port, as Kafka Streams' application.server), advertised on the owners topic for the partitions its validator owns. Default: http://<A2UI_STREAM_WEB_HOST>:<A2UI_STREAM_WEB_PORT> (the host name when the web host is 0.0.0.0 or ::). Set it when workers reach each other through another name or port.",
    ),
    (
        "A2UI_STREAM_RUN_CACHE_MB",
        "64",
        "Memory for recently read runs (their events, decoded) in front of the run store; runs being streamed stay in memory while read. 1 to 65536.",
    ),
    (
        "A2UI_STREAM_BATCH_MS",
        "10",
        "Milliseconds the validator gathers a batch for at most (or until 5000 records): one round of transactions per batch. Longer: fewer, larger transactions (less CPU per envelope at a low rate) and a higher admission-to-log latency by about as much (docs/pipeline.md, Latency). 1 to 1000.",
    ),
    (
        "A2UI_STREAM_COMMIT_INTERVAL_MS",
        "1000",
        "Milliseconds between two run-state changelog flushes of a partition, and at most between two commits of its admission offset (Kafka Streams' commit.interval.ms): a restart folds at most this much of the log tail; the group's committed offsets trail the decisions by about as much. 0: both with every batch. 0 to 60000.",
    ),
    (
        "A2UI_STREAM_VALIDATOR_CACHE_RUNS",
        "2000",
        "Run states the validator keeps in memory, of the admission partitions it owns: past it, the least recently changed ones that the run-state changelog already holds wait in a local store (A2UI_STREAM_DATA_DIR/validator-state/) and come back when a record for their run comes. 0: every state in memory. 0 to 10000000.",
    ),
    (
        "A2UI_STREAM_PROJECTOR_CACHE_SURFACES",
        "2000",
        "Materialized surfaces the projector keeps, of the log partitions it owns: past it, the least recently changed runs are evicted and rebuilt from the run store (or the log) when a new event, a resync or a new subscriber needs them. 1 to 10000000.",
    ),
    (
        "A2UI_STREAM_FAST_GROUPS",
        "0",
        "1: short consumer-group timeouts (joins in seconds); for laptops and tests, not production.",
    ),
    (
        "A2UI_STREAM_FLOOR",
        "2",
        "Advertised schema version (floor) of ui.a2ui-surface: 2 (A2UI v0.9 profile) or 1 (v1 only).",
    ),
    (
        "A2UI_STREAM_STRICTNESS",
        "warn",
        "Envelope strictness below the floor: warn (validate as the floor version) or strict (refuse).",
    ),
    ("A2UI_STREAM_LOG_LEVEL", "info", "Log level of the worker: debug, info, warning, error."),
    (
        "A2UI_STREAM_WORKER_ID",
        "",
        "Stable id of this worker (default: the host name); the validator probes transactions with it at start. Fencing is per admission partition (transactional id <app id>-validator-p<n>, whoever owns the partition), not per worker. Give every worker of a group its own.",
    ),
    (
        "A2UI_STREAM_TRANSACTIONS",
        "auto",
        "Kafka transactions for the validator: auto (use them when the broker grants them), on (required), off.",
    ),
    (
        "A2UI_STREAM_ROLES",
        "validator,projector",
        "What this worker runs: validator (admission -> log), projector (log -> subscriber topics), or both. Split them to scale each stage on its own processes.",
    ),
    (
        "A2UI_STREAM_HTTP_TOKENS",
        "",
        "Bearer tokens (comma-separated) accepted by the OpenWOP HTTP API. Unset on a worker: every run endpoint answers 401 until one is set. Never logged; `a2ui-stream config` shows only how many are set.",
    ),
    (
        "A2UI_STREAM_HTTP_TOKENS_FILE",
        "",
        'Tenant-scoped tokens (not yet enforced by the routes): a JSON file {"principals": [{name, token_sha256, tenants, rights}]} giving each token (stored as its SHA-256 only) the tenants it may reach (exact ids or prefixes ending in *) and its rights (read, emit, approve, act, admin); docs/http.md. Read at start; never logged. A2UI_STREAM_HTTP_TOKENS stays: every tenant, every right.',
    ),
    (
        "A2UI_STREAM_HTTP_AUTH",
        "on",
        "on: the OpenWOP HTTP API requires a bearer token. off: no token, only on a loopback A2UI_STREAM_WEB_HOST (a worker refuses to start otherwise), and only requests to a loopback Host name (127.0.0.1, localhost, [::1]) are answered. `a2ui-stream up` (the embedded laptop mode) sets off; nothing else should.",
    ),
    (
        "A2UI_STREAM_HTTP_READ_TIMEOUT_SECONDS",
        "15",
        "Seconds a client has to send a request's line and headers (from connecting, or from the previous response on a kept-alive connection; also how long an idle connection stays open) and, again, its body. A slower connection is closed; a slow body is answered 408.",
    ),
    (
        "A2UI_STREAM_GATEWAY_KEY",
        "",
        "The key (32+ characters) the HTTP gateway seals host commands with (run create and cancel, interrupt resolve, actions, fork) and the validator verifies: a command record without a valid seal is refused (forbidden, rule command-gateway), so a producer that may write the admission topic cannot approve a gate or forge a click. Unset: a key kept in A2UI_STREAM_DATA_DIR/gateway.key (made once). Every worker of a deployment needs the same key. Never logged.",
    ),
    (
        "A2UI_STREAM_SEAMS",
        "0",
        "1: serve the conformance seams (POST /v1/host/sample/a2ui/emit-surface, POST /conformance/seams/sample/a2ui/emit-surface, and at floor 1 POST /v1/host/sample/envelope/accept) and fixtures (conformance-approval, conformance-noop, conformance-cancellable) and advertise them. Test hosts only.",
    ),
    (
        "A2UI_STREAM_DELTA_TRANSPORT",
        "1",
        "1: advertise and serve RFC 0114 delta frames on GET /v1/runs/{runId}/events?a2uiDelta=1 at floor 1 (v1 discovery only; never at floor 2, where v1 surfaces are refused; deprecated in v2).",
    ),
    (
        "A2UI_STREAM_HTTP_WAIT_SECONDS",
        "10",
        "How long an HTTP admission (POST .../envelopes, the emit seams, :fork) waits for the validator's outcome before answering 504.",
    ),
    (
        "A2UI_STREAM_SECRETS_FILE",
        "",
        'SR-1: a JSON file {runId or "*": [{secretId, value}]} of registered secrets (values of 8+ characters) that are replaced by [REDACTED:<secretId>] in recorded events, resume values, frames and dead letters. Read at start; never logged.',
    ),
    (
        "A2UI_STREAM_SSE_KEEPALIVE_SECONDS",
        "15",
        "Seconds between SSE keep-alive comments on an idle run stream (the spec asks for at most 30).",
    ),
    (
        "A2UI_STREAM_MAX_RECORD_BYTES",
        "1048576",
        "Admission records larger than this are dead-lettered before parsing (record_too_large), and HTTP request bodies that would make one are answered 413 payload_too_large (the web server reads at most this plus 64 KiB). At most 4 MiB: a dead letter keeps the original bytes (base64) and must fit the dead-letter topic's 8 MiB max.message.bytes.",
    ),
    (
        "A2UI_STREAM_MAX_DEPTH",
        "64",
        "Deepest nesting of objects and arrays in an admission record (the record is level 1), in what the schemas leave open (data-model values, universal payloads; Button context arrays with A2UI_STREAM_MAX_CHILDREN_DEPTH set); deeper is record_limit_exceeded, rule depth. 16 to 250.",
    ),
    (
        "A2UI_STREAM_MAX_STRING_CHARS",
        "65536",
        "Longest string or object key (characters) where the schemas set no maxLength; longer is record_limit_exceeded, rule string-chars. 1024 to 4194304.",
    ),
    (
        "A2UI_STREAM_MAX_COMPONENTS",
        "2048",
        "Most components across the updateComponents messages of one envelope (the schema allows 512 per message); more is record_limit_exceeded, rule components. 16 to 32768.",
    ),
    (
        "A2UI_STREAM_MAX_CHILDREN_DEPTH",
        "0",
        "0: no chain-depth walk (the default, for throughput). 3 to 32768 (e.g. 64): refuse a children/child chain longer than this within one envelope (record_limit_exceeded, rule children-depth), and bound Button context arrays by the depth and string limits. Cycles (envelope_invalid, rule children-cycle) are refused whatever this says, also when a later envelope closes them.",
    ),
)
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
