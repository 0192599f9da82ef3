"""How CLI results look: rich tables for people, JSON for scripts."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from memory_orchestrator.domain.results import candidate_to_dict, record_to_dict
from memory_orchestrator.ports import (
    BackendHealth,
    Hit,
    LinkCandidate,
    MemoryRecord,
    WriteResult,
    format_timestamp,
)

#: C0 controls but newline and tab, DEL and C1 controls: never printed from data.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with control characters (escape sequences included) shown as U+FFFD."""
    return _CONTROL.sub("\ufffd", text)


class SafeConsole(Console):
    """A console that shows control characters coming from data as U+FFFD.

    A memory may hold anything, escape sequences included; printed raw they would clear the screen, set
    the window title or worse. Rich's own styling (control segments and styles) is untouched.
    """

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        cleaned = (
            segment if segment.control else Segment(printable(segment.text), segment.style)
            for segment in buffer
        )
        return super()._render_buffer(cleaned)


#: Piped output is not squeezed to 80 columns (rich's default off a terminal); $COLUMNS still wins.
_WIDTH = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 160
console = SafeConsole(highlight=False, soft_wrap=False, width=_WIDTH)


def shorten(text: str, width: int = 90) -> str:
    """One line of at most ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def hit_to_dict(hit: Hit) -> dict[str, Any]:
    """JSON-safe form of a retrieval hit."""
    return {
        "id": hit.record.id,
        "score": round(hit.score, 6),
        "via": hit.via,
        "signals": {name: round(value, 6) for name, value in hit.signals.items()},
        "memory": record_to_dict(hit.record),
    }


def write_result_to_dict(result: WriteResult) -> dict[str, Any]:
    """JSON-safe form of a backend write."""
    return {
        "id": result.id,
        "action": result.action.value,
        "duplicate_of": result.duplicate_of,
        "candidates": [candidate_to_dict(candidate) for candidate in result.candidates],
        "edges_created": dict(result.edges_created),
    }


def health_to_dict(health: BackendHealth) -> dict[str, Any]:
    """JSON-safe form of a health report."""
    return {
        "backend": health.backend,
        "status": health.status,
        "version": health.version,
        "memory_count": health.memory_count,
        "checks": [
            {"name": c.name, "status": c.status, "detail": c.detail, "duration_ms": round(c.duration_ms, 3)}
            for c in health.checks
        ],
        "details": dict(health.details),
    }


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    """A rich table with plain-text cells (user text is never read as markup)."""
    grid = Table(title=title, title_justify="left", show_lines=False)
    for column in columns:
        # Ids must stay copy-pasteable: never wrapped.
        grid.add_column(column, overflow="fold", no_wrap=column in {"id", "#", "score"})
    for row in rows:
        grid.add_row(*(Text(str(cell)) for cell in row))
    return grid


def show_records(records: Sequence[MemoryRecord], title: str = "memories") -> None:
    """Print stored memories as a table."""
    rows = [
        (
            r.id,
            format_timestamp(r.created_at),
            r.category,
            ", ".join(r.entities),
            shorten(r.content) + ("  [superseded]" if r.superseded_by else ""),
        )
        for r in records
    ]
    console.print(table(title, ("id", "created", "category", "entities", "content"), rows))


def show_hits(hits: Sequence[Hit], title: str) -> None:
    """Print retrieval hits as a ranked table."""
    rows = [
        (rank, h.record.id, f"{h.score:.3f}", h.via, shorten(h.record.content, 80))
        for rank, h in enumerate(hits, start=1)
    ]
    console.print(table(title, ("#", "id", "score", "via", "content"), rows))


def show_write(result: WriteResult) -> None:
    """Print what a write did and the link candidates."""
    line = f"{result.action.value}: {result.id}"
    if result.duplicate_of:
        line += f" (duplicate of {result.duplicate_of})"
    console.print(Text(line))
    if result.candidates:
        show_candidates(result.candidates)


def show_candidates(candidates: Sequence[LinkCandidate]) -> None:
    """Print link candidates of a write."""
    rows = [(c.id, f"{c.similarity:.2f}", c.edge_type.value, shorten(c.content, 70)) for c in candidates]
    console.print(table("link candidates", ("id", "similarity", "edge", "content"), rows))


def show_health(health: BackendHealth) -> None:
    """Print a health report."""
    console.print(Text(f"backend {health.backend}: {health.status}  {health.version}".rstrip()))
    rows = [(c.name, c.status, f"{c.duration_ms:.1f}", c.detail) for c in health.checks]
    console.print(table("checks", ("check", "status", "ms", "detail"), rows))
