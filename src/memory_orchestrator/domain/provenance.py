"""Provenance behind the ``why`` tool: what a decision came from, and what came of it.

:func:`explain_why` finds the decision or fact a question is about, follows causal edges backwards
to its causes (several hops), forwards one hop to its consequences, and lists its supersession
history; the chain is ordered cause -> decision -> consequence, each link with its evidence and score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory_orchestrator.domain.requests import PlanOverrides, SearchRequest
from memory_orchestrator.domain.results import ResultItem
from memory_orchestrator.domain.sessions import SearchesAndWrites
from memory_orchestrator.ports import (
    BackendError,
    Edge,
    EdgeType,
    Intent,
    MemoryBackend,
    MemoryRecord,
    Neighbor,
    format_timestamp,
)


@dataclass(frozen=True, slots=True)
class ChainLink:
    """One memory of a provenance chain; ``role`` is cause, decision, consequence, replaces, replaced_by
    or related. ``score`` is the product of the edge weights from the focus (1.0 for the focus)."""

    role: str
    record: MemoryRecord
    score: float
    edge_type: EdgeType | None = None
    evidence: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "role": self.role,
            "memory_id": self.record.id,
            "content": self.record.content,
            "category": self.record.category,
            "created_at": format_timestamp(self.record.created_at),
            "edge_type": self.edge_type.value if self.edge_type else None,
            "evidence": self.evidence,
            "score": round(self.score, 4),
        }


@dataclass(frozen=True, slots=True)
class WhyReport:
    """The provenance of the memory a why-question is about."""

    question: str
    focus_id: str | None
    chain: tuple[ChainLink, ...]
    supersession: tuple[ChainLink, ...]
    trace_id: str
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "question": self.question,
            "focus_id": self.focus_id,
            "chain": [link.to_dict() for link in self.chain],
            "supersession": [link.to_dict() for link in self.supersession],
            "trace_id": self.trace_id,
            "notes": list(self.notes),
        }


async def explain_why(
    orchestrator: SearchesAndWrites,
    backend: MemoryBackend,
    question: str,
    *,
    depth: int = 3,
    now: datetime | None = None,
) -> WhyReport:
    """Find what ``question`` is about and return its causes, itself and its consequences in order."""
    request = SearchRequest(query=question, top_k=8, now=now, overrides=PlanOverrides(intent=Intent.WHY))
    result = await orchestrator.search(request)
    notes = list(result.warnings)
    options = focus_options(result.items)
    if not options:
        return WhyReport(question, None, (), (), result.trace_id, (*notes, "no memory matches the question"))
    records = {record.id: record for record in await backend.get([item.memory_id for item in options])}
    present = [records[item.memory_id] for item in options if item.memory_id in records]
    if not present:
        return WhyReport(question, None, (), (), result.trace_id, (*notes, "the matching memory is gone"))
    focus = present[0]
    try:
        focus, causes = await _focus_with_causes(backend, present, depth)
        consequences = await _consequences(backend, focus)
        supersession = await _supersession_history(backend, focus)
    except BackendError as exc:
        notes.append(f"the graph could not be walked completely ({type(exc).__name__})")
        causes, consequences, supersession = [], [], []
    if not causes and not consequences:
        notes.append(
            "no causal links are recorded for this memory; related search results are listed instead"
        )
        consequences = _related(result.items, focus.id)
    chain = (*sorted(causes, key=_chronological), ChainLink("decision", focus, 1.0), *consequences)
    return WhyReport(question, focus.id, tuple(chain), tuple(supersession), result.trace_id, tuple(notes))


async def _focus_with_causes(
    backend: MemoryBackend, options: Sequence[MemoryRecord], depth: int
) -> tuple[MemoryRecord, list[ChainLink]]:
    """The best option whose causes are recorded (else the best option) and those causes.

    A why-question asks for provenance: a near-equal hit without any (a later note on the same
    topic, say) would answer nothing while the decision that has its causes recorded is right there.
    """
    for record in options:
        causes = await _walk_causes(backend, record, depth)
        if causes:
            return record, causes
    return options[0], []


def focus_options(items: Sequence[ResultItem]) -> list[ResultItem]:
    """What a why-question may be about, best first: the current direct decisions among the top
    three hits, else the best direct hit."""
    direct = [item for item in items if not item.path] or list(items)
    decisions = [item for item in direct[:3] if item.category == "decision" and not item.superseded]
    return decisions or direct[:1]


def _chronological(link: ChainLink) -> tuple[datetime, str]:
    return (link.record.created_at, link.record.id)


def _evidence(edge: Edge) -> str:
    for key in ("evidence", "reason", "cue"):
        if edge.metadata.get(key):
            return str(edge.metadata[key])
    return f"{edge.type.value} edge {edge.source} -> {edge.target} (weight {edge.weight:.2f})"


def _is_earlier(neighbour: Neighbor, anchor: MemoryRecord) -> bool:
    # Backends store causal edges in both directions, so time decides which end is the cause; the
    # stored direction only breaks ties between memories written in the same instant.
    if neighbour.record.created_at != anchor.created_at:
        return neighbour.record.created_at < anchor.created_at
    return neighbour.edge.source == neighbour.record.id


async def _walk_causes(backend: MemoryBackend, focus: MemoryRecord, depth: int) -> list[ChainLink]:
    found: dict[str, ChainLink] = {}
    frontier = {focus.id: (focus, 1.0)}
    for _hop in range(depth):
        if not frontier:
            break
        neighbours = await backend.neighbors(list(frontier), edge_types=(EdgeType.CAUSAL,), hops=1, limit=100)
        next_frontier: dict[str, tuple[MemoryRecord, float]] = {}
        for neighbour in neighbours:
            anchor, score = frontier.get(neighbour.from_id, (focus, 1.0))
            rid = neighbour.record.id
            if rid == focus.id or rid in found or not _is_earlier(neighbour, anchor):
                continue
            link_score = score * neighbour.edge.weight
            found[rid] = ChainLink(
                "cause", neighbour.record, link_score, EdgeType.CAUSAL, _evidence(neighbour.edge)
            )
            next_frontier[rid] = (neighbour.record, link_score)
        frontier = next_frontier
    return list(found.values())


async def _consequences(backend: MemoryBackend, focus: MemoryRecord) -> list[ChainLink]:
    neighbours = await backend.neighbors([focus.id], edge_types=(EdgeType.CAUSAL,), hops=1, limit=50)
    links = {
        n.record.id: ChainLink("consequence", n.record, n.edge.weight, EdgeType.CAUSAL, _evidence(n.edge))
        for n in neighbours
        if not _is_earlier(n, focus)
    }
    return sorted(links.values(), key=_chronological)


async def _supersession_history(backend: MemoryBackend, focus: MemoryRecord) -> list[ChainLink]:
    links: list[ChainLink] = []
    neighbours = await backend.neighbors([focus.id], edge_types=(EdgeType.SUPERSEDES,), hops=1, limit=50)
    for n in neighbours:
        role = "replaces" if n.edge.source == focus.id else "replaced_by"
        links.append(ChainLink(role, n.record, n.edge.weight, EdgeType.SUPERSEDES, _evidence(n.edge)))
    seen = {link.record.id for link in links}
    missing = [memory_id for memory_id in focus.superseded_by if memory_id not in seen]
    for record in await backend.get(missing) if missing else []:
        links.append(
            ChainLink("replaced_by", record, 1.0, EdgeType.SUPERSEDES, f"{record.id} supersedes {focus.id}")
        )
    return sorted(links, key=_chronological)


def _related(items: Sequence[ResultItem], focus_id: str) -> list[ChainLink]:
    related: list[ChainLink] = []
    for item in items:
        if item.memory_id == focus_id or len(related) == 3:
            continue
        record = MemoryRecord(
            id=item.memory_id,
            content=item.content,
            created_at=item.created_at,
            updated_at=item.created_at,
            category=item.category,
            entities=item.entities,
            source=item.source,
        )
        reason = item.reasons[0] if item.reasons else "found by the same search"
        related.append(ChainLink("related", record, item.score, None, reason))
    return related
