"""What callers ask the orchestrator for: plain, frozen request records.

The records are deliberately dumb: they can be built from any input without raising. The
orchestrator validates them on entry and raises ``InvalidRequest`` with a message saying how to fix
the input.
Each request converts to and from a JSON-safe dict so that traces can store and replay it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory_orchestrator.ports import (
    Edge,
    EdgeType,
    Filters,
    Intent,
    NewMemory,
    TimeRange,
    format_timestamp,
    parse_timestamp,
)


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits of a packed context; ``None`` means unlimited. Tokens are estimated as chars / ratio."""

    max_items: int = 10
    max_chars: int | None = None
    max_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class PlanOverrides:
    """Caller decisions that win over the planner's; ``None`` leaves the planner's choice."""

    intent: Intent | None = None
    entities: tuple[str, ...] | None = None
    time_window: TimeRange | None = None
    strategy: str | None = None
    hops: int | None = None
    subqueries: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """Find the memories relevant to ``query`` (ranked, explained)."""

    query: str
    task: str = ""
    conversation: str = ""
    filters: Filters = Filters()
    top_k: int = 10
    expand: bool = True
    now: datetime | None = None
    overrides: PlanOverrides = PlanOverrides()

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (stored in traces, re-read by replay)."""
        return {
            "query": self.query,
            "task": self.task,
            "conversation": self.conversation,
            "filters": filters_to_dict(self.filters),
            "top_k": self.top_k,
            "expand": self.expand,
            "now": _time_or_none(self.now),
            "overrides": overrides_to_dict(self.overrides),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchRequest:
        """Inverse of :meth:`to_dict`."""
        return cls(
            query=str(data.get("query", "")),
            task=str(data.get("task", "")),
            conversation=str(data.get("conversation", "")),
            filters=filters_from_dict(data.get("filters") or {}),
            top_k=int(data.get("top_k", 10)),
            expand=bool(data.get("expand", True)),
            now=_parse_or_none(data.get("now")),
            overrides=overrides_from_dict(data.get("overrides") or {}),
        )


@dataclass(frozen=True, slots=True)
class ContextRequest:
    """Build a budgeted context block for ``query``.

    ``group_by`` is ``"entity"``, ``"time"``, ``"task"`` or ``None`` (chosen from the plan).
    """

    query: str
    task: str = ""
    conversation: str = ""
    filters: Filters = Filters()
    budget: Budget = Budget()
    expand: bool = True
    now: datetime | None = None
    overrides: PlanOverrides = PlanOverrides()
    group_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (stored in traces)."""
        return {
            "query": self.query,
            "task": self.task,
            "conversation": self.conversation,
            "filters": filters_to_dict(self.filters),
            "budget": {
                "max_items": self.budget.max_items,
                "max_chars": self.budget.max_chars,
                "max_tokens": self.budget.max_tokens,
            },
            "expand": self.expand,
            "now": _time_or_none(self.now),
            "overrides": overrides_to_dict(self.overrides),
            "group_by": self.group_by,
        }

    def as_search(self) -> SearchRequest:
        """The search this context is built from (top_k follows the item budget)."""
        return SearchRequest(
            query=self.query,
            task=self.task,
            conversation=self.conversation,
            filters=self.filters,
            top_k=self.budget.max_items,
            expand=self.expand,
            now=self.now,
            overrides=self.overrides,
        )


@dataclass(frozen=True, slots=True)
class ExpandRequest:
    """Walk the graph from known memories (``seeds``) or from memories naming ``seed_entities``."""

    seeds: tuple[str, ...] = ()
    seed_entities: tuple[str, ...] = ()
    edge_types: tuple[EdgeType, ...] | None = None
    hops: int = 2
    limit: int = 20
    intent: Intent = Intent.GENERAL
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class WriteRequest:
    """Store a memory through the write path (dedup, contradiction check, links).

    An edge in ``links`` whose ``source`` (or ``target``) is ``""`` starts (or ends) at the new memory.
    ``supersedes`` lists memories the new one replaces; ``replace=True`` turns a near duplicate into an
    update.
    """

    memory: NewMemory
    links: tuple[Edge, ...] = ()
    supersedes: tuple[str, ...] = ()
    replace: bool = False
    auto_link: bool = True


def filters_to_dict(filters: Filters) -> dict[str, Any]:
    """JSON-safe form of ``filters``."""
    return {
        "categories": list(filters.categories),
        "sources": list(filters.sources),
        "entities": list(filters.entities),
        "time_range": time_range_to_dict(filters.time_range),
    }


def filters_from_dict(data: Mapping[str, Any]) -> Filters:
    """Inverse of :func:`filters_to_dict`."""
    return Filters(
        categories=tuple(data.get("categories") or ()),
        sources=tuple(data.get("sources") or ()),
        entities=tuple(data.get("entities") or ()),
        time_range=time_range_from_dict(data.get("time_range")),
    )


def time_range_to_dict(window: TimeRange | None) -> dict[str, str | None] | None:
    """JSON-safe form of a time range (``None`` stays ``None``)."""
    if window is None:
        return None
    return {"start": _time_or_none(window.start), "end": _time_or_none(window.end)}


def time_range_from_dict(data: Mapping[str, Any] | None) -> TimeRange | None:
    """Inverse of :func:`time_range_to_dict`."""
    if not data:
        return None
    return TimeRange(start=_parse_or_none(data.get("start")), end=_parse_or_none(data.get("end")))


def overrides_to_dict(overrides: PlanOverrides) -> dict[str, Any]:
    """JSON-safe form of plan overrides."""
    return {
        "intent": overrides.intent.value if overrides.intent else None,
        "entities": None if overrides.entities is None else list(overrides.entities),
        "time_window": time_range_to_dict(overrides.time_window),
        "strategy": overrides.strategy,
        "hops": overrides.hops,
        "subqueries": None if overrides.subqueries is None else list(overrides.subqueries),
    }


def overrides_from_dict(data: Mapping[str, Any]) -> PlanOverrides:
    """Inverse of :func:`overrides_to_dict`."""
    entities = data.get("entities")
    subqueries = data.get("subqueries")
    intent = data.get("intent")
    return PlanOverrides(
        intent=Intent(intent) if intent else None,
        entities=None if entities is None else tuple(entities),
        time_window=time_range_from_dict(data.get("time_window")),
        strategy=data.get("strategy"),
        hops=data.get("hops"),
        subqueries=None if subqueries is None else tuple(subqueries),
    )


def _time_or_none(moment: datetime | None) -> str | None:
    return None if moment is None else format_timestamp(moment)


def _parse_or_none(text: Any) -> datetime | None:
    return None if not text else parse_timestamp(str(text))
