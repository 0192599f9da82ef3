"""The write-time edge rules every backend applies when a memory is stored.

Pure and standard-library only. A backend gathers candidate memories cheaply (same source near the new
memory's time, within 24 hours, sharing an entity, lexically similar) and asks :func:`plan_edges` which
edges to create, so every store builds the same graph from the same writes. "Recent" and "previous"
are measured from the new memory's ``created_at``: a back-dated write links to its true neighbours.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from memory_orchestrator.ports.records import (
    MAX_ENTITIES,
    Edge,
    EdgeType,
    LinkCandidate,
    MemoryRecord,
    NewMemory,
)
from memory_orchestrator.ports.text import (
    causal_subtype,
    extract_entities,
    has_causal_cue,
    matched_names,
    overlap,
    tokenize,
)


@dataclass(frozen=True, slots=True)
class LinkLimits:
    """Bounds of the automatic edges of one new memory."""

    proximity_hours: float = 24.0
    proximity_max: int = 10
    entity_per_name: int = 5
    entity_max: int = 50
    causal_window: int = 10
    causal_min_overlap: float = 0.15
    semantic_min_jaccard: float = 0.30
    semantic_min_overlap: float = 0.50
    semantic_max: int = 3
    candidates_max: int = 5
    candidate_min_similarity: float = 0.40
    near_duplicate: float = 0.85


DEFAULT_LIMITS = LinkLimits()


@dataclass(frozen=True, slots=True)
class MemorySketch:
    """What the link rules need to know about one memory."""

    id: str
    content: str
    source: str
    created_at: datetime
    tokens: frozenset[str]
    entities: frozenset[str] = field(default_factory=frozenset)


def sketch(record: MemoryRecord) -> MemorySketch:
    """The sketch of a stored memory (entity names casefolded)."""
    return MemorySketch(
        id=record.id,
        content=record.content,
        source=record.source,
        created_at=record.created_at,
        tokens=frozenset(tokenize(record.content)),
        entities=frozenset(name.casefold() for name in record.entities),
    )


def entities_for(memory: NewMemory, known: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The entities stored with ``memory``: the given ones, those extracted from its content, then the
    store's known names (``known``: casefolded name -> spelling) that its content mentions.

    Deduplicated case-insensitively (first spelling wins) and capped at ``MAX_ENTITIES``. A backend
    finds ``known`` by looking up ``ports.text.name_candidates(memory.content)`` among its names.
    """
    seen: set[str] = set()
    names: list[str] = []
    extracted = extract_entities(memory.content)
    mentioned = matched_names(memory.content, known) if known else []
    for name in (*memory.entities, *extracted, *mentioned):
        cleaned = name.strip()
        if cleaned and cleaned.casefold() not in seen and len(cleaned) <= 200:
            seen.add(cleaned.casefold())
            names.append(cleaned)
    return tuple(names[:MAX_ENTITIES])


def plan_edges(
    new: MemorySketch,
    candidates: Iterable[MemorySketch],
    *,
    at: datetime,
    entity_counts: Mapping[str, int] | None = None,
    limits: LinkLimits = DEFAULT_LIMITS,
) -> list[Edge]:
    """The automatic edges of ``new`` given its candidate neighbours; at most one edge per (pair, type).

    ``entity_counts`` (casefolded name -> number of memories carrying it) makes rare shared entities
    weigh more than common ones. ``at`` stamps the edges' ``created_at``.
    """
    pool = _unique_others(new, candidates)
    edges: list[Edge] = []
    edges.extend(_temporal_edges(new, pool, at, limits))
    edges.extend(_entity_edges(new, pool, at, entity_counts or {}, limits))
    edges.extend(_causal_edges(new, pool, at, limits))
    edges.extend(_semantic_edges(new, pool, at, limits))
    return edges


def _unique_others(new: MemorySketch, candidates: Iterable[MemorySketch]) -> list[MemorySketch]:
    by_id = {candidate.id: candidate for candidate in candidates if candidate.id != new.id}
    return sorted(by_id.values(), key=lambda item: item.id)


def _hours_apart(a: datetime, b: datetime) -> float:
    return abs((a - b).total_seconds()) / 3600.0


def _nearness(new: MemorySketch, item: MemorySketch) -> tuple[float, datetime, str]:
    """Sort key: nearest in time first, then the earlier one, then the id (store-specific, last)."""
    return (_hours_apart(item.created_at, new.created_at), item.created_at, item.id)


def _temporal_edges(
    new: MemorySketch, pool: list[MemorySketch], at: datetime, limits: LinkLimits
) -> list[Edge]:
    same_source = [item for item in pool if item.source == new.source]
    before = [item for item in same_source if (item.created_at, item.id) < (new.created_at, new.id)]
    after = [item for item in same_source if (item.created_at, item.id) > (new.created_at, new.id)]
    backbone: list[MemorySketch] = []
    if before:
        backbone.append(max(before, key=lambda item: (item.created_at, item.id)))
    if after:
        # A back-dated write slots into the chain: it also links forward to its successor.
        backbone.append(min(after, key=lambda item: (item.created_at, item.id)))
    edges = [Edge(new.id, item.id, EdgeType.TEMPORAL, 1.0, {"sub_type": "backbone"}, at) for item in backbone]
    linked = {item.id for item in backbone}
    near = [
        item
        for item in pool
        if item.id not in linked and _hours_apart(item.created_at, new.created_at) <= limits.proximity_hours
    ]
    near.sort(key=lambda item: _nearness(new, item))
    for item in near[: limits.proximity_max]:
        weight = round(1.0 / (1.0 + _hours_apart(item.created_at, new.created_at)), 6)
        edges.append(Edge(new.id, item.id, EdgeType.TEMPORAL, weight, {"sub_type": "proximity"}, at))
    return edges


def _rarity(name: str, entity_counts: Mapping[str, int]) -> float:
    # A name carried by few memories says more about a pair than one carried by thousands.
    count = max(1, entity_counts.get(name, 1))
    return 1.0 / (1.0 + math.log(count))


def _entity_edges(
    new: MemorySketch,
    pool: list[MemorySketch],
    at: datetime,
    entity_counts: Mapping[str, int],
    limits: LinkLimits,
) -> list[Edge]:
    shared_by_target: dict[str, list[str]] = {}
    targets: dict[str, MemorySketch] = {}
    for name in sorted(new.entities):
        carriers = [item for item in pool if name in item.entities]
        carriers.sort(key=lambda item: _nearness(new, item))
        for item in carriers[: limits.entity_per_name]:
            shared_by_target.setdefault(item.id, []).append(name)
            targets[item.id] = item
    ranked = sorted(
        targets.values(),
        key=lambda item: (-len(shared_by_target[item.id]), *_nearness(new, item)),
    )
    edges: list[Edge] = []
    for item in ranked[: limits.entity_max]:
        names = shared_by_target[item.id]
        strongest = max(_rarity(name, entity_counts) for name in names)
        weight = round(min(1.0, strongest + 0.1 * (len(names) - 1)), 6)
        metadata = {"sub_type": "shared_entity", "entities": ",".join(names)}
        edges.append(Edge(new.id, item.id, EdgeType.ENTITY, weight, metadata, at))
    return edges


def _causal_edges(
    new: MemorySketch, pool: list[MemorySketch], at: datetime, limits: LinkLimits
) -> list[Edge]:
    earlier = [
        item
        for item in pool
        if item.source == new.source and (item.created_at, item.id) < (new.created_at, new.id)
    ]
    earlier.sort(key=lambda item: (item.created_at, item.id), reverse=True)
    new_cued = has_causal_cue(new.content)
    edges: list[Edge] = []
    for item in earlier[: limits.causal_window]:
        old_cued = has_causal_cue(item.content)
        if not (new_cued or old_cued):
            continue
        similarity = overlap(new.tokens, item.tokens)
        if similarity < limits.causal_min_overlap:
            continue
        # The text stating the reason is the effect; when both do, the later one is.
        cause, effect = (item, new) if new_cued else (new, item)
        subtype = causal_subtype(effect.content) or "causes"
        weight = round(min(1.0, 0.5 + similarity / 2), 6)
        metadata = {"sub_type": subtype, "overlap": f"{similarity:.3f}"}
        edges.append(Edge(cause.id, effect.id, EdgeType.CAUSAL, weight, metadata, at))
    return edges


def _similarity(new: MemorySketch, item: MemorySketch) -> float:
    return max(_scores(new, item))


def _scores(new: MemorySketch, item: MemorySketch) -> tuple[float, float]:
    """``(jaccard, overlap)`` of the two token sets from one intersection (the same numbers as
    :func:`jaccard` and :func:`overlap`, which each intersect again)."""
    a, b = new.tokens, item.tokens
    shared = len(a & b)
    union = len(a) + len(b) - shared
    largest = max(len(a), len(b))
    return (shared / union if union else 0.0, shared / largest if a and b else 0.0)


def _jaccard_and_similarity(new: MemorySketch, item: MemorySketch) -> tuple[float, float]:
    score_j, score_o = _scores(new, item)
    return score_j, max(score_j, score_o)


def _semantic_edges(
    new: MemorySketch, pool: list[MemorySketch], at: datetime, limits: LinkLimits
) -> list[Edge]:
    scored: list[tuple[float, MemorySketch]] = []
    for item in pool:
        score_j, score_o = _scores(new, item)
        if score_j >= limits.semantic_min_jaccard or score_o >= limits.semantic_min_overlap:
            scored.append((max(score_j, score_o), item))
    # Equal scores go to the memory nearest in time: ids differ between stores, times do not.
    scored.sort(key=lambda pair: (-pair[0], *_nearness(new, pair[1])))
    return [
        Edge(new.id, item.id, EdgeType.SEMANTIC, round(score, 6), {"sub_type": "lexical"}, at)
        for score, item in scored[: limits.semantic_max]
    ]


def link_candidates(
    new: MemorySketch, candidates: Iterable[MemorySketch], *, limits: LinkLimits = DEFAULT_LIMITS
) -> tuple[LinkCandidate, ...]:
    """Existing memories similar enough to ``new`` to be worth a look (near duplicates first)."""
    scored = [(*_jaccard_and_similarity(new, item), item) for item in _unique_others(new, candidates)]
    kept = [entry for entry in scored if entry[1] >= limits.candidate_min_similarity]
    kept.sort(key=lambda entry: (-entry[0], -entry[1], *_nearness(new, entry[2])))
    found: list[LinkCandidate] = []
    for score_j, score, item in kept[: limits.candidates_max]:
        near_duplicate = score_j >= limits.near_duplicate
        reason = f"near duplicate (jaccard {score_j:.2f})" if near_duplicate else f"similar ({score:.2f})"
        found.append(LinkCandidate(item.id, item.content, round(score, 6), EdgeType.SEMANTIC, reason))
    return tuple(found)
