"""Sections of the configuration that do not mirror the domain: backends, plugins, scorers, retry,
traces, cache, auth and feature flags (validated pydantic models; unknown keys are errors)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, field_validator

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_STORE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class Section(BaseModel):
    """Base of every section: unknown keys are errors (a misspelt key must not be ignored)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def _check_store(value: str) -> str:
    if not _STORE.match(value):
        raise ValueError("store names use letters, digits, '_', '-' and '.', at most 64 characters")
    return value


#: A store (namespace) name.
StoreName = Annotated[str, AfterValidator(_check_store)]


class SqliteSection(Section):
    """Options of the embedded SQLite backend."""

    path: Path | None = Field(default=None, description="database file; default <data_dir>/memories.db")
    store: StoreName = "default"
    bulk_helper: bool = Field(
        default=True,
        description="plan a large import's links in a helper process on a second core (when there is one)",
    )


class Neo4jSection(Section):
    """Options of the Neo4j backend."""

    uri: str = "bolt://localhost:7687"
    user: str = "neo4j"
    password: SecretStr = SecretStr("")
    database: str = "neo4j"
    store: StoreName = "default"
    max_connection_pool_size: int = Field(default=50, ge=1, le=1000)
    connection_timeout: float = Field(default=10.0, gt=0, le=600, description="seconds to connect")
    connection_acquisition_timeout: float = Field(default=30.0, gt=0, le=600)
    max_transaction_retry_time: float = Field(default=5.0, ge=0, le=600)
    #: None: as the URI scheme says (``+s`` / ``+ssc`` schemes encrypt).
    encrypted: bool | None = None
    #: "system", "all" (trust any certificate) or a list of CA certificate files.
    trusted_certificates: Literal["system", "all"] | list[str] | None = None
    retry_attempts: int = Field(default=3, ge=1, le=10)

    @field_validator("uri")
    @classmethod
    def _uri_scheme(cls, value: str) -> str:
        schemes = ("bolt://", "bolt+s://", "bolt+ssc://", "neo4j://", "neo4j+s://", "neo4j+ssc://")
        if not value.startswith(schemes):
            raise ValueError(f"must start with one of {', '.join(schemes)}")
        return value


class MnemonSection(Section):
    """Options of the Mnemon backend (``$MNEMON_BIN``, else the binary on PATH, else the Go bin folder)."""

    binary: str = "mnemon"
    #: Mnemon's base folder; unset means Mnemon's own default ($MNEMON_DATA_DIR, else ~/.mnemon).
    data_dir: Path | None = None
    store: StoreName = "default"
    #: Let Mnemon's own write-time dedup replace older memories (off: our write path deduplicates).
    diff: bool = False
    #: Create the store when it does not exist; unset creates only the store named "default".
    create: bool | None = None
    timeout_s: float = Field(default=10.0, gt=0, le=300)
    lock_timeout_s: float = Field(default=30.0, gt=0, le=600)
    #: Keyword channel: "index" (stemmed BM25 over the store, in process) or "mnemon" (its `search`).
    search: Literal["index", "mnemon"] = "index"
    #: Extra environment for the binary, e.g. {MNEMON_EMBED_ENDPOINT = "http://127.0.0.1:11434"}.
    environment: dict[str, str] = Field(default_factory=dict)


class McpKgSection(Section):
    """Options of the knowledge-graph MCP server backend (npm ``@modelcontextprotocol/server-memory``)."""

    #: The server's dist/index.js; unset: $MCP_KG_SERVER, else the install of scripts/setup-npm.
    server: Path | None = None
    #: The server's JSONL file; unset: <data_dir>/mcp_kg/<store>.jsonl (one file per store).
    memory_file: Path | None = None
    store: StoreName = "default"
    timeout_s: float = Field(default=10.0, gt=0, le=300)
    lock_timeout_s: float = Field(default=30.0, gt=0, le=600)
    #: Native recall: search_nodes once per query word ("terms") or once with the whole text ("literal").
    recall: Literal["terms", "literal"] = "terms"
    #: Entity type of the entities our writes create.
    entity_type: str = Field(default="entity", min_length=1, max_length=100)


class BackendSection(Section):
    """Which backend to use and the options of each."""

    name: str = Field(default="sqlite", min_length=1, description="a backend registered by a plugin")
    memory: dict[str, Any] = Field(default_factory=dict)
    sqlite: SqliteSection = SqliteSection()
    neo4j: Neo4jSection = Neo4jSection()
    mnemon: MnemonSection = MnemonSection()
    mcp_kg: McpKgSection = McpKgSection()
    #: Options of backends added by third-party plugins, by backend name.
    extra: dict[str, dict[str, Any]] = Field(default_factory=dict)


class PluginsSection(Section):
    """Third-party plugins to load; ``allow`` unset loads every installed one (built-ins always load)."""

    allow: list[str] | None = None


class ScorersSection(Section):
    """Plugin ranking signals: which are on (unset = every registered one) and their options."""

    enabled: list[str] | None = None
    options: dict[str, dict[str, Any]] = Field(default_factory=dict)


class ChannelsSection(Section):
    """Plugin retrieval channels (e.g. a dense one): off unless named in ``enabled``."""

    enabled: list[str] = Field(default_factory=list)
    #: Fusion weight per enabled channel (default 1.0, the keyword channel's); 0 turns it off.
    weights: dict[str, float] = Field(default_factory=dict)
    options: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator("weights")
    @classmethod
    def _weights_valid(cls, value: dict[str, float]) -> dict[str, float]:
        for channel, weight in value.items():
            if not 0 <= weight <= 10:
                raise ValueError(f"{channel} must lie in [0, 10], got {weight}")
        return value


class RetrySection(Section):
    """How a retryable backend failure (BackendUnavailable) is retried."""

    attempts: int = Field(default=3, ge=1, le=10)
    backoff_s: float = Field(default=0.2, ge=0, le=30)
    max_backoff_s: float = Field(default=2.0, ge=0, le=120)


class TracesSection(Section):
    """Explain traces: how much they hold, how many are kept, where."""

    verbosity: Literal["basic", "full"] = "basic"
    retention: int = Field(default=1000, ge=0, le=1_000_000)
    path: Path | None = Field(default=None, description="trace database; default <data_dir>/traces.db")


class CacheSection(Section):
    """Time-to-live of in-process caches, in seconds (0 disables)."""

    known_entities_ttl_s: float = Field(default=300.0, ge=0, le=86400)
    #: Identical reads (search, context, expand) of a store within this many seconds are answered
    #: from memory; any write through this process clears the store's answers. Writes by another
    #: process are seen after at most this long.
    reads_ttl_s: float = Field(default=10.0, ge=0, le=3600)
    #: Answers kept per store at most (least recently used dropped first).
    reads_max_entries: int = Field(default=512, ge=1, le=100_000)


class HttpSection(Section):
    """Bounds of ``serve --http`` that protect the server from slow or oversized requests."""

    #: A connection must send a request's headers within this many seconds (slowloris guard).
    header_timeout_s: float = Field(default=10.0, gt=0, le=300)
    max_body_bytes: int = Field(default=1_048_576, ge=1024, le=64 * 1_048_576)
    max_json_depth: int = Field(default=64, ge=4, le=1000)
    #: Server processes sharing the listening socket (each with its own store connections; SQLite
    #: serialises their writes). 1 = one process.
    workers: int = Field(default=1, ge=1, le=64)


class AuthToken(Section):
    """An MCP bearer token, stored as its SHA-256 hex digest (never in clear)."""

    name: str = Field(min_length=1, max_length=64)
    sha256: SecretStr
    stores: list[StoreName] = Field(default_factory=lambda: ["default"])
    write: bool = False

    @field_validator("sha256")
    @classmethod
    def _is_digest(cls, value: SecretStr) -> SecretStr:
        if not _SHA256.match(value.get_secret_value()):
            raise ValueError(
                "must be the 64 hex digits of sha256(token); see `orchestrator config hash-token`"
            )
        return value


class AuthSection(Section):
    """Who may call the HTTP MCP server."""

    tokens: list[AuthToken] = Field(default_factory=list)


class ServerSection(Section):
    """How long an MCP tool call may take before it answers with a clear error (a backend that
    hangs or is down never holds a caller longer), and how many run at once."""

    read_timeout_s: float = Field(default=2.0, gt=0, le=600)
    #: Writes get longer: a timed-out write may still complete, and retrying it is safe (dedup).
    write_timeout_s: float = Field(default=10.0, gt=0, le=600)
    #: Tool calls a server process runs at once; the others wait their turn, first come, first
    #: served, within their deadline. Under more load than the machine can take, a few calls at a
    #: time each finish quickly, where every call at once would all finish late (and many past
    #: their deadline, their work wasted).
    concurrent_calls: int = Field(default=16, ge=1, le=4096)
    #: How long the Python thread running the event loop may keep the interpreter lock when another
    #: thread asks for it (Python's default: 5 ms). SQLite runs a backend's statements on threads of
    #: their own, and a statement takes the lock back after every row it steps; while the loop is busy
    #: with other calls, each of those returns could wait up to this long. Under HTTP load a miss's
    #: statements took p50 100-200 ms (up to 1.2 s) at 5 ms, p50 15-75 ms (up to 0.23 s) at 0.5 ms.
    switch_interval_ms: float = Field(default=0.5, ge=0.05, le=100)


class LogSection(Section):
    """Log lines (JSON on stderr): the lowest level written."""

    #: Unset: ``info`` for ``serve`` (one line per tool call), ``warning`` for every other command.
    level: Literal["debug", "info", "warning", "error"] | None = None


class FeaturesSection(Section):
    """Feature flags."""

    #: Default of ``auto_link`` for writes (CLI ``write``; MCP ``memory_write``).
    auto_link: bool = True
    #: Keep traces in the trace database (``trace show`` / ``replay`` across processes).
    store_traces: bool = True
    #: Offer the MCP session tools (changes, why, session summary).
    session_tools: bool = True
