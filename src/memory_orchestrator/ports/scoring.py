"""The scorer port: named extra signals that plugins add to the re-ranker."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from memory_orchestrator.ports.records import Intent, MemoryRecord, TimeRange


@dataclass(frozen=True, slots=True)
class ScoringContext:
    """What a scorer may know about the request."""

    query: str
    intent: Intent
    entities: tuple[str, ...]
    now: datetime
    time_window: TimeRange | None = None
    task: str = ""


@runtime_checkable
class Scorer(Protocol):
    """A named ranking signal. ``score`` is synchronous, cheap, free of I/O and returns 0..1.

    The re-ranker adds ``weight * score`` to an item's total and shows the value under ``name`` in the
    item's breakdown.
    """

    name: str
    weight: float

    def score(self, context: ScoringContext, record: MemoryRecord, signals: Mapping[str, float]) -> float:
        """Return the signal for ``record`` in ``[0, 1]``; ``signals`` are the built-in ones so far."""
        ...
