"""The ``expand`` operation: a graph walk from given memories or from memories naming entities."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from memory_orchestrator.domain.candidates import Candidate
from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.deadlines import within
from memory_orchestrator.domain.pipeline import result_item
from memory_orchestrator.domain.ranking import RankingContext, rank
from memory_orchestrator.domain.requests import ExpandRequest
from memory_orchestrator.domain.results import ResultItem
from memory_orchestrator.domain.retrieval import exclusion, native_filters
from memory_orchestrator.domain.trace import Trace
from memory_orchestrator.domain.traversal import expand, relative_edge_weights
from memory_orchestrator.ports import EdgeType, Filters, MemoryBackend, MemoryRecord, NotFound

#: Weight given to an explicitly requested edge type the intent would not follow (e.g. supersedes).
REQUESTED_TYPE_FLOOR = 0.25


async def run_expand(
    backend: MemoryBackend, request: ExpandRequest, *, now: datetime, config: PipelineConfig, trace: Trace
) -> tuple[tuple[str, ...], list[ResultItem]]:
    """Resolve the seeds, walk the graph and rank what was reached; returns (seed ids, items)."""
    seeds = await _seeds(backend, request, now, config, trace)
    if not seeds:
        return (), []
    pool = {seed.memory_id: seed for seed in seeds}
    weights = _weights(request, config)
    limits = config.expansion
    walk_config = config
    if request.limit > limits.max_visited:
        walk_config = replace(config, expansion=replace(limits, max_visited=request.limit))
    with trace.timed("expansion"):
        outcome = await expand(
            backend,
            seeds,
            pool,
            weights=weights,
            hops=request.hops,
            filters=Filters(),
            now=now,
            config=walk_config,
            intent=request.intent,
        )
    for warning in outcome.warnings:
        trace.warn(warning)
    for memory_id, reason in outcome.dropped:
        trace.drop(memory_id, reason, "expansion")
    trace.record("expansion", decisions=outcome.decisions, neighbor_calls=outcome.neighbor_calls)
    context = RankingContext(
        query="", intent=request.intent, entities=tuple(request.seed_entities), now=now, strategy="expanded"
    )
    ranked, warnings = rank(outcome.added, context, config)
    for warning in warnings:
        trace.warn(warning)
    return tuple(seed.memory_id for seed in seeds), [result_item(item) for item in ranked[: request.limit]]


def _weights(request: ExpandRequest, config: PipelineConfig) -> dict[EdgeType, float]:
    if request.edge_types is None:
        return relative_edge_weights(config.edge_weights, request.intent, config.allowed_edge_types)
    row = config.edge_weights.get(request.intent, {})
    chosen = {kind: max(row.get(kind, 0.0), REQUESTED_TYPE_FLOOR) for kind in request.edge_types}
    strongest = max(chosen.values(), default=1.0)
    return {kind: weight / strongest for kind, weight in chosen.items()}


async def _seeds(
    backend: MemoryBackend, request: ExpandRequest, now: datetime, config: PipelineConfig, trace: Trace
) -> list[Candidate]:
    records: list[MemoryRecord] = []
    try:
        if request.seeds:
            records.extend(await within(backend.get(list(request.seeds)), config.stage_timeout_s))
        if request.seed_entities:
            records.extend(await _entity_seeds(backend, request, now, config))
    except Exception as exc:  # the read path degrades, it does not raise
        trace.warn(f"seeds could not be read ({type(exc).__name__}); nothing to expand")
        return []
    found = {record.id for record in records}
    missing = [memory_id for memory_id in request.seeds if memory_id not in found]
    for memory_id in missing:
        trace.warn(f"seed {memory_id} not found")
    if not records:
        raise NotFound("none of the seeds exists: " + ", ".join([*request.seeds, *request.seed_entities]))
    unique = {record.id: record for record in records if exclusion(record, Filters(), now) is None}
    return [Candidate(record, relevance=1.0) for record in unique.values()]


async def _entity_seeds(
    backend: MemoryBackend, request: ExpandRequest, now: datetime, config: PipelineConfig
) -> list[MemoryRecord]:
    wanted = Filters(entities=tuple(request.seed_entities))
    native = native_filters(wanted, backend.capabilities)
    limit = config.expansion.beam_width if native.entities else config.candidates_per_channel * 4
    recent = await within(backend.recent(limit=limit, filters=native, now=now), config.stage_timeout_s)
    return [record for record in recent if wanted.admits(record)][: config.expansion.beam_width]
