"""Retrieval metrics over ranked results, with gold duplicates and must-not lists.

A ranked result is a sequence of *positions*; each position is the dataset id of a returned item, or a
collection of ids when the item absorbed others (a deduplicated item stands for every memory merged
into it). Finding a gold id, or any id listed for it in ``gold_dups``, finds that gold; finding it a
second time is a duplicate and earns nothing more.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

Position = str | Collection[str]


def _ids(position: Position) -> Collection[str]:
    return (position,) if isinstance(position, str) else position


@dataclass(frozen=True, slots=True)
class Judgement:
    """What counts as right and wrong for one query."""

    gold: tuple[str, ...]
    gold_dups: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    must_not: tuple[str, ...] = ()

    def golds_in(self, position: Position) -> set[str]:
        """The gold ids a position finds (directly or through a gold duplicate)."""
        found = set()
        for item in _ids(position):
            if item in self.gold:
                found.add(item)
            for gold, dups in self.gold_dups.items():
                if item in dups and gold in self.gold:
                    found.add(gold)
        return found

    def is_forbidden(self, position: Position) -> bool:
        """True when the position holds a must-not memory."""
        return any(item in self.must_not for item in _ids(position))


def _new_gold_flags(ranked: Sequence[Position], judgement: Judgement, k: int) -> list[bool]:
    """Per position in the top ``k``: does it find a gold not found higher up?"""
    seen: set[str] = set()
    flags = []
    for position in ranked[:k]:
        golds = judgement.golds_in(position) - seen
        flags.append(bool(golds))
        seen |= golds
    return flags


def found_golds(ranked: Sequence[Position], judgement: Judgement, k: int) -> set[str]:
    """The gold ids found in the top ``k``."""
    found: set[str] = set()
    for position in ranked[:k]:
        found |= judgement.golds_in(position)
    return found


def precision_at_k(ranked: Sequence[Position], judgement: Judgement, k: int) -> float:
    """Share of the ``k`` slots holding a gold memory (or its duplicate); missing slots are misses."""
    if k <= 0:
        raise ValueError("k must be positive")
    hits = sum(1 for position in ranked[:k] if judgement.golds_in(position))
    return hits / k


def recall_at_k(ranked: Sequence[Position], judgement: Judgement, k: int) -> float:
    """Share of the gold memories found in the top ``k`` (1.0 when there is no gold)."""
    if not judgement.gold:
        return 1.0
    return len(found_golds(ranked, judgement, k)) / len(set(judgement.gold))


def all_gold_at_k(ranked: Sequence[Position], judgement: Judgement, k: int) -> float:
    """1.0 when every gold memory is in the top ``k``, else 0.0."""
    return 1.0 if recall_at_k(ranked, judgement, k) >= 1.0 else 0.0


def ndcg_at_k(ranked: Sequence[Position], judgement: Judgement, k: int) -> float:
    """Binary-gain nDCG@k; a gold found again (or through its duplicate) gains nothing the second time."""
    gold_count = len(set(judgement.gold))
    if gold_count == 0:
        return 1.0
    dcg = sum(
        1.0 / math.log2(rank + 2) for rank, new in enumerate(_new_gold_flags(ranked, judgement, k)) if new
    )
    ideal = sum(1.0 / math.log2(rank + 2) for rank in range(min(gold_count, k)))
    return dcg / ideal


def reciprocal_rank(ranked: Sequence[Position], judgement: Judgement) -> float:
    """1 / rank of the first position finding a gold memory; 0.0 when none does."""
    for rank, position in enumerate(ranked, start=1):
        if judgement.golds_in(position):
            return 1.0 / rank
    return 0.0


def must_not_at_k(ranked: Sequence[Position], judgement: Judgement, k: int) -> int:
    """How many of the top ``k`` positions hold a must-not memory."""
    return sum(1 for position in ranked[:k] if judgement.is_forbidden(position))


def duplicate_rate(keys: Sequence[str], k: int) -> float:
    """Share of the top ``k`` items repeating what an earlier item says.

    ``keys`` name what each item says (a content hash, or the gold id an item duplicates); an empty
    result has no duplicates.
    """
    top = keys[:k]
    if not top:
        return 0.0
    return (len(top) - len(set(top))) / len(top)


def evidence_kept(packed: Iterable[Position], judgement: Judgement) -> float:
    """Share of the gold memories present in a packed context (1.0 when there is no gold)."""
    if not judgement.gold:
        return 1.0
    found: set[str] = set()
    for position in packed:
        found |= judgement.golds_in(position)
    return len(found) / len(set(judgement.gold))


def percentile(values: Sequence[float], share: float) -> float:
    """The ``share`` percentile (0..1) by linear interpolation between closest ranks; 0.0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = share * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean; 0.0 when empty."""
    items = list(values)
    return sum(items) / len(items) if items else 0.0


def query_metrics(ranked: Sequence[Position], judgement: Judgement, ks: Sequence[int]) -> dict[str, float]:
    """Every per-query metric at every ``k``, as a flat name -> value dict (``recall@10``, ``mrr`` ...)."""
    values: dict[str, float] = {"mrr": reciprocal_rank(ranked, judgement)}
    for k in ks:
        values[f"precision@{k}"] = precision_at_k(ranked, judgement, k)
        values[f"recall@{k}"] = recall_at_k(ranked, judgement, k)
        values[f"all_gold@{k}"] = all_gold_at_k(ranked, judgement, k)
        values[f"ndcg@{k}"] = ndcg_at_k(ranked, judgement, k)
        values[f"must_not@{k}"] = float(must_not_at_k(ranked, judgement, k))
    return values
