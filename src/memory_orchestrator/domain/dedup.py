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
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.ranking import RankedItem, order_key
from memory_orchestrator.ports import Intent
from memory_orchestrator.ports.text import content_hash, has_negation

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
    subjects: frozenset[str]
    negated: bool
    values: frozenset[str]


def _facts(item: RankedItem) -> _Facts:
    content = item.record.content
    return _Facts(
        words=item.candidate.words(),
        subjects=frozenset(_subjects(item)),
        negated=has_negation(content),
        values=frozenset(_NUMBER.findall(content)),
    )


def _jaccard(shared: int, a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a) + len(b) - shared
    return shared / union if union else 0.0


class _WordIndex:
    """Kept items by token, so an item is compared only with items that share a word with it."""

    def __init__(self) -> None:
        self.postings: dict[str, list[int]] = {}
        self.size = 0

    def add(self, words: frozenset[str]) -> None:
        for word in words:
            self.postings.setdefault(word, []).append(self.size)
        self.size += 1

    def shared(self, words: frozenset[str]) -> Counter[int]:
        """Position of every indexed item sharing a word with ``words`` -> how many it shares."""
        counts: Counter[int] = Counter()
        for word in words:
            postings = self.postings.get(word)
            if postings:
                counts.update(postings)
        return counts


def deduplicate(items: Sequence[RankedItem], config: PipelineConfig) -> DedupOutcome:
    """Merge duplicates, penalise near duplicates, demote stale facts (see module docstring)."""
    outcome = DedupOutcome()
    facts: dict[str, _Facts] = {}
    hashes: dict[str, str] = {}
    index = _WordIndex()
    for item in items:
        memory_id = item.record.id
        digest = content_hash(item.record.content)
        mine = _facts(item)
        shared = index.shared(mine.words)
        twin = hashes.get(digest) or _near_twin(mine, shared, outcome.kept, facts, config.dedup_threshold)
        if twin is not None:
            _absorb(next(kept for kept in outcome.kept if kept.record.id == twin), item)
            outcome.drops.append((memory_id, f"duplicate of {twin}"))
            continue
        _penalise_overlap(item, mine.words, shared, outcome.kept, facts, config)
        hashes[digest] = memory_id
        facts[memory_id] = mine
        index.add(mine.words)
        outcome.kept.append(item)
    outcome.kept.sort(key=order_key)
    outcome.stale = _mark_stale(outcome.kept, facts)
    outcome.kept.sort(key=lambda item: (item.superseded, *order_key(item)))
    return outcome


def _near_twin(
    mine: _Facts, shared: Counter[int], kept: list[RankedItem], seen: dict[str, _Facts], threshold: float
) -> str | None:
    first: int | None = None  # the strongest kept twin, as a scan of the kept items in order finds
    for position, count in shared.items():
        if first is not None and position > first:
            continue
        theirs = seen[kept[position].record.id]
        if (
            _jaccard(count, mine.words, theirs.words) >= threshold
            # same claim: an update (a negation or another number) is not a repeat
            and mine.negated == theirs.negated
            and mine.values == theirs.values
        ):
            first = position
    return None if first is None else kept[first].record.id


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


def _penalise_overlap(
    item: RankedItem,
    words: frozenset[str],
    shared: Counter[int],
    kept: list[RankedItem],
    seen: dict[str, _Facts],
    config: PipelineConfig,
) -> None:
    worst = max(
        (_jaccard(count, words, seen[kept[position].record.id].words) for position, count in shared.items()),
        default=0.0,
    )
    value = worst if worst >= SOFT_DUPLICATE else 0.0
    item.signals["duplication"] = round(value, 6)
    if value > 0:
        item.score -= config.weights.duplication * value
        item.notes.append(f"repeats a stronger result ({value:.2f} overlap)")


def _mark_stale(items: list[RankedItem], facts: dict[str, _Facts]) -> list[dict[str, str]]:
    stale: list[dict[str, str]] = []
    present = {item.record.id for item in items}
    for item in items:
        replacing = [memory_id for memory_id in item.record.superseded_by if memory_id in present]
        for memory_id in replacing:
            stale.append({"older": item.record.id, "newer": memory_id, "why": "explicit supersedes edge"})
    if _asks_for_history(items):
        return stale
    # Only pairs sharing enough words can contradict each other: found through a word index,
    # not by comparing every pair.
    index = _WordIndex()
    for item in items:
        index.add(facts[item.record.id].words)
    marks: Counter[int] = Counter()
    for position, newer in enumerate(items):
        new = facts[newer.record.id]
        close = [
            other
            for other, count in index.shared(new.words).items()
            if other != position
            and count >= CONTRADICTION_OVERLAP * max(len(new.words), len(facts[items[other].record.id].words))
        ]
        for other in sorted(close):
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
