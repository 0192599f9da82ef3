"""The figures an operator wants from one trace document, read without touching the domain.

A trace document (``domain.trace.Trace.to_dict``) holds per-stage timings, the retrieval lists per
channel, the fused candidates, what graph expansion added, what dedup kept and dropped, whether the
read cache answered, and the warnings. :func:`figures_of` turns one document into plain numbers;
the Prometheus metrics and ``orchestrator stats`` both aggregate these, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memory_orchestrator.domain.trace import full_length

#: Operations that run the read pipeline (their traces have retrieval, expansion and dedup stages).
READS = frozenset({"search", "context", "expand"})


@dataclass(frozen=True, slots=True)
class TraceFigures:
    """Plain numbers of one trace (``None``: the stage did not run)."""

    operation: str
    store: str | None
    #: Milliseconds per stage (plan, retrieval, expansion, ranking, dedup, packaging, cache, ...).
    stages_ms: dict[str, float] = field(default_factory=dict)
    #: Candidates each retrieval channel returned (summed over the subqueries).
    channel_candidates: dict[str, int] = field(default_factory=dict)
    #: Distinct memories retrieval handed on after fusion.
    recall_depth: int | None = None
    #: Whether graph expansion ran, and how many memories it added.
    expanded: bool = False
    expansion_added: int = 0
    #: Items that entered dedup, and how many were merged away as duplicates.
    dedup_in: int | None = None
    dedup_merged: int = 0
    #: ``hit`` / ``miss`` when the read cache was consulted, else ``None``.
    cache: str | None = None
    warnings: int = 0

    @property
    def total_ms(self) -> float:
        """Time spent inside the recorded stages."""
        return round(sum(self.stages_ms.values()), 3)


def figures_of(document: Mapping[str, Any]) -> TraceFigures:
    """The figures of one trace document (tolerant: a missing part is simply absent)."""
    stages: Mapping[str, Any] = document.get("stages") or {}
    timings = document.get("timings_ms") or {}
    retrieval = stages.get("retrieval") or {}
    channels: dict[str, int] = {}
    for key, hits in (retrieval.get("lists") or {}).items():
        channel = str(key).split("#", 1)[0]
        channels[channel] = channels.get(channel, 0) + full_length(hits)
    dedup = stages.get("dedup")
    merged = sum(1 for drop in document.get("drops") or () if drop.get("stage") == "dedup")
    cache = stages.get("cache")
    expansion = stages.get("expansion")
    return TraceFigures(
        operation=str(document.get("operation", "unknown")),
        store=document.get("store"),
        stages_ms={str(stage): float(ms) for stage, ms in timings.items()},
        channel_candidates=channels,
        recall_depth=full_length(retrieval["fused"]) if "fused" in retrieval else None,
        expanded=expansion is not None and "added" in expansion,
        expansion_added=full_length((expansion or {}).get("added")),
        dedup_in=None if dedup is None else int(dedup.get("kept", 0)) + merged,
        dedup_merged=merged if dedup is not None else 0,
        cache=None if cache is None else ("hit" if cache.get("hit") else "miss"),
        warnings=len(document.get("warnings") or ()),
    )
