"""Duplicates and stale facts among ranked items (pure).

Duplicates: the same content hash, or token Jaccard at or above ``dedup_threshold``. The stronger
(earlier-ranked) item stays, takes the other's id into ``absorbed_ids`` and its entities, and the
drop is recorded as ``duplicate of <id>``. Near-but-not-duplicate pairs (Jaccard from
``SOFT_DUPLICATE`` up) cost the weaker item ``w_dup * jaccard`` (the ``duplication`` signal).

Staleness: a memory superseded by a newer one (explicit ``supersedes`` edge), or contradicted by a
newer one that shares an entity (other than its speaker) and half of its words but negates it or
states another value, is marked superseded and moved after every current item, so a budget keeps it
only if there is room.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.ranking import RankedItem, order_key
from memory_orchestrator.domain.writing import same_claim
from memory_orchestrator.ports.text import content_hash, has_negation, jaccard, overlap

#: Jaccard from which a pair counts as partly redundant (penalised, not merged).
SOFT_DUPLICATE = 0.6
#: Word overlap two memories need before a negation or a changed number reads as a contradiction.
CONTRADICTION_OVERLAP = 0.5
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")


@dataclass(slots=True)
class DedupOutcome:
    """Items after dedup (best first, stale ones last) and what happened to the others."""

    kept: list[RankedItem] = field(default_factory=list)
    #: ``(dropped id, "duplicate of <kept id>")``
    drops: list[tuple[str, str]] = field(default_factory=list)
    #: ``{"older": id, "newer": id, "why": ...}`` for every stale memory found.
    stale: list[dict[str, str]] = field(default_factory=list)


def deduplicate(items: Sequence[RankedItem], config: PipelineConfig) -> DedupOutcome:
    """Merge duplicates, penalise near duplicates, demote stale facts (see module docstring)."""
    outcome = DedupOutcome()
    tokens: dict[str, frozenset[str]] = {}
    hashes: dict[str, str] = {}
    for item in items:
        memory_id = item.record.id
        digest = content_hash(item.record.content)
        words = item.candidate.words()
        twin = hashes.get(digest) or _near_twin(item, words, outcome.kept, tokens, config.dedup_threshold)
        if twin is not None:
            _absorb(next(kept for kept in outcome.kept if kept.record.id == twin), item)
            outcome.drops.append((memory_id, f"duplicate of {twin}"))
            continue
        _penalise_overlap(item, words, tokens, config)
        hashes[digest] = memory_id
        tokens[memory_id] = words
        outcome.kept.append(item)
    outcome.kept.sort(key=order_key)
    outcome.stale = _mark_stale(outcome.kept, tokens)
    outcome.kept.sort(key=lambda item: (item.superseded, *order_key(item)))
    return outcome


def _near_twin(
    item: RankedItem,
    words: frozenset[str],
    kept: list[RankedItem],
    seen: dict[str, frozenset[str]],
    threshold: float,
) -> str | None:
    if not words:
        return None
    for other in kept:
        other_words = seen[other.record.id]
        if (
            other_words
            and jaccard(words, other_words) >= threshold
            and same_claim(item.record.content, other.record.content)
        ):
            return other.record.id
    return None


def _absorb(keeper: RankedItem, duplicate: RankedItem) -> None:
    keeper.absorbed_ids.extend([duplicate.record.id, *duplicate.absorbed_ids])
    known = {name.casefold() for name in (*keeper.record.entities, *keeper.absorbed_entities)}
    for name in duplicate.record.entities:
        if name.casefold() not in known:
            known.add(name.casefold())
            keeper.absorbed_entities.append(name)
    keeper.candidate.channels |= duplicate.candidate.channels
    reason = f"cross-validated by duplicate {duplicate.record.id}"
    keeper.reasons.append(reason)


def _penalise_overlap(
    item: RankedItem, words: frozenset[str], seen: dict[str, frozenset[str]], config: PipelineConfig
) -> None:
    worst = max((jaccard(words, other) for other in seen.values() if other), default=0.0)
    value = worst if worst >= SOFT_DUPLICATE else 0.0
    item.signals["duplication"] = round(value, 6)
    if value > 0:
        item.score -= config.weights.duplication * value
        item.reasons.append(f"repeats a stronger result ({value:.2f} overlap)")


def _mark_stale(items: list[RankedItem], tokens: dict[str, frozenset[str]]) -> list[dict[str, str]]:
    stale: list[dict[str, str]] = []
    present = {item.record.id for item in items}
    for item in items:
        replacing = [memory_id for memory_id in item.record.superseded_by if memory_id in present]
        for memory_id in replacing:
            stale.append({"older": item.record.id, "newer": memory_id, "why": "explicit supersedes edge"})
    # Pairs are only compared when they share a subject: one pass over the names, not n^2 texts.
    subjects: dict[str, list[RankedItem]] = {}
    for item in items:
        for name in _subjects(item):
            subjects.setdefault(name, []).append(item)
    pairs = {
        (id(older), id(newer)): (older, newer)
        for group in subjects.values()
        for older in group
        for newer in group
        if newer.record.created_at > older.record.created_at
    }
    for older, newer in pairs.values():
        if older.record.id != newer.record.id:
            why = contradiction(older, newer, tokens)
            if why is None or newer.record.id in older.superseded_by:
                continue
            older.superseded = True
            older.superseded_by.append(newer.record.id)
            older.reasons.append(f"possibly outdated: newer {newer.record.id} ({why})")
            stale.append({"older": older.record.id, "newer": newer.record.id, "why": why})
    return stale


def _subjects(item: RankedItem) -> set[str]:
    # Two things said by the same speaker are not about the same subject for that reason alone.
    return {name.casefold() for name in item.record.entities} - {item.record.source.casefold()}


def contradiction(older: RankedItem, newer: RankedItem, tokens: dict[str, frozenset[str]]) -> str | None:
    """Why ``newer`` contradicts ``older`` (shared entity, shared words, negation or new value)."""
    shared = _subjects(older) & _subjects(newer)
    shared -= {older.record.source.casefold(), newer.record.source.casefold()}
    if not shared:
        return None
    old_words, new_words = tokens[older.record.id], tokens[newer.record.id]
    if overlap(old_words, new_words) < CONTRADICTION_OVERLAP:
        return None
    if has_negation(newer.record.content) != has_negation(older.record.content):
        return "contradiction: negation"
    old_values = set(_NUMBER.findall(older.record.content))
    new_values = set(_NUMBER.findall(newer.record.content))
    if old_values and new_values and old_values != new_values:
        return "contradiction: changed value"
    return None
