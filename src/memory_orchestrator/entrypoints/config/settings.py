"""Configuration: a TOML file plus ``ORCHESTRATOR_*`` environment overrides, validated by pydantic.

Where the file comes from, first match wins: ``--config PATH``, ``$ORCHESTRATOR_CONFIG``, then
``./orchestrator.toml`` (optional). Precedence of values: explicit overrides (CLI flags) > environment
(``ORCHESTRATOR_BACKEND__NAME=neo4j``, nested with ``__``) > file > defaults.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memory_orchestrator.adapters.sqlite import default_data_dir
from memory_orchestrator.domain.config import (
    DEFAULT_EDGE_WEIGHTS,
    RETRIEVAL_CHANNELS,
    ExpansionLimits,
    PipelineConfig,
    RankingWeights,
)
from memory_orchestrator.entrypoints.config.environment import environment_values, merged
from memory_orchestrator.entrypoints.config.sections import (
    AuthSection,
    AuthToken,
    BackendSection,
    CacheSection,
    ChannelsSection,
    FeaturesSection,
    HttpSection,
    LogSection,
    McpKgSection,
    MnemonSection,
    Neo4jSection,
    PluginsSection,
    RetrySection,
    ScorersSection,
    Section,
    ServerSection,
    SqliteSection,
    StoreName,
    TracesSection,
)
from memory_orchestrator.ports import EdgeType, Intent, InvalidRequest

__all__ = [
    "AuthSection",
    "AuthToken",
    "BackendSection",
    "CacheSection",
    "ChannelsSection",
    "FeaturesSection",
    "HttpSection",
    "LogSection",
    "McpKgSection",
    "MnemonSection",
    "Neo4jSection",
    "PipelineSection",
    "PluginsSection",
    "RetrySection",
    "ScorersSection",
    "ServerSection",
    "Settings",
    "SqliteSection",
    "TracesSection",
    "WeightsSection",
    "find_config_file",
    "hash_token",
    "load_settings",
]

ENV_PREFIX = "ORCHESTRATOR_"
CONFIG_ENV = "ORCHESTRATOR_CONFIG"
DEFAULT_CONFIG_NAME = "orchestrator.toml"
#: Defaults come from the domain's own dataclasses (slotted, so read from instances).
_PIPELINE = PipelineConfig()
_EXPANSION = ExpansionLimits()
_WEIGHTS = RankingWeights()


class WeightsSection(Section):
    """Weights of the re-ranking formula (see RankingWeights)."""

    relevance: float = Field(default=_WEIGHTS.relevance, ge=0, le=10)
    recency: float = Field(default=_WEIGHTS.recency, ge=0, le=10)
    graph: float = Field(default=_WEIGHTS.graph, ge=0, le=10)
    type_match: float = Field(default=_WEIGHTS.type_match, ge=0, le=10)
    entity: float = Field(default=_WEIGHTS.entity, ge=0, le=10)
    contested_entity: float = Field(default=_WEIGHTS.contested_entity, ge=0, le=1)
    list_entity: float = Field(default=_WEIGHTS.list_entity, ge=0, le=10)
    importance: float = Field(default=_WEIGHTS.importance, ge=0, le=10)
    cross_reference: float = Field(default=_WEIGHTS.cross_reference, ge=0, le=10)
    duplication: float = Field(default=_WEIGHTS.duplication, ge=0, le=10)
    noise: float = Field(default=_WEIGHTS.noise, ge=0, le=10)
    time: float = Field(default=_WEIGHTS.time, ge=0, le=10)
    superseded_factor: float = Field(default=_WEIGHTS.superseded_factor, ge=0, le=1)


def _default_edge_weights() -> dict[Intent, dict[EdgeType, float]]:
    return {intent: dict(row) for intent, row in DEFAULT_EDGE_WEIGHTS.items()}


class PipelineSection(Section):
    """Mirror of the domain's PipelineConfig (defaults are taken from it)."""

    default_top_k: int = Field(default=_PIPELINE.default_top_k, ge=1, le=1000)
    max_top_k: int = Field(default=_PIPELINE.max_top_k, ge=1, le=1000)
    candidates_per_channel: int = Field(default=_PIPELINE.candidates_per_channel, ge=1, le=1000)
    rrf_k: int = Field(default=_PIPELINE.rrf_k, ge=1, le=1000)
    channel_weights: dict[str, float] = Field(default_factory=lambda: dict(_PIPELINE.channel_weights))
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

    @field_validator("channel_weights")
    @classmethod
    def _channel_weights_valid(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(value) - set(RETRIEVAL_CHANNELS))
        if unknown:
            raise ValueError(f"unknown channel(s) {unknown}; valid: {list(RETRIEVAL_CHANNELS)}")
        for channel, weight in value.items():
            if not 0.0 <= weight <= 10.0:
                raise ValueError(f"{channel} must lie in [0, 10], got {weight}")
        return {**dict(_PIPELINE.channel_weights), **value}

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


class Settings(BaseModel):
    """The effective configuration of one process (:func:`load_settings` reads it)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, validate_default=True)

    data_dir: Path = Field(default_factory=default_data_dir)
    default_store: StoreName = "default"
    backend: BackendSection = BackendSection()
    plugins: PluginsSection = PluginsSection()
    scorers: ScorersSection = ScorersSection()
    channels: ChannelsSection = ChannelsSection()
    pipeline: PipelineSection = PipelineSection()
    retry: RetrySection = RetrySection()
    traces: TracesSection = TracesSection()
    cache: CacheSection = CacheSection()
    http: HttpSection = HttpSection()
    server: ServerSection = ServerSection()
    auth: AuthSection = AuthSection()
    features: FeaturesSection = FeaturesSection()
    log: LogSection = LogSection()
    #: The file the settings were read from (None when there was none); set by :func:`load_settings`.
    config_file: Path | None = None

    @field_validator("data_dir", mode="before")
    @classmethod
    def _data_dir_named(cls, value: Any) -> Any:
        # An empty value (ORCHESTRATOR_DATA_DIR=) would be Path("") = the working directory.
        if isinstance(value, str) and not value.strip():
            raise ValueError("must name a folder (it is empty)")
        return value

    def backend_options(self, name: str | None = None) -> dict[str, Any]:
        """The options mapping handed to the factory of backend ``name`` (default: the configured one)."""
        name = name or self.backend.name
        if name == "sqlite":
            section = self.backend.sqlite
            return {
                "path": str(section.path or self.data_dir / "memories.db"),
                "store": section.store,
                "bulk_helper": section.bulk_helper,
            }
        if name == "neo4j":
            options = self.backend.neo4j.model_dump()
            options["password"] = self.backend.neo4j.password.get_secret_value()
            return options
        if name == "mnemon":
            options = self.backend.mnemon.model_dump(exclude_none=True)
            if self.backend.mnemon.data_dir is not None:
                options["data_dir"] = str(self.backend.mnemon.data_dir)
            return options
        if name == "mcp_kg":
            options = self.backend.mcp_kg.model_dump(exclude_none=True, mode="json")
            options.setdefault("data_dir", str(self.data_dir))
            if "memory_file" in options:  # the configured file is the configured store's only
                options["memory_file_store"] = options["store"]
            return options
        if name == "memory":
            return dict(self.backend.memory)
        return dict(self.backend.extra.get(name, {}))

    def store_name(self) -> str:
        """The store (namespace) the configured backend opens when none is named."""
        store = self.backend_options().get("store")
        return str(store) if store else self.default_store

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
            channel_weights={**self.channels.weights, **dict(section.channel_weights)},
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
    """Read and validate the configuration; every problem becomes one ``InvalidRequest``.

    Values, the first found wins: ``overrides``, the ``ORCHESTRATOR_*`` environment, the file, the
    defaults (tables merged key by key).
    """
    path = find_config_file(config)
    _check_environment()
    environment = environment_values(Settings, ENV_PREFIX, os.environ, ignore={CONFIG_ENV})
    try:
        file_values = tomllib.loads(path.read_text(encoding="utf-8")) if path else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidRequest(f"cannot read configuration {path}: {exc}") from exc
    try:
        settings = Settings(**merged(file_values, environment, overrides))
    except ValidationError as exc:
        raise InvalidRequest(_describe(exc, path)) from exc
    settings.config_file = path
    return settings


def _our_variables() -> dict[str, str]:
    return {
        name: value
        for name, value in os.environ.items()
        if name.upper().startswith(ENV_PREFIX) and name.upper() != CONFIG_ENV
    }


def _check_environment() -> None:
    """An ``ORCHESTRATOR_*`` variable naming no setting is an error, like an unknown nested key."""
    known = {name.upper() for name in Settings.model_fields if name != "config_file"}
    unknown = [
        name for name in _our_variables() if name[len(ENV_PREFIX) :].split("__")[0].upper() not in known
    ]
    if unknown:
        raise InvalidRequest(
            f"unknown setting in environment variable {', '.join(sorted(unknown))} "
            f"(settings: {', '.join(sorted(name.lower() for name in known))})"
        )


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
