"""Configuration: a TOML file plus ``ORCHESTRATOR_*`` environment overrides, validated by pydantic.

Where the file comes from, first match wins: ``--config PATH``, ``$ORCHESTRATOR_CONFIG``, then
``./orchestrator.toml`` (optional). Precedence of values: explicit overrides (CLI flags) > environment
(``ORCHESTRATOR_BACKEND__NAME=neo4j``, nested with ``__``) > file > defaults.
"""

from __future__ import annotations

import hashlib
import os
import re
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from memory_orchestrator.domain.config import (
    DEFAULT_EDGE_WEIGHTS,
    ExpansionLimits,
    PipelineConfig,
    RankingWeights,
)
from memory_orchestrator.ports import EdgeType, Intent, InvalidRequest

ENV_PREFIX = "ORCHESTRATOR_"
CONFIG_ENV = "ORCHESTRATOR_CONFIG"
DEFAULT_CONFIG_NAME = "orchestrator.toml"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_STORE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
#: Defaults come from the domain's own dataclasses (slotted, so read from instances).
_PIPELINE = PipelineConfig()
_EXPANSION = ExpansionLimits()
_WEIGHTS = RankingWeights()
_config_file: ContextVar[Path | None] = ContextVar("orchestrator_config_file", default=None)


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
    """Options of the Mnemon backend (binary on PATH by default)."""

    binary: str = "mnemon"
    data_dir: Path | None = None
    store: StoreName = "default"


class BackendSection(Section):
    """Which backend to use and the options of each."""

    name: str = Field(default="sqlite", min_length=1, description="a backend registered by a plugin")
    memory: dict[str, Any] = Field(default_factory=dict)
    sqlite: SqliteSection = SqliteSection()
    neo4j: Neo4jSection = Neo4jSection()
    mnemon: MnemonSection = MnemonSection()
    #: Options of backends added by third-party plugins, by backend name.
    extra: dict[str, dict[str, Any]] = Field(default_factory=dict)


class PluginsSection(Section):
    """Third-party plugins to load; ``allow`` unset loads every installed one (built-ins always load)."""

    allow: list[str] | None = None


class ScorersSection(Section):
    """Plugin ranking signals: which are on (unset = every registered one) and their options."""

    enabled: list[str] | None = None
    options: dict[str, dict[str, Any]] = Field(default_factory=dict)


class WeightsSection(Section):
    """Weights of the re-ranking formula (see RankingWeights)."""

    relevance: float = Field(default=_WEIGHTS.relevance, ge=0, le=10)
    recency: float = Field(default=_WEIGHTS.recency, ge=0, le=10)
    graph: float = Field(default=_WEIGHTS.graph, ge=0, le=10)
    type_match: float = Field(default=_WEIGHTS.type_match, ge=0, le=10)
    entity: float = Field(default=_WEIGHTS.entity, ge=0, le=10)
    importance: float = Field(default=_WEIGHTS.importance, ge=0, le=10)
    cross_reference: float = Field(default=_WEIGHTS.cross_reference, ge=0, le=10)
    duplication: float = Field(default=_WEIGHTS.duplication, ge=0, le=10)
    noise: float = Field(default=_WEIGHTS.noise, ge=0, le=10)
    superseded_factor: float = Field(default=_WEIGHTS.superseded_factor, ge=0, le=1)


def _default_edge_weights() -> dict[Intent, dict[EdgeType, float]]:
    return {intent: dict(row) for intent, row in DEFAULT_EDGE_WEIGHTS.items()}


class PipelineSection(Section):
    """Mirror of the domain's PipelineConfig (defaults are taken from it)."""

    default_top_k: int = Field(default=_PIPELINE.default_top_k, ge=1, le=1000)
    max_top_k: int = Field(default=_PIPELINE.max_top_k, ge=1, le=1000)
    candidates_per_channel: int = Field(default=_PIPELINE.candidates_per_channel, ge=1, le=1000)
    rrf_k: int = Field(default=_PIPELINE.rrf_k, ge=1, le=1000)
    hops: int = Field(default=_EXPANSION.hops, ge=0, le=5)
    beam_width: int = Field(default=_EXPANSION.beam_width, ge=1, le=200)
    max_visited: int = Field(default=_EXPANSION.max_visited, ge=1, le=10000)
    max_fanout: int = Field(default=_EXPANSION.max_fanout, ge=1, le=500)
    min_path_score: float = Field(default=_EXPANSION.min_path_score, ge=0, le=1)
    hop_decay: float = Field(default=_EXPANSION.hop_decay, ge=0, le=1)
    sibling_decay: float = Field(default=_EXPANSION.sibling_decay, ge=0, le=10)
    min_seed_relevance: float = Field(default=_EXPANSION.min_seed_relevance, ge=0, le=1)
    edge_weights: dict[Intent, dict[EdgeType, float]] = Field(default_factory=_default_edge_weights)
    allowed_edge_types: list[EdgeType] = Field(default_factory=lambda: list(_PIPELINE.allowed_edge_types))
    weights: WeightsSection = WeightsSection()
    recency_half_life_days: float = Field(default=_PIPELINE.recency_half_life_days, gt=0, le=36500)
    dedup_threshold: float = Field(default=_PIPELINE.dedup_threshold, gt=0, le=1)
    write_dedup_threshold: float = Field(default=_PIPELINE.write_dedup_threshold, gt=0, le=1)
    stage_timeout_s: float = Field(default=_PIPELINE.stage_timeout_s, gt=0, le=600)
    min_score: float = Field(default=_PIPELINE.min_score, ge=-10, le=10)
    chars_per_token: float = Field(default=_PIPELINE.chars_per_token, gt=0, le=20)
    max_item_chars: int = Field(default=_PIPELINE.max_item_chars, ge=40, le=100_000)
    passthrough: bool = _PIPELINE.passthrough

    @field_validator("edge_weights")
    @classmethod
    def _weights_in_range(
        cls, value: dict[Intent, dict[EdgeType, float]]
    ) -> dict[Intent, dict[EdgeType, float]]:
        for intent, row in value.items():
            for edge, weight in row.items():
                if not 0.0 <= weight <= 1.0:
                    raise ValueError(f"{intent.value}.{edge.value} must lie in [0, 1], got {weight}")
        merged = _default_edge_weights()
        for intent, row in value.items():
            merged[intent].update(row)
        return merged


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


class FeaturesSection(Section):
    """Feature flags."""

    #: Default of ``auto_link`` for writes (CLI ``write``; MCP ``memory_write``).
    auto_link: bool = True
    #: Keep traces in the trace database (``trace show`` / ``replay`` across processes).
    store_traces: bool = True
    #: Offer the MCP session tools (changes, why, session summary).
    session_tools: bool = True


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "memory-orchestrator"


class Settings(BaseSettings):
    """The effective configuration of one process."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        validate_assignment=True,
    )

    data_dir: Path = Field(default_factory=_default_data_dir)
    default_store: StoreName = "default"
    backend: BackendSection = BackendSection()
    plugins: PluginsSection = PluginsSection()
    scorers: ScorersSection = ScorersSection()
    pipeline: PipelineSection = PipelineSection()
    retry: RetrySection = RetrySection()
    traces: TracesSection = TracesSection()
    cache: CacheSection = CacheSection()
    auth: AuthSection = AuthSection()
    features: FeaturesSection = FeaturesSection()
    #: The file the settings were read from (None when there was none); set by :func:`load_settings`.
    config_file: Path | None = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Explicit values, then the environment, then the TOML file chosen by :func:`load_settings`."""
        path = _config_file.get()
        if path is None:
            return (init_settings, env_settings)
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file=path))

    def backend_options(self, name: str | None = None) -> dict[str, Any]:
        """The options mapping handed to the factory of backend ``name`` (default: the configured one)."""
        name = name or self.backend.name
        if name == "sqlite":
            section = self.backend.sqlite
            return {"path": str(section.path or self.data_dir / "memories.db"), "store": section.store}
        if name == "neo4j":
            options = self.backend.neo4j.model_dump()
            options["password"] = self.backend.neo4j.password.get_secret_value()
            return options
        if name == "mnemon":
            options = self.backend.mnemon.model_dump()
            options["data_dir"] = str(self.backend.mnemon.data_dir or self.data_dir / "mnemon")
            return options
        if name == "memory":
            return dict(self.backend.memory)
        return dict(self.backend.extra.get(name, {}))

    def trace_path(self) -> Path:
        """Where the trace store lives."""
        return self.traces.path or self.data_dir / "traces.db"

    def pipeline_config(self) -> PipelineConfig:
        """The domain's PipelineConfig built from the ``[pipeline]`` and ``[traces]`` sections."""
        section = self.pipeline
        return PipelineConfig(
            default_top_k=section.default_top_k,
            max_top_k=section.max_top_k,
            candidates_per_channel=section.candidates_per_channel,
            rrf_k=section.rrf_k,
            edge_weights=section.edge_weights,
            allowed_edge_types=tuple(section.allowed_edge_types),
            expansion=ExpansionLimits(
                hops=section.hops,
                beam_width=section.beam_width,
                max_visited=section.max_visited,
                max_fanout=section.max_fanout,
                min_path_score=section.min_path_score,
                hop_decay=section.hop_decay,
                sibling_decay=section.sibling_decay,
                min_seed_relevance=section.min_seed_relevance,
            ),
            weights=RankingWeights(**section.weights.model_dump()),
            recency_half_life_days=section.recency_half_life_days,
            dedup_threshold=section.dedup_threshold,
            write_dedup_threshold=section.write_dedup_threshold,
            stage_timeout_s=section.stage_timeout_s,
            min_score=section.min_score,
            chars_per_token=section.chars_per_token,
            max_item_chars=section.max_item_chars,
            passthrough=section.passthrough,
            trace_retention=self.traces.retention,
            trace_verbosity=self.traces.verbosity,
            known_entities_ttl_s=self.cache.known_entities_ttl_s,
        )

    def masked(self) -> dict[str, Any]:
        """The effective configuration as JSON-safe data with every secret masked."""
        return self.model_dump(mode="json")


def find_config_file(explicit: Path | str | None = None) -> Path | None:
    """The configuration file to read: ``explicit``, ``$ORCHESTRATOR_CONFIG`` or ``./orchestrator.toml``.

    An explicitly named file (argument or environment) must exist; the default one is optional.
    """
    named = explicit if explicit not in (None, "") else os.environ.get(CONFIG_ENV) or None
    if named is not None:
        path = Path(named).expanduser()
        if not path.is_file():
            raise InvalidRequest(f"configuration file not found: {path}")
        return path
    default = Path.cwd() / DEFAULT_CONFIG_NAME
    return default if default.is_file() else None


def load_settings(config: Path | str | None = None, **overrides: Any) -> Settings:
    """Read and validate the configuration; every problem becomes one ``InvalidRequest``."""
    path = find_config_file(config)
    token = _config_file.set(path)
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        raise InvalidRequest(_describe(exc, path)) from exc
    except (OSError, ValueError) as exc:
        # A malformed TOML file surfaces as TOMLDecodeError (a ValueError) while reading sources.
        raise InvalidRequest(f"cannot read configuration {path}: {exc}") from exc
    finally:
        _config_file.reset(token)
    settings.config_file = path
    return settings


def _describe(exc: ValidationError, path: Path | None) -> str:
    where = f" ({path})" if path else ""
    problems = []
    for error in exc.errors():
        location = ".".join(str(part) for part in error["loc"]) or "settings"
        problems.append(f"{location}: {error['msg']}")
    return f"invalid configuration{where}: " + "; ".join(problems)


def hash_token(token: str) -> str:
    """The SHA-256 hex digest under which a bearer token is configured."""
    if not token:
        raise InvalidRequest("a token must not be empty")
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
