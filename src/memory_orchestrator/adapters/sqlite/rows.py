"""Row <-> record conversion, timestamp text, filter clauses and safe FTS queries for SQLite."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from memory_orchestrator.ports import Edge, EdgeType, Filters, MemoryRecord, ensure_utc, parse_timestamp
from memory_orchestrator.ports.clock import EARLIEST, LATEST
from memory_orchestrator.ports.records import EMPTY_MAPPING, automatic_edge, stored_record

#: The columns every memory query selects, in :func:`record_from_row` order.
MEMORY_COLUMNS = (
    "m.id, m.content, m.category, m.importance, m.tags, m.entities, m.source, m.metadata, "
    "m.created_at, m.updated_at"
)
EDGE_COLUMNS = "e.source_id, e.target_id, e.type, e.weight, e.metadata, e.created_at"


def stamp(moment: datetime) -> str:
    """Fixed-width UTC text of ``moment`` (sorts like time): ``2026-02-01T09:00:00.000000Z``.

    ``isoformat`` rather than ``strftime``: it is several times faster and always writes four-digit
    years (``%Y`` writes year 2 as ``2``, which would not sort). Recent moments are remembered: a bulk
    write stamps each memory's time several times (its row, its entity rows, its neighbour lookups).
    Equal datetimes are the same instant (aware) or the same fields (naive), so they share a text."""
    text = _STAMPS.get(moment)
    if text is None:
        if moment.tzinfo is UTC and EARLIEST <= moment <= LATEST:
            # ensure_utc's result as is: only the "+00:00" isoformat writes becomes "Z"
            text = moment.isoformat(timespec="microseconds")[:-6] + "Z"
        else:
            text = ensure_utc(moment).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
        if len(_STAMPS) >= STAMP_CACHE:
            _STAMPS.clear()
        _STAMPS[moment] = text
    return text


#: Moments :func:`stamp` remembers (emptied when full: a batch's moments are used within a write).
STAMP_CACHE = 4096
_STAMPS: dict[datetime, str] = {}


def parse_stamp(text: str) -> datetime:
    """The aware UTC moment of a :func:`stamp` text (``parse_timestamp`` of it, without the general
    parser's normalising: a stamp's fixed UTC form ``fromisoformat`` reads as is since Python 3.11).
    Any other text (a store written by hand or by an older version) takes the general parser."""
    if len(text) == 27 and text[-1] == "Z":
        return datetime.fromisoformat(text)
    return parse_timestamp(text)


#: Parsed rows kept per process: the same memories come back query after query, and decoding their
#: JSON columns and timestamps was a third of a graph walk. The key is the whole row (``updated_at``
#: included), so an edited memory is a new entry, never a stale one. The cache holds plain values
#: (strings, numbers, tuples, datetimes) that Python's cycle collector stops tracking, not
#: the records themselves: ~30,000 cached records and edges made every full collection walk them, which
#: took 80 ms in a serving process and decided its tail latency. A record is built per call instead.
ROW_CACHE = 16384
_EDGE_TYPES = {kind.value: kind for kind in EdgeType}
#: An edge without metadata (most automatic edges) skips the JSON decoder.
_NO_METADATA = ("{}", "")


def record_from_row(row: Sequence[Any], superseded_by: Sequence[str] = ()) -> MemoryRecord:
    """A ``MemoryRecord`` from a row selected with :data:`MEMORY_COLUMNS`."""
    key, content, category, importance, tags, entities, source, metadata, created, updated = _fields(
        tuple(row)
    )
    return stored_record(
        key,
        content,
        created,
        updated,
        category,
        importance,
        tags,
        entities,
        source,
        # no metadata (most rows): the shared empty view the record would make of an empty dict
        dict(metadata) if metadata else EMPTY_MAPPING,
        tuple(superseded_by),
    )


@lru_cache(maxsize=ROW_CACHE)
def _fields(row: tuple[Any, ...]) -> tuple[Any, ...]:
    # Pairs, not a dict or a read-only view: the collector never stops tracking a tuple that holds a
    # dict. The record makes its own read-only copy of them.
    metadata = () if row[7] in _NO_METADATA else tuple(json.loads(row[7]).items())
    return (
        *row[:3],
        int(row[3]),
        tuple(json.loads(row[4])),
        tuple(json.loads(row[5])),
        row[6],
        metadata,
        _moment(row[8]),
        _moment(row[9]),
    )


def edge_from_row(row: Sequence[Any]) -> Edge:
    """An ``Edge`` from a row selected with :data:`EDGE_COLUMNS` (timestamps and metadata texts
    decoded once per text)."""
    text = row[4]
    if text in _NO_METADATA:
        metadata: Mapping[str, str] = EMPTY_MAPPING
    else:
        items = _metadata_items(text)
        metadata = json.loads(text) if items is None else MappingProxyType(dict(items))
    return automatic_edge(row[0], row[1], _EDGE_TYPES[row[2]], float(row[3]), metadata, _moment(row[5]))


#: Timestamp text -> datetime (neither is tracked by the cycle collector). Edges are seldom read twice
#: (a record cache for them hit 15% of the time), but their creation times repeat: a write's edges share one.
_moment = lru_cache(maxsize=ROW_CACHE)(parse_stamp)


@lru_cache(maxsize=1024)
def _metadata_items(text: str) -> tuple[tuple[str, str], ...] | None:
    # An edge's metadata as pairs of texts (None when a value is not text: decoded per edge, so no
    # edge shares a mutable value); automatic edges repeat a few hundred texts ("sub_type", the
    # shared entity, the overlap). Pairs of texts: nothing for the cycle collector to walk.
    decoded = json.loads(text)
    if not isinstance(decoded, dict) or not all(isinstance(value, str) for value in decoded.values()):
        return None
    return tuple(decoded.items())


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
