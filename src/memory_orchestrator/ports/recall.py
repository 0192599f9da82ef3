"""The recall fusion rule every built-in backend applies: weighted reciprocal-rank fusion.

Pure and standard-library only. A backend ranks its channels (keyword, entity anchors, recency) its
own way and hands the ranked lists here, so every store fuses them identically.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from types import MappingProxyType

from memory_orchestrator.ports.records import Hit, MemoryRecord

#: The usual reciprocal-rank-fusion constant: damps the advantage of the very first ranks.
RRF_K = 60
#: Channel weights; recency counts half, so a merely recent memory does not outrank a matching one.
RECALL_WEIGHTS: Mapping[str, float] = MappingProxyType({"keyword": 1.0, "entity": 1.0, "recency": 0.5})


def fuse_recall(
    channels: Mapping[str, Sequence[MemoryRecord]],
    keyword_scores: Mapping[str, float],
    now: datetime,
    *,
    weights: Mapping[str, float] = RECALL_WEIGHTS,
    k: int = RRF_K,
) -> list[Hit]:
    """Fuse ranked channel lists into recall hits, best first (ties: newer first, then id).

    Each hit's ``signals`` hold its share from every channel that found it, plus ``bm25`` (the raw
    keyword score, 0 when not matched) and ``age_days`` (measured from ``now``).
    """
    totals: dict[str, float] = {}
    records: dict[str, MemoryRecord] = {}
    signals: dict[str, dict[str, float]] = {}
    for channel, ranked in channels.items():
        weight = weights.get(channel, 1.0)
        for rank, record in enumerate(ranked, start=1):
            share = weight / (k + rank)
            totals[record.id] = totals.get(record.id, 0.0) + share
            records[record.id] = record
            signals.setdefault(record.id, {})[channel] = round(share, 6)
    hits: list[Hit] = []
    for memory_id, total in totals.items():
        record = records[memory_id]
        parts = signals[memory_id]
        parts["bm25"] = round(keyword_scores.get(memory_id, 0.0), 6)
        parts["age_days"] = round(max(0.0, (now - record.created_at).total_seconds() / 86400), 3)
        hits.append(Hit(record, round(total, 8), via="recall", signals=parts))
    # Ties go to the newer memory, then the id: stores assign different ids, never different times.
    hits.sort(key=lambda hit: (-hit.score, -hit.record.created_at.timestamp(), hit.record.id))
    return hits
