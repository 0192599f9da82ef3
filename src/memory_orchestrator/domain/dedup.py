"""Duplicates and stale facts among ranked items (pure).

Duplicates: the same content hash, or token Jaccard at or above ``dedup_threshold``. The stronger
(earlier-ranked) item stays, takes the other's id into ``absorbed_ids`` and its entities, and the
drop is recorded as ``duplicate of <id>``. Near-but-not-duplicate pairs (Jaccard from
``SOFT_DUPLICATE`` up) cost the weaker item ``w_dup * jaccard`` (the ``duplication`` signal).

Staleness: a memory superseded by a newer one (explicit ``supersedes`` edge), or contradicted by a
newer one that shares an entity (other than its speaker) and half of its words but negates it or
states another value, is marked superseded and moved after every current item, so a budget keeps it
only if there is room. A WHY question infers no contradictions (explicit edges still count): it asks
for the history behind something, and an earlier state a newer memory contradicts (the bug report
before its fix) is part of that answer, not an outdated fact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.ranking import RankedItem, order_key
from memory_orchestrator.ports import Intent
from memory_orchestrator.ports.text import has_negation, normalise_content

#: Jaccard from which a pair counts as partly redundant (penalised, not merged).
SOFT_DUPLICATE = 0.6
#: Word overlap two memories need before a negation or a changed number reads as a contradiction.
CONTRADICTION_OVERLAP = 0.5
#: Newer contradicting memories recorded per stale item (one is enough to demote it; a templated
#: store can otherwise produce hundreds of marks per query, all saying the same).
MAX_STALE_MARKS = 3
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
#: Intents whose questions ask for the history behind something: no contradictions are inferred.
HISTORY_INTENTS = frozenset({Intent.WHY})


@dataclass(slots=True)
class DedupOutcome:
    """Items after dedup (best first, stale ones last) and what happened to the others."""

    kept: list[RankedItem] = field(default_factory=list)
    #: ``(dropped id, "duplicate of <kept id>")``
    drops: list[tuple[str, str]] = field(default_factory=list)
    #: ``{"older": id, "newer": id, "why": ...}`` for every stale memory found.
    stale: list[dict[str, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Facts:
    """What dedup compares of one item, computed once per item (not once per pair)."""

    words: frozenset[str]
    #: ``words`` as bits of one request's vocabulary: the words two items share are the bits of
    #: ``a.mask & b.mask``, counted in C instead of intersecting two sets per pair.
    mask: int
    subjects: frozenset[str]
    negated: bool
    values: tuple[str, ...]
    #: ``len(words)``, read for every pair.
    size: int
    #: Positions (in the order items were kept) of the kept items sharing enough words with this
    #: one to contradict it (``CONTRADICTION_OVERLAP``), found while looking for its duplicates.
    close: list[int] = field(default_factory=list)


class _Vocabulary:
    """One bit per distinct word of the items deduplicated together."""

    def __init__(self) -> None:
        self.bits: dict[str, int] = {}

    def mask(self, words: frozenset[str]) -> int:
        bits, mask = self.bits, 0
        for word in words:
            bit = bits.get(word)
            if bit is None:
                bit = bits[word] = len(bits)
            mask |= 1 << bit
        return mask


@lru_cache(maxsize=16384)
def _claim(content: str) -> tuple[str, bool, tuple[str, ...]]:
    """``(exact-duplicate key, negated, distinct numbers in order)`` of a memory's content; cached,
    as the same memories come back query after query. Equal normalised contents are what equal content
    hashes mean, so the normalised text itself is the key. Plain tuples, which the cycle collector
    stops tracking (a cached set would be walked by every full collection)."""
    return normalise_content(content), has_negation(content), tuple(sorted(set(_NUMBER.findall(content))))


def _facts(item: RankedItem, vocabulary: _Vocabulary) -> tuple[str, _Facts]:
    key, negated, values = _claim(item.record.content)
    words = item.candidate.words()
    subjects = frozenset(_subjects(item))
    return key, _Facts(words, vocabulary.mask(words), subjects, negated, values, len(words))


def deduplicate(items: Sequence[RankedItem], config: PipelineConfig) -> DedupOutcome:
    """Merge duplicates, penalise near duplicates, demote stale facts (see module docstring)."""
    outcome = DedupOutcome()
    facts: dict[str, _Facts] = {}
    kept_facts: list[_Facts] = []
    exact: dict[str, int] = {}
    vocabulary = _Vocabulary()
    for item in items:
        key, mine = _facts(item, vocabulary)
        twin = exact.get(key)
        worst = 0.0
        if twin is None:
            twin, worst = _closest(mine, kept_facts, config.dedup_threshold)
        if twin is not None:
            keeper = outcome.kept[twin]
            _absorb(keeper, item)
            outcome.drops.append((item.record.id, f"duplicate of {keeper.record.id}"))
            continue
        _penalise_overlap(item, worst, config)
        for position in mine.close:
            kept_facts[position].close.append(len(kept_facts))
        exact[key] = len(kept_facts)
        facts[item.record.id] = mine
        kept_facts.append(mine)
        outcome.kept.append(item)
    positions = {item.record.id: position for position, item in enumerate(outcome.kept)}
    outcome.kept.sort(key=order_key)
    outcome.stale = _mark_stale(outcome.kept, facts, positions)
    outcome.kept.sort(key=lambda item: (item.superseded, *order_key(item)))
    return outcome


def _closest(mine: _Facts, kept: list[_Facts], threshold: float) -> tuple[int | None, float]:
    """``(position of the strongest kept twin or None, the highest word Jaccard with a kept item)``.

    A twin has a Jaccard of at least ``threshold`` and makes the same claim: an update (a negation
    or another number) is not a repeat. Once a twin is found the item is dropped, so the highest
    Jaccard (and ``mine.close``) is only complete when there is none.
    """
    mask, size, worst, close = mine.mask, mine.size, 0.0, mine.close
    for position, theirs in enumerate(kept):
        shared = (mask & theirs.mask).bit_count()
        if not shared:
            continue
        other = theirs.size
        jaccard = shared / (size + other - shared)
        if jaccard >= threshold and mine.negated == theirs.negated and mine.values == theirs.values:
            return position, jaccard
        if jaccard > worst:
            worst = jaccard
        if shared >= CONTRADICTION_OVERLAP * (size if size > other else other):
            close.append(position)
    return None, worst


def _absorb(keeper: RankedItem, duplicate: RankedItem) -> None:
    keeper.absorbed_ids.extend([duplicate.record.id, *duplicate.absorbed_ids])
    known = {name.casefold() for name in (*keeper.record.entities, *keeper.absorbed_entities)}
    for name in duplicate.record.entities:
        if name.casefold() not in known:
            known.add(name.casefold())
            keeper.absorbed_entities.append(name)
    keeper.candidate.channels |= duplicate.candidate.channels
    reason = f"cross-validated by duplicate {duplicate.record.id}"
    keeper.notes.append(reason)


def _penalise_overlap(item: RankedItem, worst: float, config: PipelineConfig) -> None:
    value = worst if worst >= SOFT_DUPLICATE else 0.0
    item.signals["duplication"] = round(value, 6)
    if value > 0:
        item.score -= config.weights.duplication * value
        item.notes.append(f"repeats a stronger result ({value:.2f} overlap)")


def _mark_stale(
    items: list[RankedItem], facts: dict[str, _Facts], kept_at: dict[str, int]
) -> list[dict[str, str]]:
    """Explicit supersessions, then newer contradicting memories (``kept_at``: each item's position
    in the order dedup kept them, which ``_Facts.close`` refers to)."""
    stale: list[dict[str, str]] = []
    present = {item.record.id for item in items}
    for item in items:
        replacing = [memory_id for memory_id in item.record.superseded_by if memory_id in present]
        for memory_id in replacing:
            stale.append({"older": item.record.id, "newer": memory_id, "why": "explicit supersedes edge"})
    if _asks_for_history(items):
        return stale
    # Only pairs sharing enough words can contradict each other, and dedup found those already.
    now_at = {kept_at[item.record.id]: position for position, item in enumerate(items)}
    marks = [0] * len(items)
    for newer in items:
        new = facts[newer.record.id]
        for other in sorted(now_at[kept] for kept in new.close):
            older = items[other]
            if marks[other] >= MAX_STALE_MARKS or not newer.record.created_at > older.record.created_at:
                continue
            why = _contradiction(older, newer, facts[older.record.id], new)
            if why is None or newer.record.id in older.superseded_by:
                continue
            older.superseded = True
            older.superseded_by.append(newer.record.id)
            older.notes.append(f"possibly outdated: newer {newer.record.id} ({why})")
            marks[other] += 1
            stale.append({"older": older.record.id, "newer": newer.record.id, "why": why})
    return stale


def _asks_for_history(items: Sequence[RankedItem]) -> bool:
    context = items[0].context if items else None
    return context is not None and context.intent in HISTORY_INTENTS


def _subjects(item: RankedItem) -> set[str]:
    # Two things said by the same speaker are not about the same subject for that reason alone.
    return {name.casefold() for name in item.record.entities} - {item.record.source.casefold()}


def _contradiction(older: RankedItem, newer: RankedItem, old: _Facts, new: _Facts) -> str | None:
    """Why ``newer`` contradicts ``older`` (shared entity, shared words, negation or new value)."""
    shared = old.subjects & new.subjects
    if not shared or not (shared - {older.record.source.casefold(), newer.record.source.casefold()}):
        return None
    if not old.words or not new.words:
        return None
    if len(old.words & new.words) < CONTRADICTION_OVERLAP * max(len(old.words), len(new.words)):
        return None
    if old.negated != new.negated:
        return "contradiction: negation"
    if old.values and new.values and old.values != new.values:
        return "contradiction: changed value"
    return None
