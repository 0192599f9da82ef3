"""The write-time edge rules every backend applies when a memory is stored.

Pure and standard-library only. A backend gathers candidate memories cheaply (same source near the new
memory's time, within 24 hours, sharing an entity, lexically similar) and asks :func:`plan_edges` which
edges to create, so every store builds the same graph from the same writes. "Recent" and "previous"
are measured from the new memory's ``created_at``: a back-dated write links to its true neighbours.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from operator import itemgetter
from typing import NamedTuple

from memory_orchestrator.ports.records import (
    MAX_ENTITIES,
    Edge,
    EdgeType,
    LinkCandidate,
    MemoryRecord,
    NewMemory,
    automatic_edge,
    frozen,
)
from memory_orchestrator.ports.text import (
    causal_subtype,
    extract_entities,
    has_causal_cue,
    matched_names,
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


def sketch_tokens(tokens: Iterable[str]) -> frozenset[str]:
    """A sketch's token set, each word interned (one string per distinct word, not one per memory and
    word): backends keep many sketches in memory (the SQLite adapter's ``writes.SketchCache``)."""
    return frozenset(map(sys.intern, tokens))


def sketch(record: MemoryRecord, tokens: Iterable[str] | None = None) -> MemorySketch:
    """The sketch of a stored memory (entity names casefolded); ``tokens``, when the caller has
    them, are ``ports.text.tokenize(record.content)``."""
    return MemorySketch(
        id=record.id,
        content=record.content,
        source=record.source,
        created_at=record.created_at,
        tokens=sketch_tokens(tokenize(record.content) if tokens is None else tokens),
        entities=frozenset(name.casefold() for name in record.entities),
    )


def entities_for(
    memory: NewMemory, known: Mapping[str, str] | None = None, extracted: Sequence[str] | None = None
) -> tuple[str, ...]:
    """The entities stored with ``memory``: the given ones, those extracted from its content, then the
    store's known names (``known``: casefolded name -> spelling) that its content mentions.

    Deduplicated case-insensitively (first spelling wins) and capped at ``MAX_ENTITIES``. A backend
    finds ``known`` by looking up ``ports.text.name_candidates(memory.content)`` among its names;
    ``extracted``, when the caller has it, is ``ports.text.extract_entities(memory.content)``.
    """
    seen: set[str] = set()
    names: list[str] = []
    if extracted is None:
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
    return _edges(new, _pool(new, candidates), at, entity_counts or {}, limits)


def plan_links(
    new: MemorySketch,
    candidates: Iterable[MemorySketch],
    *,
    at: datetime,
    entity_counts: Mapping[str, int] | None = None,
    limits: LinkLimits = DEFAULT_LIMITS,
) -> tuple[list[Edge], tuple[LinkCandidate, ...]]:
    """``plan_edges`` and ``link_candidates`` of one write from one pass over the candidates (each
    pair's distance in time and token scores computed once); the same results as the two calls."""
    pool = _pool(new, candidates)
    return _edges(new, pool, at, entity_counts or {}, limits), _link_candidates(pool, limits)


class _Other(NamedTuple):
    """One candidate seen from the new memory: its sort key by nearness and its token scores (a
    tuple: a write builds one per candidate, tens of them, and a frozen dataclass costs more)."""

    item: MemorySketch
    hours: float
    #: nearest in time first, then the earlier one, then the id (store-specific, last)
    near: tuple[float, datetime, str]
    #: (created_at, id): the order of the same source's chain
    order: tuple[datetime, str]
    jaccard: float
    overlap: float


def _pool(new: MemorySketch, candidates: Iterable[MemorySketch]) -> list[_Other]:
    # One loop over every candidate of every write: the time distance and both token scores (the
    # numbers ports.text.jaccard and overlap give) from one set intersection, inline. The pool's order
    # does not matter: every rule sorts or picks by a key that ends in the (unique) id.
    by_id = {candidate.id: candidate for candidate in candidates}
    by_id.pop(new.id, None)
    tokens, size, at = new.tokens, len(new.tokens), new.created_at
    make = tuple.__new__  # _Other(...) goes through a Python-level __new__
    pool = []
    for item in by_id.values():
        created = item.created_at
        hours = abs((created - at).total_seconds()) / 3600.0
        other = item.tokens
        shared = len(tokens & other)
        count = len(other)
        union = size + count - shared
        score_j = shared / union if union else 0.0
        score_o = shared / (size if size > count else count) if size and count else 0.0
        fields = (item, hours, (hours, created, item.id), (created, item.id), score_j, score_o)
        pool.append(make(_Other, fields))
    return pool


def _edges(
    new: MemorySketch, pool: list[_Other], at: datetime, counts: Mapping[str, int], limits: LinkLimits
) -> list[Edge]:
    key = (new.created_at, new.id)
    source = new.source
    # the same source's chain before the new memory, nearest first (the backbone and the causal rule)
    earlier = [other for other in pool if other.item.source == source and other.order < key]
    earlier.sort(key=_chain_order, reverse=True)
    later = [other for other in pool if other.item.source == source and other.order > key]
    edges = _temporal_edges(new, pool, earlier, later, at, limits)
    if new.entities:
        edges.extend(_entity_edges(new, pool, at, counts, limits))
    edges.extend(_causal_edges(new, earlier, at, limits))
    edges.extend(_semantic_edges(new, pool, at, limits))
    return edges


# The metadata of most automatic edges, shared by all of them rather than copied into each.
_BACKBONE = frozen({"sub_type": "backbone"})
_PROXIMITY = frozen({"sub_type": "proximity"})
_LEXICAL = frozen({"sub_type": "lexical"})

# Sort keys: _Other.order and _Other.near by position (a C getter, no Python call per element).
_chain_order = itemgetter(3)
_nearness = itemgetter(2)


def _temporal_edges(
    new: MemorySketch,
    pool: list[_Other],
    earlier: list[_Other],
    later: list[_Other],
    at: datetime,
    limits: LinkLimits,
) -> list[Edge]:
    backbone: list[_Other] = []
    if earlier:
        backbone.append(earlier[0])
    if later:
        # A back-dated write slots into the chain: it also links forward to its successor.
        backbone.append(min(later, key=_chain_order))
    edges = [
        automatic_edge(new.id, other.item.id, EdgeType.TEMPORAL, 1.0, _BACKBONE, at) for other in backbone
    ]
    linked = {other.item.id for other in backbone}
    window = limits.proximity_hours
    near = [other for other in pool if other.hours <= window and other.item.id not in linked]
    near.sort(key=_nearness)
    for other in near[: limits.proximity_max]:
        weight = round(1.0 / (1.0 + other.hours), 6)
        edges.append(automatic_edge(new.id, other.item.id, EdgeType.TEMPORAL, weight, _PROXIMITY, at))
    return edges


def _rarity(name: str, entity_counts: Mapping[str, int]) -> float:
    # A name carried by few memories says more about a pair than one carried by thousands.
    count = max(1, entity_counts.get(name, 1))
    return 1.0 / (1.0 + math.log(count))


def _entity_edges(
    new: MemorySketch,
    pool: list[_Other],
    at: datetime,
    entity_counts: Mapping[str, int],
    limits: LinkLimits,
) -> list[Edge]:
    entities = new.entities
    disjoint = entities.isdisjoint
    carrying = [other for other in pool if not disjoint(other.item.entities)]
    # Sorted once, nearest first: each name's carriers are then its first ones in this order (the
    # keys are unique, ending in the id, so this is the order sorting each name's list would give).
    carrying.sort(key=_nearness)
    per_name = limits.entity_per_name
    shared_by_target: dict[str, list[str]] = {}
    for name in sorted(entities):
        taken = 0
        for other in carrying:
            if taken >= per_name:
                break
            if name in other.item.entities:
                shared_by_target.setdefault(other.item.id, []).append(name)
                taken += 1
    # most shared names first, then nearest (a stable sort of the nearest-first order)
    ranked = [other for other in carrying if other.item.id in shared_by_target]
    ranked.sort(key=lambda other: -len(shared_by_target[other.item.id]))
    rarity = {name: _rarity(name, entity_counts) for name in new.entities}  # once per name, not per pair
    # edges sharing the same names share one read-only metadata view (a backend formats it once)
    shapes: dict[str, Mapping[str, str]] = {}
    edges: list[Edge] = []
    for other in ranked[: limits.entity_max]:
        names = shared_by_target[other.item.id]
        strongest = rarity[names[0]] if len(names) == 1 else max(rarity[name] for name in names)
        weight = round(min(1.0, strongest + 0.1 * (len(names) - 1)), 6)
        joined = ",".join(names)
        metadata = shapes.get(joined)
        if metadata is None:
            metadata = shapes[joined] = frozen({"sub_type": "shared_entity", "entities": joined})
        edges.append(automatic_edge(new.id, other.item.id, EdgeType.ENTITY, weight, metadata, at))
    return edges


@lru_cache(maxsize=16384)
def _cued(content: str) -> bool:
    # A recent memory is an earlier neighbour of many writes in a row: its text is scanned once.
    return has_causal_cue(content)


@lru_cache(maxsize=16384)
def _subtype(content: str) -> str:
    # The effect of several causal edges in a row (a new memory stating a reason links each cause).
    return causal_subtype(content) or "causes"


def _causal_edges(new: MemorySketch, earlier: list[_Other], at: datetime, limits: LinkLimits) -> list[Edge]:
    new_cued = _cued(new.content)
    edges: list[Edge] = []
    for other in earlier[: limits.causal_window]:
        item = other.item
        if not (new_cued or _cued(item.content)):
            continue
        similarity = other.overlap
        if similarity < limits.causal_min_overlap:
            continue
        # The text stating the reason is the effect; when both do, the later one is.
        cause, effect = (item, new) if new_cued else (new, item)
        subtype = _subtype(effect.content)
        weight = round(min(1.0, 0.5 + similarity / 2), 6)
        metadata = frozen({"sub_type": subtype, "overlap": f"{similarity:.3f}"})
        edges.append(automatic_edge(cause.id, effect.id, EdgeType.CAUSAL, weight, metadata, at))
    return edges


def _semantic_edges(new: MemorySketch, pool: list[_Other], at: datetime, limits: LinkLimits) -> list[Edge]:
    scored: list[tuple[float, _Other]] = [
        (other.overlap if other.overlap > other.jaccard else other.jaccard, other)
        for other in pool
        if other.jaccard >= limits.semantic_min_jaccard or other.overlap >= limits.semantic_min_overlap
    ]
    # Equal scores go to the memory nearest in time: ids differ between stores, times do not.
    scored.sort(key=lambda pair: (-pair[0], *pair[1].near))
    return [
        automatic_edge(new.id, other.item.id, EdgeType.SEMANTIC, round(score, 6), _LEXICAL, at)
        for score, other in scored[: limits.semantic_max]
    ]


def link_candidates(
    new: MemorySketch, candidates: Iterable[MemorySketch], *, limits: LinkLimits = DEFAULT_LIMITS
) -> tuple[LinkCandidate, ...]:
    """Existing memories similar enough to ``new`` to be worth a look (near duplicates first)."""
    return _link_candidates(_pool(new, candidates), limits)


def _link_candidates(pool: list[_Other], limits: LinkLimits) -> tuple[LinkCandidate, ...]:
    floor = limits.candidate_min_similarity
    kept = []
    for other in pool:
        score_j, score_o = other.jaccard, other.overlap
        score = score_o if score_o > score_j else score_j  # max(), inline: one call per candidate
        if score >= floor:
            kept.append((score_j, score, other))
    kept.sort(key=lambda entry: (-entry[0], -entry[1], *entry[2].near))
    found: list[LinkCandidate] = []
    for score_j, score, other in kept[: limits.candidates_max]:
        near_duplicate = score_j >= limits.near_duplicate
        reason = f"near duplicate (jaccard {score_j:.2f})" if near_duplicate else f"similar ({score:.2f})"
        found.append(
            LinkCandidate(other.item.id, other.item.content, round(score, 6), EdgeType.SEMANTIC, reason)
        )
    return tuple(found)
