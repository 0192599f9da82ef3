"""The write path's I/O: look for similar memories, decide (``writing.py``), store, supersede, link.

Everything that can be checked is checked before the first write (link targets and superseded ids
must exist), so bad input changes nothing. After the memory is stored, a failing link is reported as
a warning rather than raised, because raising would hide that the memory was written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field, replace

from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.deadlines import within
from memory_orchestrator.domain.requests import WriteRequest
from memory_orchestrator.domain.trace import Trace
from memory_orchestrator.domain.writing import (
    Duplicate,
    contradiction_candidates,
    find_duplicate,
    link_proposals,
)
from memory_orchestrator.ports import (
    BackendError,
    Edge,
    EdgeType,
    InvalidRequest,
    LinkCandidate,
    MemoryBackend,
    MemoryRecord,
    WriteAction,
)
from memory_orchestrator.ports.similar import SimilarMemories

#: Memories compared with a new one for duplicates and contradictions.
SIMILAR_LIMIT = 20
#: Similarity from which ``auto_link`` links a proposal (when the backend made no such edge itself).
AUTO_LINK_MIN = 0.5
AUTO_LINK_MAX = 2


@dataclass(slots=True)
class WriteDecision:
    """What the write path did (the orchestrator adds the trace id)."""

    id: str
    action: WriteAction
    duplicate_of: str | None = None
    candidates: tuple[LinkCandidate, ...] = ()
    links_created: tuple[Edge, ...] = ()
    superseded: tuple[str, ...] = ()
    warnings: list[str] = field(default_factory=list)


async def run_write(
    backend: MemoryBackend,
    request: WriteRequest,
    *,
    config: PipelineConfig,
    known_entities: Sequence[str],
    trace: Trace,
) -> WriteDecision:
    """Store ``request.memory`` through the write path (see the module docstring)."""
    if config.passthrough:
        result = await backend.remember(request.memory)
        return WriteDecision(result.id, result.action, result.duplicate_of, result.candidates)
    await _check_targets(backend, request)
    similar = await _similar(backend, request, config, trace)
    duplicate = find_duplicate(request.memory, similar, config.write_dedup_threshold)
    proposals = link_proposals(request.memory, similar, set(), known_entities)
    if duplicate is not None and (not request.replace or duplicate.exact):
        trace.record(
            "write", decision="skipped", duplicate_of=duplicate.record.id, similarity=duplicate.similarity
        )
        others = tuple(p for p in proposals if p.id != duplicate.record.id)
        # A retried write (same content) converges: the links it asks for are made on the stored memory.
        links = (
            await _converged_links(backend, duplicate.record.id, request, trace) if duplicate.exact else []
        )
        return WriteDecision(
            duplicate.record.id, WriteAction.SKIPPED, duplicate.record.id, others, tuple(links)
        )
    if request.replace and duplicate is None:
        trace.warn("replace=True but no near-duplicate memory exists; stored as a new memory")
    contradictions = contradiction_candidates(request.memory, similar, known_entities)
    result = await backend.remember(request.memory)
    if result.action is WriteAction.SKIPPED:
        trace.record("write", decision="skipped by backend", duplicate_of=result.duplicate_of)
        links = await _converged_links(backend, result.id, request, trace)
        return WriteDecision(
            result.id, WriteAction.SKIPPED, result.duplicate_of, result.candidates, tuple(links)
        )
    replaced = [duplicate.record.id] if duplicate is not None else []
    superseded_ids = list(dict.fromkeys([*request.supersedes, *replaced]))
    links = await _link_all(backend, result.id, superseded_ids, request, trace)
    if request.auto_link and not (result.edges_created.get("semantic") or result.edges_created.get("entity")):
        links += await _auto_links(backend, result.id, proposals, superseded_ids, trace)
    candidates = _merge(contradictions, result.candidates, proposals, exclude={result.id, *superseded_ids})
    action = WriteAction.UPDATED if duplicate is not None else WriteAction.ADDED
    trace.record(
        "write",
        decision=action.value,
        replaced=replaced,
        superseded=superseded_ids,
        contradictions=[candidate.id for candidate in contradictions],
        edges_created=dict(result.edges_created),
    )
    return WriteDecision(
        result.id,
        action,
        duplicate.record.id if duplicate is not None else None,
        candidates,
        tuple(links),
        tuple(superseded_ids),
    )


async def _check_targets(backend: MemoryBackend, request: WriteRequest) -> None:
    ends = [memory_id for edge in request.links for memory_id in (edge.target, edge.source) if memory_id]
    wanted = list(dict.fromkeys([*request.supersedes, *ends]))
    if not wanted:
        return
    found = {record.id for record in await backend.get(wanted)}
    missing = [memory_id for memory_id in wanted if memory_id not in found]
    if missing:
        raise InvalidRequest("unknown memory id(s) in supersedes/links: " + ", ".join(missing))


async def _similar(
    backend: MemoryBackend, request: WriteRequest, config: PipelineConfig, trace: Trace
) -> list[MemoryRecord]:
    text = request.memory.content[:1000]
    if isinstance(backend, SimilarMemories):
        # a bounded lookup of the closest memories; a keyword search ranks every match
        call: Awaitable[list[MemoryRecord]] = backend.similar_memories(text, limit=SIMILAR_LIMIT)
    elif backend.capabilities.keyword_search:
        call = _searched(backend, text)
    else:
        trace.warn("backend has no keyword search; duplicate check left to the backend")
        return []
    try:
        records = await within(call, config.stage_timeout_s)
    except Exception as exc:  # the backend's own exact-duplicate check still applies
        trace.warn(f"duplicate check skipped: search failed ({type(exc).__name__})")
        return []
    return [record for record in records if not record.superseded_by]


async def _searched(backend: MemoryBackend, text: str) -> list[MemoryRecord]:
    return [hit.record for hit in await backend.search(text, limit=SIMILAR_LIMIT)]


async def _converged_links(
    backend: MemoryBackend, existing: str, request: WriteRequest, trace: Trace
) -> list[Edge]:
    """The requested links and supersessions, made (again: linking is idempotent) on the stored memory."""
    if not request.links and not request.supersedes:
        return []
    return await _link_all(backend, existing, list(request.supersedes), request, trace)


async def _link_all(
    backend: MemoryBackend, new_id: str, superseded: list[str], request: WriteRequest, trace: Trace
) -> list[Edge]:
    edges = [Edge(new_id, old_id, EdgeType.SUPERSEDES, 1.0) for old_id in superseded]
    edges += [
        replace(edge, source=edge.source or new_id, target=edge.target or new_id) for edge in request.links
    ]
    created: list[Edge] = []
    for edge in edges:
        try:
            created.append(await backend.link(edge))
        except Exception as exc:  # the memory is stored: the answer must say so, whatever failed
            trace.warn(
                f"memory {new_id} stored but link {edge.source}->{edge.target} failed "
                f"({type(exc).__name__}); write it again to retry the link"
            )
    return created


async def _auto_links(
    backend: MemoryBackend, new_id: str, proposals: Sequence[LinkCandidate], skip: list[str], trace: Trace
) -> list[Edge]:
    chosen = [p for p in proposals if p.similarity >= AUTO_LINK_MIN and p.id not in skip][:AUTO_LINK_MAX]
    created: list[Edge] = []
    for proposal in chosen:
        edge = Edge(new_id, proposal.id, proposal.edge_type, min(1.0, proposal.similarity))
        try:
            created.append(await backend.link(edge))
        except BackendError as exc:
            trace.warn(f"auto-link {new_id}->{proposal.id} failed ({type(exc).__name__})")
    return created


def _merge(*groups: Sequence[LinkCandidate], exclude: set[str]) -> tuple[LinkCandidate, ...]:
    merged: dict[str, LinkCandidate] = {}
    for group in groups:
        for candidate in group:
            if candidate.id not in exclude and candidate.id not in merged:
                merged[candidate.id] = candidate
    return tuple(merged.values())


__all__ = ["Duplicate", "WriteDecision", "run_write"]
