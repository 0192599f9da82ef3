"""What the orchestrator answers: frozen result records, each with a JSON-safe ``to_dict()``.

Datetimes become RFC 3339 strings (``ports.format_timestamp``), enums their values, tuples lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from memory_orchestrator.domain.requests import time_range_to_dict
from memory_orchestrator.ports import (
    Edge,
    EdgeType,
    Intent,
    LinkCandidate,
    MemoryRecord,
    TimeRange,
    WriteAction,
    format_timestamp,
)


@dataclass(frozen=True, slots=True)
class PathStep:
    """One edge walked by the graph expansion, from ``from_id`` to ``to_id``."""

    from_id: str
    to_id: str
    edge_type: EdgeType
    weight: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "from_id": self.from_id,
            "to_id": self.to_id,
            "edge_type": self.edge_type.value,
            "weight": round(self.weight, 4),
        }


@dataclass(frozen=True, slots=True)
class ResultItem:
    """One ranked memory with its score breakdown (``signals``) and human-readable ``reasons``.

    ``path`` is set for memories reached by expansion (empty for direct hits). ``absorbed_ids`` are
    duplicates merged into this item. ``truncated`` means ``content`` was trimmed for a context budget;
    the full text is available from the backend by ``memory_id``.
    """

    memory_id: str
    content: str
    summary: str
    score: float
    signals: Mapping[str, float]
    reasons: tuple[str, ...]
    entities: tuple[str, ...]
    category: str
    source: str
    created_at: datetime
    channels: tuple[str, ...] = ()
    path: tuple[PathStep, ...] = ()
    absorbed_ids: tuple[str, ...] = ()
    superseded: bool = False
    superseded_by: tuple[str, ...] = ()
    truncated: bool = False
    #: The rounded score and signals and the formatted time of ``to_dict``, made at its first call:
    #: they were most of its time (``round(x, n)`` formats the float), and an answer kept by the read
    #: cache is converted once per call that gets it.
    _wire: tuple[float, dict[str, float], str] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "signals", MappingProxyType(dict(self.signals)))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        wire = self._wire
        if wire is None:
            signals = {name: round(value, 6) for name, value in self.signals.items()}
            wire = (round(self.score, 6), signals, format_timestamp(self.created_at))
            object.__setattr__(self, "_wire", wire)
        score, signals, created_at = wire
        return {
            "memory_id": self.memory_id,
            "content": self.content,
            "summary": self.summary,
            "score": score,
            "signals": dict(signals),
            "reasons": list(self.reasons),
            "entities": list(self.entities),
            "category": self.category,
            "source": self.source,
            "created_at": created_at,
            "channels": list(self.channels),
            "path": [step.to_dict() for step in self.path],
            "absorbed_ids": list(self.absorbed_ids),
            "superseded": self.superseded,
            "superseded_by": list(self.superseded_by),
            "truncated": self.truncated,
        }


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """How the planner understood a query and what the pipeline will do with it."""

    query: str
    canonical: str
    subqueries: tuple[str, ...]
    intent: Intent
    intent_cues: tuple[str, ...]
    entities: tuple[str, ...]
    time_window: TimeRange | None
    strategy: str
    hops: int
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "query": self.query,
            "canonical": self.canonical,
            "subqueries": list(self.subqueries),
            "intent": self.intent.value,
            "intent_cues": list(self.intent_cues),
            "entities": list(self.entities),
            "time_window": time_range_to_dict(self.time_window),
            "strategy": self.strategy,
            "hops": self.hops,
            "confidence": round(self.confidence, 4),
        }


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Ranked memories for a query, with the plan, a one-paragraph summary and the trace id."""

    query: str
    plan: QueryPlan
    items: tuple[ResultItem, ...]
    summary: str
    trace_id: str
    warnings: tuple[str, ...] = ()

    @property
    def order(self) -> str:
        """How ``items`` are ordered: ``score`` (highest first, memories marked superseded after every
        current one) or ``created_at`` (oldest first: an episodic "what happened" plan)."""
        return "created_at" if self.plan.strategy == "episodic" else "score"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "query": self.query,
            "plan": self.plan.to_dict(),
            "order": self.order,
            "items": [item.to_dict() for item in self.items],
            "summary": self.summary,
            "trace_id": self.trace_id,
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True, slots=True)
class ContextResult:
    """A budgeted context block (``context_block``) and the items it was packed from.

    ``chars`` is the length of ``context_block``; ``est_tokens`` its token estimate
    (chars / ``PipelineConfig.chars_per_token``, rounded up). ``cut`` lists memories left out for budget.
    """

    query: str
    plan: QueryPlan
    strategy: str
    summary: str
    items: tuple[ResultItem, ...]
    context_block: str
    trace_id: str
    chars: int
    est_tokens: int
    cut: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "query": self.query,
            "plan": self.plan.to_dict(),
            "strategy": self.strategy,
            "summary": self.summary,
            "items": [item.to_dict() for item in self.items],
            "context_block": self.context_block,
            "trace_id": self.trace_id,
            "chars": self.chars,
            "est_tokens": self.est_tokens,
            "cut": list(self.cut),
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True, slots=True)
class ExpandResult:
    """Memories reached from the seeds by graph expansion, each with its path."""

    seeds: tuple[str, ...]
    items: tuple[ResultItem, ...]
    trace_id: str
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "seeds": list(self.seeds),
            "items": [item.to_dict() for item in self.items],
            "trace_id": self.trace_id,
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What the write path did: ``action`` added / skipped (duplicate) / updated (replaced)."""

    id: str
    action: WriteAction
    duplicate_of: str | None
    candidates: tuple[LinkCandidate, ...]
    links_created: tuple[Edge, ...]
    superseded: tuple[str, ...]
    trace_id: str
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "id": self.id,
            "action": self.action.value,
            "duplicate_of": self.duplicate_of,
            "candidates": [candidate_to_dict(candidate) for candidate in self.candidates],
            "links_created": [edge_to_dict(edge) for edge in self.links_created],
            "superseded": list(self.superseded),
            "trace_id": self.trace_id,
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """A stored request run again: which memory ids came back then and now."""

    trace_id: str
    original_ids: tuple[str, ...]
    current_ids: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    result: SearchResult

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "trace_id": self.trace_id,
            "original_ids": list(self.original_ids),
            "current_ids": list(self.current_ids),
            "added": list(self.added),
            "removed": list(self.removed),
            "unchanged": self.original_ids == self.current_ids,
            "result": self.result.to_dict(),
        }


def candidate_to_dict(candidate: LinkCandidate) -> dict[str, Any]:
    """JSON-safe form of a link candidate."""
    return {
        "id": candidate.id,
        "content": candidate.content,
        "similarity": round(candidate.similarity, 4),
        "edge_type": candidate.edge_type.value,
        "reason": candidate.reason,
    }


def edge_to_dict(edge: Edge) -> dict[str, Any]:
    """JSON-safe form of an edge."""
    return {
        "source": edge.source,
        "target": edge.target,
        "type": edge.type.value,
        "weight": round(edge.weight, 4),
        "metadata": dict(edge.metadata),
        "created_at": None if edge.created_at is None else format_timestamp(edge.created_at),
    }


def record_to_dict(record: MemoryRecord) -> dict[str, Any]:
    """JSON-safe form of a stored memory."""
    return {
        "id": record.id,
        "content": record.content,
        "category": record.category,
        "importance": record.importance,
        "tags": list(record.tags),
        "entities": list(record.entities),
        "source": record.source,
        "created_at": format_timestamp(record.created_at),
        "updated_at": format_timestamp(record.updated_at),
        "metadata": dict(record.metadata),
        "superseded_by": list(record.superseded_by),
    }
