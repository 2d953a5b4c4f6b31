"""The environment variables a2ui-stream reads: one ordered table of (name, default, meaning).

Shared shell module (read by every room; imports nothing of the app). ``app.shell.settings``
parses these variables; ``a2ui-stream config`` prints the table in this order with each
variable's effective value, and the README's settings table lists the same names
(tests/shell/test_settings.py checks that they agree). One row per variable, its meaning on
one line (E501 is ignored for this file: pyproject.toml).
"""

from __future__ import annotations

__all__ = ["VARIABLES"]

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
        "Milliseconds the validator gathers a batch for at most, counted from where the last batch was gathered (or until 5000 records): one round of transactions per batch. Longer: fewer, larger transactions (less CPU per envelope below saturation) and a higher median admission-to-log latency by about half the change; measured at 1000/s, 20 against 10: 20% less CPU per envelope, p50 and p99 about 5 ms higher (docs/pipeline.md, The batch window's trade). 1 to 1000.",
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
        "A2UI_STREAM_HEAP_TRIM_MB",
        "32",
        "Give freed memory back to the system (glibc's malloc_trim) once this many MiB lie free in the worker's heap and its resident set has grown by as much over its lowest since the last trim, checked every 5 s: after a catch-up (a worker that joins or restarts and reads history) glibc keeps what was freed between chunks in use (docs/scale.md). 0: never. 0 to 65536.",
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
