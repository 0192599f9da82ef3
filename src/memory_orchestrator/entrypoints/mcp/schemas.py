"""Pydantic models of the MCP tool surface, and their conversion to and from port and domain records.

Inputs reject unknown fields and bound every value (lengths, counts, ranges, id formats), so a tool
never hands the orchestrator something it would have to guess about. Outputs are built from the
domain results' JSON-safe ``to_dict()`` forms and ignore fields they do not know, so the domain can
grow without breaking clients.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from memory_orchestrator.domain.requests import (
    Budget,
    ContextRequest,
    ExpandRequest,
    SearchRequest,
    WriteRequest,
)
from memory_orchestrator.ports import (
    MAX_CONTENT_BYTES,
    MAX_ENTITIES,
    MAX_ENTITY_CHARS,
    MAX_SOURCE_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    Edge,
    EdgeType,
    Filters,
    Intent,
    NewMemory,
    TimeRange,
    ensure_utc,
)

MAX_QUERY_CHARS = 2000
MAX_TASK_CHARS = 2000
MAX_CONVERSATION_CHARS = 8000
MAX_TOP_K = 100
MAX_HOPS = 4
MAX_IDS = 100
MAX_SESSION_POINTS = 50
MAX_LINKS = 20

MemoryId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$", description="A memory id.")]
StoreName = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$",
        description="Store (namespace); omit for the default.",
    ),
]
EntityName = Annotated[str, Field(min_length=1, max_length=MAX_ENTITY_CHARS)]
Category = Literal["preference", "decision", "fact", "insight", "context", "general"]
EdgeTypeName = Literal["temporal", "entity", "causal", "semantic", "supersedes"]
IntentName = Literal["WHY", "WHEN", "ENTITY", "GENERAL"]


class StrictInput(BaseModel):
    """Base of every tool input: unknown fields are an error, strings are stripped.

    Each model is built at its first use (``defer_build``): the server lists the stored schemas
    (``published.STORED_INPUTS``) and answers its first messages without building them, and
    ``launch.warm_up`` builds them soon after.
    """

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, defer_build=True)


class TimeRangeInput(StrictInput):
    """A window on creation time, ``[start, end)``; naive timestamps are taken as UTC."""

    start: datetime | None = Field(default=None, description="Inclusive start (RFC 3339).")
    end: datetime | None = Field(default=None, description="Exclusive end (RFC 3339).")

    @field_validator("start", "end")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else ensure_utc(value)

    @model_validator(mode="after")
    def _ordered(self) -> TimeRangeInput:
        if self.start and self.end and self.end <= self.start:
            raise ValueError("time_range.end must be after time_range.start")
        return self

    def to_port(self) -> TimeRange:
        """The port record."""
        return TimeRange(start=self.start, end=self.end)


class FiltersInput(StrictInput):
    """Restrictions on which memories may come back; empty lists mean no restriction."""

    entities: list[EntityName] = Field(
        default_factory=list,
        max_length=MAX_ENTITIES,
        validation_alias=AliasChoices("entities", "entity_ids"),
        description="Only memories naming any of these entities (alias: entity_ids).",
    )
    categories: list[Category] = Field(
        default_factory=list,
        validation_alias=AliasChoices("categories", "memory_types"),
        description="Only these memory types (alias: memory_types).",
    )
    sources: list[Annotated[str, Field(min_length=1, max_length=MAX_SOURCE_CHARS)]] = Field(
        default_factory=list, max_length=20, description="Only memories from these sources."
    )
    time_range: TimeRangeInput | None = Field(
        default=None, description="Only memories created in this window."
    )

    def to_port(self) -> Filters:
        """The port record."""
        return Filters(
            categories=tuple(self.categories),
            sources=tuple(self.sources),
            entities=tuple(self.entities),
            time_range=self.time_range.to_port() if self.time_range else None,
        )


class BudgetInput(StrictInput):
    """How much context the caller can take; the tightest limit wins."""

    max_items: int = Field(default=10, ge=1, le=MAX_TOP_K, description="Most memories in the block.")
    max_chars: int | None = Field(
        default=None, ge=100, le=200_000, description="Most characters in the block."
    )
    max_tokens: int | None = Field(default=None, ge=25, le=50_000, description="Most (estimated) tokens.")

    def to_domain(self) -> Budget:
        """The domain record."""
        return Budget(max_items=self.max_items, max_chars=self.max_chars, max_tokens=self.max_tokens)


class SearchInput(StrictInput):
    """Arguments of ``memory_search``."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for.")
    task: str = Field(
        default="", max_length=MAX_TASK_CHARS, description="What the agent is doing (helps ranking)."
    )
    filters: FiltersInput = Field(default_factory=FiltersInput, description="Only matching memories.")
    top_k: int = Field(default=10, ge=1, le=MAX_TOP_K, description="How many memories to return.")
    expand: bool = Field(default=True, description="Follow graph edges from the direct hits.")
    store: StoreName | None = None

    def to_domain(self) -> SearchRequest:
        """The orchestrator request."""
        return SearchRequest(
            query=self.query,
            task=self.task,
            filters=self.filters.to_port(),
            top_k=self.top_k,
            expand=self.expand,
        )


class ContextInput(StrictInput):
    """Arguments of ``memory_context``."""

    query: str = Field(default="", max_length=MAX_QUERY_CHARS, description="The question the context is for.")
    task: str = Field(default="", max_length=MAX_TASK_CHARS, description="What the agent is doing.")
    scope: EntityName | None = Field(
        default=None, description="An entity or project: return everything about it within the budget."
    )
    response_budget: BudgetInput = Field(default_factory=BudgetInput, description="Size limits.")
    filters: FiltersInput = Field(default_factory=FiltersInput, description="Only matching memories.")
    group_by: Literal["entity", "time", "task"] | None = Field(
        default=None, description="Omit to let the plan decide."
    )
    expand: bool = Field(default=True, description="Follow graph edges.")
    store: StoreName | None = None

    @model_validator(mode="after")
    def _has_subject(self) -> ContextInput:
        if not self.query and not self.scope:
            raise ValueError("give a query, a scope (entity or project name), or both")
        return self

    def to_domain(self) -> ContextRequest:
        """The orchestrator request; a scope becomes the query subject and an entity filter."""
        filters = self.filters.to_port()
        query = self.query
        if self.scope:
            entities = filters.entities if self.scope in filters.entities else (*filters.entities, self.scope)
            filters = Filters(filters.categories, filters.sources, entities, filters.time_range)
            query = query or f"everything about {self.scope}"
        return ContextRequest(
            query=query,
            task=self.task,
            filters=filters,
            budget=self.response_budget.to_domain(),
            expand=self.expand,
            group_by=self.group_by,
        )


class ExpandInput(StrictInput):
    """Arguments of ``memory_expand``."""

    seeds: list[Annotated[str, Field(min_length=1, max_length=MAX_ENTITY_CHARS)]] = Field(
        default_factory=list,
        max_length=MAX_IDS,
        description="Memory ids and/or entity names to start from (a seed that is no known id is "
        "treated as an entity name).",
    )
    edge_types: list[EdgeTypeName] | None = Field(default=None, description="Edges to follow; omit for all.")
    hops: int = Field(default=2, ge=1, le=MAX_HOPS, description="Links to follow.")
    limit: int = Field(default=20, ge=1, le=MAX_TOP_K, description="Most results.")
    intent: IntentName = Field(default="GENERAL", description="Decides which edges are preferred.")
    store: StoreName | None = None

    @field_validator("seeds")
    @classmethod
    def _not_empty(cls, seeds: list[str]) -> list[str]:
        if not seeds:
            raise ValueError("give at least one seed (memory id or entity name)")
        return seeds

    def to_domain(self, ids: tuple[str, ...], entities: tuple[str, ...]) -> ExpandRequest:
        """The orchestrator request, once the seeds are split into known ids and entity names."""
        return ExpandRequest(
            seeds=ids,
            seed_entities=entities,
            edge_types=None if self.edge_types is None else tuple(EdgeType(t) for t in self.edge_types),
            hops=self.hops,
            limit=self.limit,
            intent=Intent(self.intent),
        )


class LinkSpec(StrictInput):
    """An edge from the memory being written to an existing one."""

    target: MemoryId
    type: EdgeTypeName = Field(default="semantic", description="Edge type.")
    weight: float = Field(default=1.0, gt=0.0, le=1.0, description="Strength.")


class WriteInput(StrictInput):
    """Arguments of ``memory_write``."""

    content: str = Field(min_length=1, description=f"The memory text (at most {MAX_CONTENT_BYTES} bytes).")
    category: Category = Field(default="general", description="Kind of memory.")
    importance: int = Field(default=3, ge=1, le=5, description="1 (trivia) to 5 (critical).")
    tags: list[Annotated[str, Field(min_length=1, max_length=MAX_TAG_CHARS)]] = Field(
        default_factory=list, max_length=MAX_TAGS, description="Labels."
    )
    entities: list[EntityName] = Field(
        default_factory=list, max_length=MAX_ENTITIES, description="Who or what it is about."
    )
    source: str = Field(
        default="agent", min_length=1, max_length=MAX_SOURCE_CHARS, description="Who said it."
    )
    links: list[LinkSpec] = Field(default_factory=list, max_length=MAX_LINKS, description="Edges to make.")
    supersedes: list[MemoryId] = Field(
        default_factory=list, max_length=MAX_LINKS, description="Ids of memories this one replaces."
    )
    replace: bool = Field(
        default=False, description="Turn a near duplicate into an update instead of skipping."
    )
    store: StoreName | None = None

    @field_validator("content")
    @classmethod
    def _bounded(cls, content: str) -> str:
        if len(content.encode("utf-8")) > MAX_CONTENT_BYTES:
            raise ValueError(
                f"content is longer than {MAX_CONTENT_BYTES} bytes; split it into several memories"
            )
        return content

    def to_domain(self) -> WriteRequest:
        """The orchestrator request (links start at the new memory: source ``""``)."""
        memory = NewMemory(
            content=self.content,
            category=self.category,
            importance=self.importance,
            tags=tuple(self.tags),
            entities=tuple(self.entities),
            source=self.source,
        )
        links = tuple(
            Edge(source="", target=link.target, type=EdgeType(link.type), weight=link.weight)
            for link in self.links
        )
        return WriteRequest(
            memory=memory, links=links, supersedes=tuple(self.supersedes), replace=self.replace
        )


class ExplainInput(StrictInput):
    """Arguments of ``memory_explain``: either ``trace_id`` or ``query``."""

    trace_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_\-]{1,64}$")] | None = Field(
        default=None, description="An earlier call's trace."
    )
    query: str | None = Field(
        default=None, min_length=1, max_length=MAX_QUERY_CHARS, description="Or a query."
    )
    task: str = Field(default="", max_length=MAX_TASK_CHARS, description="The agent's task.")
    filters: FiltersInput = Field(default_factory=FiltersInput, description="Only matching memories.")
    top_k: int = Field(default=10, ge=1, le=MAX_TOP_K, description="Results.")
    store: StoreName | None = None

    @model_validator(mode="after")
    def _one_of(self) -> ExplainInput:
        if (self.trace_id is None) == (self.query is None):
            raise ValueError("give exactly one of trace_id (an earlier request) or query (a fresh one)")
        return self

    def to_domain(self) -> SearchRequest:
        """The fresh search to explain (only meaningful with ``query``)."""
        return SearchRequest(
            query=self.query or "", task=self.task, filters=self.filters.to_port(), top_k=self.top_k
        )


class HealthInput(StrictInput):
    """Arguments of ``memory_health``."""

    probe: bool = Field(default=False, description="Also make a real write/read/forget round trip.")
    store: StoreName | None = None


class StoresInput(StrictInput):
    """Arguments of ``memory_stores``: none (the caller's token decides)."""


class GetInput(StrictInput):
    """Arguments of ``memory_get``."""

    ids: list[MemoryId] = Field(min_length=1, max_length=MAX_IDS, description="Memory ids.")
    store: StoreName | None = None


class LinkInput(StrictInput):
    """Arguments of ``memory_link``."""

    source: MemoryId
    target: MemoryId
    type: EdgeTypeName = Field(description="Edge type.")
    weight: float = Field(default=1.0, gt=0.0, le=1.0, description="Strength.")
    evidence: str = Field(
        default="", max_length=500, description="Why the two are linked (kept on the edge)."
    )
    store: StoreName | None = None

    @model_validator(mode="after")
    def _distinct(self) -> LinkInput:
        if self.source == self.target:
            raise ValueError("source and target must be different memories")
        return self

    def to_port(self) -> Edge:
        """The port edge."""
        metadata = {"evidence": self.evidence} if self.evidence else {}
        return Edge(self.source, self.target, EdgeType(self.type), self.weight, metadata=metadata)


class ForgetInput(StrictInput):
    """Arguments of ``memory_forget``."""

    id: MemoryId
    store: StoreName | None = None


class ChangesInput(StrictInput):
    """Arguments of ``memory_changes``."""

    since: str = Field(
        default="last session",
        min_length=1,
        max_length=64,
        description='A timestamp (RFC 3339 / ISO date) or a phrase: "last session", "2 days", '
        '"3 hours ago", "yesterday", "last week".',
    )
    entity: EntityName | None = Field(
        default=None, description="Only changes to memories naming this entity."
    )
    limit: int = Field(default=100, ge=1, le=500, description="Most events.")
    store: StoreName | None = None


class WhyInput(StrictInput):
    """Arguments of ``memory_why``."""

    question: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="A why-question.")
    depth: int = Field(default=3, ge=1, le=MAX_HOPS, description="How many causes back to follow.")
    store: StoreName | None = None


class SessionSummaryInput(StrictInput):
    """Arguments of ``memory_session_summary``."""

    session_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:\-]{1,64}$")] | None = Field(
        default=None, description="Omit to name the session after the current time."
    )
    decisions: list[Annotated[str, Field(min_length=1, max_length=2000)]] = Field(
        default_factory=list, max_length=MAX_SESSION_POINTS, description="Decisions made."
    )
    key_points: list[Annotated[str, Field(min_length=1, max_length=2000)]] = Field(
        default_factory=list, max_length=MAX_SESSION_POINTS, description="Facts learned (stored as fact)."
    )
    context: list[Annotated[str, Field(min_length=1, max_length=2000)]] = Field(
        default_factory=list, max_length=MAX_SESSION_POINTS, description="Background (stored as context)."
    )
    entities: list[EntityName] = Field(
        default_factory=list, max_length=20, description="Projects / entities the session was about."
    )
    store: StoreName | None = None

    @model_validator(mode="after")
    def _has_points(self) -> SessionSummaryInput:
        if not (self.decisions or self.key_points or self.context):
            raise ValueError("give at least one decision, key point or context line")
        return self


ModelT = TypeVar("ModelT", bound="StrictInput")


def validate_input(model: type[ModelT], arguments: dict[str, Any]) -> ModelT:
    """Validate tool arguments; raises ``ValueError`` with a one-line message naming each bad field.

    Lists and objects sent as JSON text (some clients do) are decoded first.
    """
    decoded = {key: _decode_json_text(model, key, value) for key, value in arguments.items()}
    try:
        return model.model_validate(decoded)
    except ValidationError as exc:
        raise ValueError(describe_validation_error(exc)) from None


def describe_validation_error(exc: ValidationError) -> str:
    """One line per problem, joined by '; ', without echoing the rejected values."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown field (not part of this tool's input)"
        problems.append(f"{where}: {message}")
    return "invalid arguments: " + "; ".join(problems)


def _decode_json_text(model: type[StrictInput], key: str, value: Any) -> Any:
    field = model.model_fields.get(key)
    if field is None or not isinstance(value, str) or field.annotation is str:
        return value
    text = value.strip()
    if not text.startswith(("[", "{")):
        return value
    try:
        return json.loads(text)
    except ValueError:
        return value
