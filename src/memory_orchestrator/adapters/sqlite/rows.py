"""Row <-> record conversion, timestamp text, filter clauses and safe FTS queries for SQLite."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from memory_orchestrator.ports import Edge, EdgeType, Filters, MemoryRecord, ensure_utc, parse_timestamp

#: The columns every memory query selects, in :func:`record_from_row` order.
MEMORY_COLUMNS = (
    "m.id, m.content, m.category, m.importance, m.tags, m.entities, m.source, m.metadata, "
    "m.created_at, m.updated_at"
)
EDGE_COLUMNS = "e.source_id, e.target_id, e.type, e.weight, e.metadata, e.created_at"


def stamp(moment: datetime) -> str:
    """Fixed-width UTC text of ``moment`` (sorts like time): ``2026-02-01T09:00:00.000000Z``.

    ``isoformat`` rather than ``strftime``: it is several times faster and always writes four-digit
    years (``%Y`` writes year 2 as ``2``, which would not sort)."""
    return ensure_utc(moment).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


#: Parsed rows kept per process: the same memories come back query after query, and decoding their
#: JSON columns and timestamps was a third of a graph walk. Records are immutable and the key is the
#: whole row (``updated_at`` included), so an edited memory is a new entry, never a stale one.
ROW_CACHE = 16384
_EDGE_TYPES = {kind.value: kind for kind in EdgeType}
#: An edge without metadata (most automatic edges) skips the JSON decoder.
_NO_METADATA = ("{}", "")


def record_from_row(row: Sequence[Any], superseded_by: Sequence[str] = ()) -> MemoryRecord:
    """A ``MemoryRecord`` from a row selected with :data:`MEMORY_COLUMNS`."""
    record = _record(tuple(row))
    return replace(record, superseded_by=tuple(superseded_by)) if superseded_by else record


@lru_cache(maxsize=ROW_CACHE)
def _record(row: tuple[Any, ...]) -> MemoryRecord:
    return MemoryRecord(
        id=row[0],
        content=row[1],
        category=row[2],
        importance=int(row[3]),
        tags=tuple(json.loads(row[4])),
        entities=tuple(json.loads(row[5])),
        source=row[6],
        metadata=json.loads(row[7]),
        created_at=parse_timestamp(row[8]),
        updated_at=parse_timestamp(row[9]),
    )


def edge_from_row(row: Sequence[Any]) -> Edge:
    """An ``Edge`` from a row selected with :data:`EDGE_COLUMNS` (cached like records)."""
    return _edge(tuple(row))


@lru_cache(maxsize=ROW_CACHE)
def _edge(row: tuple[Any, ...]) -> Edge:
    return Edge(
        source=row[0],
        target=row[1],
        type=_EDGE_TYPES[row[2]],
        weight=float(row[3]),
        metadata={} if row[4] in _NO_METADATA else json.loads(row[4]),
        created_at=parse_timestamp(row[5]),
    )


#: ``json.dumps`` with options builds a new encoder per call; a write formats several columns.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True)
#: How the ``entities`` column is written (in the given order, default separators).
ENTITY_LIST = json.JSONEncoder(ensure_ascii=False)


def as_json(value: Any) -> str:
    """Compact JSON text for a column."""
    if not value and isinstance(value, dict | list | tuple):
        return "{}" if isinstance(value, dict) else "[]"
    return _COMPACT.encode(value)


@dataclass(slots=True)
class Clause:
    """A ``WHERE`` fragment over memories aliased ``m`` and its parameters."""

    sql: list[str] = field(default_factory=list)
    params: list[Any] = field(default_factory=list)

    def add(self, sql: str, *params: Any) -> None:
        """Append one condition."""
        self.sql.append(sql)
        self.params.extend(params)

    def text(self) -> str:
        """The conditions joined with ``AND`` (``1`` when empty)."""
        return " AND ".join(self.sql) if self.sql else "1"


def visible_clause(filters: Filters, now: datetime | None) -> Clause:
    """Active memories created at or before ``now`` that pass ``filters``, all natively in SQL."""
    clause = Clause()
    clause.add("m.deleted_at IS NULL")
    if now is not None:
        clause.add("m.created_at <= ?", stamp(now))
    if filters.categories:
        clause.add("m.category IN (SELECT value FROM json_each(?))", json.dumps(list(filters.categories)))
    if filters.sources:
        clause.add("m.source IN (SELECT value FROM json_each(?))", json.dumps(list(filters.sources)))
    if filters.entities:
        names = json.dumps([name.casefold() for name in filters.entities])
        clause.add(
            "EXISTS (SELECT 1 FROM memory_entities f WHERE f.memory_id = m.id "
            "AND f.entity_norm IN (SELECT value FROM json_each(?)))",
            names,
        )
    window = filters.time_range
    if window is not None and window.start is not None:
        clause.add("m.created_at >= ?", stamp(window.start))
    if window is not None and window.end is not None:
        clause.add("m.created_at < ?", stamp(window.end))
    return clause


def fts_query(tokens: Sequence[str]) -> str | None:
    """An FTS5 ``OR`` query of quoted terms; user text never reaches FTS syntax unquoted."""
    unique = list(dict.fromkeys(token for token in tokens if token))
    if not unique:
        return None
    return " OR ".join('"' + token.replace('"', '""') + '"' for token in unique)
