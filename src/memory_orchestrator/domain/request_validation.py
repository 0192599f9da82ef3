"""Checks of orchestrator requests: bad input raises ``InvalidRequest`` before anything happens."""

from __future__ import annotations

from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.packaging import GROUPINGS
from memory_orchestrator.domain.planner import STRATEGIES
from memory_orchestrator.domain.requests import (
    Budget,
    ContextRequest,
    ExpandRequest,
    PlanOverrides,
    SearchRequest,
    WriteRequest,
)
from memory_orchestrator.ports import EdgeType, Filters, Intent, InvalidRequest, TimeRange
from memory_orchestrator.ports.validation import validate_new_memory, validate_text

MAX_QUERY_CHARS = 4000
MAX_CONTEXT_CHARS = 20_000
MAX_HOPS = 5


def check_search(request: SearchRequest, config: PipelineConfig) -> None:
    """Validate a search request."""
    _check_text(request.query, request.task, request.conversation)
    _check_count("top_k", request.top_k, config.max_top_k)
    _check_filters(request.filters)
    _check_overrides(request.overrides)


def check_context(request: ContextRequest, config: PipelineConfig) -> None:
    """Validate a context request."""
    _check_text(request.query, request.task, request.conversation)
    _check_budget(request.budget, config)
    _check_filters(request.filters)
    _check_overrides(request.overrides)
    if request.group_by is not None and request.group_by not in GROUPINGS:
        raise InvalidRequest(f"group_by must be one of {', '.join(GROUPINGS)} or omitted")


def check_expand(request: ExpandRequest, config: PipelineConfig) -> None:
    """Validate an expand request."""
    if not request.seeds and not request.seed_entities:
        raise InvalidRequest("give at least one seed memory id or seed entity")
    for name in (*request.seeds, *request.seed_entities):
        if not isinstance(name, str) or not name.strip():
            raise InvalidRequest("seeds and seed entities must be non-empty strings")
        validate_text("seed", name)
    _check_count("hops", request.hops, MAX_HOPS)
    _check_count("limit", request.limit, config.max_top_k)
    if not isinstance(request.intent, Intent):
        raise InvalidRequest(f"intent must be one of {', '.join(item.value for item in Intent)}")
    for kind in request.edge_types or ():
        if not isinstance(kind, EdgeType):
            raise InvalidRequest(f"edge type {kind!r} is not one of {', '.join(e.value for e in EdgeType)}")


def check_write(request: WriteRequest) -> None:
    """Validate a write request (the memory, its links and the ids it supersedes)."""
    validate_new_memory(request.memory)
    for edge in request.links:
        if not isinstance(edge.target, str) or not isinstance(edge.source, str):
            raise InvalidRequest("link ends must be memory ids")
        if not edge.target and not edge.source:
            raise InvalidRequest("every link needs a memory id at one end (the other is the new memory)")
        validate_text("link", edge.source)
        validate_text("link", edge.target)
        if not isinstance(edge.type, EdgeType):
            raise InvalidRequest(
                f"link type {edge.type!r} is not one of {', '.join(e.value for e in EdgeType)}"
            )
        if not 0.0 <= edge.weight <= 1.0:
            raise InvalidRequest(f"link weight {edge.weight} must lie in [0, 1]")
    for memory_id in request.supersedes:
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise InvalidRequest("supersedes must list non-empty memory ids")
        validate_text("supersedes", memory_id)


def _check_text(query: str, task: str, conversation: str) -> None:
    if not isinstance(query, str):
        raise InvalidRequest("query must be a string")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidRequest(f"query is longer than {MAX_QUERY_CHARS} characters")
    if not isinstance(task, str) or len(task) > MAX_QUERY_CHARS:
        raise InvalidRequest(f"task must be a string of at most {MAX_QUERY_CHARS} characters")
    if not isinstance(conversation, str) or len(conversation) > MAX_CONTEXT_CHARS:
        raise InvalidRequest(f"conversation must be a string of at most {MAX_CONTEXT_CHARS} characters")
    for name, text in (("query", query), ("task", task), ("conversation", conversation)):
        validate_text(name, text)


def _check_count(name: str, value: int, upper: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= upper:
        raise InvalidRequest(f"{name} must be an integer from 1 to {upper}, got {value!r}")


def _check_budget(budget: Budget, config: PipelineConfig) -> None:
    _check_count("budget.max_items", budget.max_items, config.max_top_k)
    for name, value in (("max_chars", budget.max_chars), ("max_tokens", budget.max_tokens)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InvalidRequest(f"budget.{name} must be a positive integer or omitted, got {value!r}")


def _check_filters(filters: Filters) -> None:
    for name, values in (
        ("categories", filters.categories),
        ("sources", filters.sources),
        ("entities", filters.entities),
    ):
        if any(not isinstance(value, str) or not value for value in values):
            raise InvalidRequest(f"filters.{name} must hold non-empty strings")
        for value in values:
            validate_text(f"filters.{name}", value)
    _check_range("filters.time_range", filters.time_range)


def _check_range(name: str, window: TimeRange | None) -> None:
    if window is None:
        return
    for moment in (window.start, window.end):
        if moment is not None and moment.tzinfo is None:
            raise InvalidRequest(f"{name} needs timezone-aware datetimes")
    if window.start is not None and window.end is not None and window.start >= window.end:
        raise InvalidRequest(f"{name} starts at or after its end")


def _check_overrides(overrides: PlanOverrides) -> None:
    if overrides.intent is not None and not isinstance(overrides.intent, Intent):
        raise InvalidRequest(f"intent must be one of {', '.join(item.value for item in Intent)}")
    if overrides.strategy is not None and overrides.strategy not in STRATEGIES:
        raise InvalidRequest(f"strategy must be one of {', '.join(STRATEGIES)}")
    if overrides.hops is not None and (
        isinstance(overrides.hops, bool)
        or not isinstance(overrides.hops, int)
        or not 0 <= overrides.hops <= MAX_HOPS
    ):
        raise InvalidRequest(f"hops must be an integer from 0 to {MAX_HOPS}")
    _check_range("time_window", overrides.time_window)
    if overrides.subqueries is not None and not all(
        isinstance(q, str) and q.strip() for q in overrides.subqueries
    ):
        raise InvalidRequest("subqueries must be non-empty strings")
