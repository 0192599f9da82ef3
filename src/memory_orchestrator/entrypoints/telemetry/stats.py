"""Statistics of a store from its stored traces: what ``orchestrator stats`` prints.

The same per-trace figures as the server's metrics (:mod:`.figures`), aggregated over the traces
the trace database still holds for the store: counts per operation, latency percentiles per
operation and per stage (time inside the pipeline stages, as the traces measure it), candidates per
channel, recall depth, expansion rate, dedup ratio, read cache hit rate and degraded reads.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memory_orchestrator.entrypoints.telemetry.figures import READS, TraceFigures, figures_of


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile (``share`` in 0..1) of ``values``; 0 when there are none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]


def latency_summary(values: Sequence[float]) -> dict[str, float | int]:
    """Count, p50, p95 and max of millisecond values."""
    return {
        "count": len(values),
        "p50_ms": round(percentile(values, 0.50), 3),
        "p95_ms": round(percentile(values, 0.95), 3),
        "max_ms": round(max(values, default=0.0), 3),
    }


def _ratio(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole else None


def trace_stats(documents: Iterable[Mapping[str, Any]], store: str) -> dict[str, Any]:
    """Aggregate the trace documents of ``store`` (documents of other stores are counted, not used;
    documents saved before traces named their store are counted as ``unlabelled``)."""
    mine: list[TraceFigures] = []
    other = unlabelled = 0
    for document in documents:
        label = document.get("store")
        if label is None:
            unlabelled += 1
        elif label != store:
            other += 1
        else:
            mine.append(figures_of(document))
    reads = [f for f in mine if f.operation in READS]
    return {
        "traces": len(mine),
        "other_stores": other,
        "unlabelled": unlabelled,
        "operations": _by_operation(mine),
        "stages": _by_stage(mine),
        "channels": _channels(reads),
        "recall_depth": _depth(reads),
        "expansion": _expansion(reads),
        "dedup": _dedup(reads),
        "cache": _cache(mine),
        "degraded_reads": sum(1 for f in reads if f.warnings),
    }


def _by_operation(figures: Sequence[TraceFigures]) -> dict[str, dict[str, float | int]]:
    grouped: dict[str, list[float]] = {}
    for f in figures:
        grouped.setdefault(f.operation, []).append(f.total_ms)
    return {operation: latency_summary(values) for operation, values in sorted(grouped.items())}


def _by_stage(figures: Sequence[TraceFigures]) -> dict[str, dict[str, float | int]]:
    grouped: dict[str, list[float]] = {}
    for f in figures:
        for stage, ms in f.stages_ms.items():
            grouped.setdefault(stage, []).append(ms)
    return {stage: latency_summary(values) for stage, values in sorted(grouped.items())}


def _channels(reads: Sequence[TraceFigures]) -> dict[str, dict[str, float | int]]:
    grouped: dict[str, list[int]] = {}
    for f in reads:
        for channel, count in f.channel_candidates.items():
            grouped.setdefault(channel, []).append(count)
    return {
        channel: {
            "reads": len(counts),
            "mean": round(sum(counts) / len(counts), 2),
            "p50": percentile(counts, 0.5),
            "max": max(counts),
        }
        for channel, counts in sorted(grouped.items())
    }


def _depth(reads: Sequence[TraceFigures]) -> dict[str, float | int | None]:
    depths = [f.recall_depth for f in reads if f.recall_depth is not None]
    return {
        "reads": len(depths),
        "mean": round(sum(depths) / len(depths), 2) if depths else None,
        "p50": percentile(depths, 0.5) if depths else None,
        "max": max(depths, default=None),
    }


def _expansion(reads: Sequence[TraceFigures]) -> dict[str, float | int | None]:
    expanded = [f for f in reads if f.expanded]
    added = sum(f.expansion_added for f in expanded)
    return {
        "reads": len(reads),
        "expanded": len(expanded),
        "rate": _ratio(len(expanded), len(reads)),
        "added": added,
        "added_per_expanded_read": _ratio(added, len(expanded)),
    }


def _dedup(reads: Sequence[TraceFigures]) -> dict[str, float | int | None]:
    entered = sum(f.dedup_in or 0 for f in reads)
    merged = sum(f.dedup_merged for f in reads)
    return {"entered": entered, "merged": merged, "ratio": _ratio(merged, entered)}


def _cache(figures: Sequence[TraceFigures]) -> dict[str, float | int | None]:
    hits = sum(1 for f in figures if f.cache == "hit")
    misses = sum(1 for f in figures if f.cache == "miss")
    return {"hits": hits, "misses": misses, "hit_rate": _ratio(hits, hits + misses)}
