"""Pydantic models of what the MCP tools answer (their output schemas).

Built from the domain results' JSON-safe ``to_dict()`` forms; unknown keys are ignored so the domain
can grow without breaking clients.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Output(BaseModel):
    """Base of every tool output: built from domain dicts, unknown keys ignored; each model is built
    at its first use, as the inputs are (see ``schemas.StrictInput``)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)


class PathStepOutput(Output):
    """One edge walked to reach an item."""

    from_id: str
    to_id: str
    edge_type: str
    weight: float


class ItemOutput(Output):
    """One ranked memory with its score breakdown and reasons."""

    memory_id: str
    content: str
    summary: str = ""
    score: float
    signals: dict[str, float] = Field(default_factory=dict)
    reasons: list[str] = Field(default_factory=list)
    entities: list[str] = Field(default_factory=list)
    category: str = "general"
    source: str = ""
    created_at: str
    channels: list[str] = Field(default_factory=list)
    path: list[PathStepOutput] = Field(default_factory=list)
    absorbed_ids: list[str] = Field(default_factory=list)
    superseded: bool = False
    superseded_by: list[str] = Field(default_factory=list)
    truncated: bool = False


class PlanOutput(Output):
    """How the query was understood."""

    intent: str
    entities: list[str] = Field(default_factory=list)
    strategy: str
    hops: int
    subqueries: list[str] = Field(default_factory=list)
    time_window: dict[str, str | None] | None = None
    confidence: float = 0.0


class SearchOutput(Output):
    """Result of ``memory_search``."""

    store: str
    order: str = Field(
        default="score",
        description="score: highest first, superseded memories after current ones; created_at: oldest first.",
    )
    items: list[ItemOutput]
    summary: str
    trace_id: str
    plan: PlanOutput
    warnings: list[str] = Field(default_factory=list)


class ContextOutput(Output):
    """Result of ``memory_context``."""

    store: str
    summary: str
    context_block: str
    items: list[ItemOutput]
    trace_id: str
    strategy: str
    chars: int
    est_tokens: int
    cut: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class ExpandOutput(Output):
    """Result of ``memory_expand``."""

    store: str
    seeds: list[str]
    seed_entities: list[str] = Field(default_factory=list)
    items: list[ItemOutput]
    trace_id: str
    warnings: list[str] = Field(default_factory=list)


class CandidateOutput(Output):
    """An existing memory the new one could be linked to."""

    id: str
    content: str
    similarity: float
    edge_type: str
    reason: str = ""


class EdgeOutput(Output):
    """A stored edge."""

    source: str
    target: str
    type: str
    weight: float
    metadata: dict[str, str] = Field(default_factory=dict)


class WriteOutput(Output):
    """Result of ``memory_write``."""

    store: str
    id: str
    action: str
    duplicate_of: str | None = None
    candidates: list[CandidateOutput] = Field(default_factory=list)
    links_created: list[EdgeOutput] = Field(default_factory=list)
    superseded: list[str] = Field(default_factory=list)
    trace_id: str
    warnings: list[str] = Field(default_factory=list)


class ExplainOutput(Output):
    """Result of ``memory_explain``: the full trace document."""

    trace_id: str
    trace: dict[str, Any]


class CheckOutput(Output):
    """One readiness check."""

    name: str
    status: Literal["ok", "degraded", "error"]
    detail: str = ""
    duration_ms: float = 0.0


class HealthOutput(Output):
    """Result of ``memory_health``."""

    store: str
    status: Literal["ok", "degraded", "error"]
    backend: str
    version: str = ""
    memory_count: int | None = None
    checks: list[CheckOutput]


class StoreAccessOutput(Output):
    """One store a caller may use: its rights there, and its memory count when it could be read."""

    store: str
    read: bool
    write: bool
    exists: bool
    memory_count: int | None = None


class StoresOutput(Output):
    """Result of ``memory_stores``: an empty ``stores`` means not authorised (``note`` says so)."""

    caller: str
    stores: list[StoreAccessOutput]
    note: str = ""
    warnings: list[str] = Field(default_factory=list)


class MemoryOutput(Output):
    """A full stored memory."""

    id: str
    content: str
    category: str
    importance: int
    tags: list[str]
    entities: list[str]
    source: str
    created_at: str
    updated_at: str
    superseded_by: list[str] = Field(default_factory=list)
    metadata: dict[str, str] = Field(default_factory=dict)


class GetOutput(Output):
    """Result of ``memory_get``."""

    store: str
    memories: list[MemoryOutput]
    missing: list[str] = Field(default_factory=list, description="Ids that are unknown or forgotten.")


class LinkOutput(Output):
    """Result of ``memory_link``."""

    store: str
    edge: EdgeOutput


class ForgetOutput(Output):
    """Result of ``memory_forget``."""

    store: str
    id: str
    forgotten: bool


class ChangeOutput(Output):
    """One change, oldest first."""

    kind: str
    memory_id: str
    at: str
    summary: str = ""
    detail: str = ""


class ChangesOutput(Output):
    """Result of ``memory_changes``."""

    store: str
    since: str
    until: str
    method: str = Field(description="change_log (the backend's history) or reconstructed (from memories).")
    added: list[str]
    updated: list[str]
    superseded: list[str]
    forgotten: list[str]
    events: list[ChangeOutput]
    not_visible: list[str] = Field(default_factory=list, description="What this answer could not see.")


class ChainLinkOutput(Output):
    """One memory of a provenance chain."""

    role: str
    memory_id: str
    content: str
    category: str
    created_at: str
    edge_type: str | None = None
    evidence: str = ""
    score: float


class WhyOutput(Output):
    """Result of ``memory_why``."""

    store: str
    question: str
    focus_id: str | None
    chain: list[ChainLinkOutput]
    supersession: list[ChainLinkOutput] = Field(default_factory=list)
    trace_id: str
    notes: list[str] = Field(default_factory=list)


class WrittenPointOutput(Output):
    """One session point as stored."""

    id: str
    category: str
    action: str
    duplicate_of: str | None = None
    content: str


class SessionSummaryOutput(Output):
    """Result of ``memory_session_summary``."""

    store: str
    session_id: str
    session_entity: str
    written: list[WrittenPointOutput]
    links_created: int
    dropped_duplicates: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
