"""Mnemon's own ``recall --verbose`` answer as port hits."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from memory_orchestrator.adapters.mnemon.reader import Snapshot
from memory_orchestrator.ports import Hit, MemoryRecord

#: Signals that show a real match; an item with none of them is padding (recency or graph only).
MATCH_SIGNALS = ("keyword", "entity", "similarity")


def recall_hits(answer: Any, snap: Snapshot, admits: Callable[[MemoryRecord], bool]) -> list[Hit]:
    """Matches only (padding dropped), admitted by the filters, best first, ties by id.

    Mnemon returns tied scores in a different order on each call; sorting by id makes it stable.
    """
    items = ((answer or {}).get("results") or []) if isinstance(answer, Mapping) else []
    hits = []
    for item in items:
        insight = item.get("insight") or {}
        record = snap.records.get(str(insight.get("id", "")))
        signals = {str(k): float(v) for k, v in (item.get("signals") or {}).items()}
        if record is None or not admits(record):
            continue
        if not any(signals.get(name, 0) > 0 for name in MATCH_SIGNALS):
            continue
        score = round(float(item.get("score", 0.0)), 6)
        hits.append(Hit(record, score, via=str(item.get("via") or "recall"), signals=signals))
    hits.sort(key=lambda hit: (-hit.score, hit.record.id))
    return hits
