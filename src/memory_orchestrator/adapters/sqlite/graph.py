"""Edges in SQLite: storing one row per edge and walking them from both ends, one query per hop."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence

import aiosqlite

from memory_orchestrator.adapters.sqlite.records import active_records
from memory_orchestrator.adapters.sqlite.rows import (
    EDGE_COLUMNS,
    as_json,
    edge_from_row,
    stamp,
    visible_clause,
)
from memory_orchestrator.ports import Edge, EdgeType, Filters, Neighbor

#: Edge rows read per hop, as a multiple of the caller's limit (guards against hub memories).
ROWS_PER_LIMIT = 20


async def store_edge(db: aiosqlite.Connection, edge: Edge) -> None:
    """Insert or replace ``edge``; a symmetric kind also replaces the same pair stored the other way."""
    if edge.type is not EdgeType.SUPERSEDES:
        await db.execute(
            "DELETE FROM edges WHERE source_id = ? AND target_id = ? AND type = ?",
            (edge.target, edge.source, edge.type.value),
        )
    await db.execute(
        "INSERT OR REPLACE INTO edges (source_id, target_id, type, weight, metadata, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        _edge_row(edge),
    )


def _edge_row(edge: Edge) -> tuple[str, str, str, float, str, str]:
    # Backends stamp every edge before storing it; the epoch only keeps the column non-null.
    created = stamp(edge.created_at) if edge.created_at else "1970-01-01T00:00:00.000000Z"
    return (edge.source, edge.target, edge.type.value, edge.weight, as_json(dict(edge.metadata)), created)


async def insert_edges(db: aiosqlite.Connection, edges: Sequence[Edge]) -> None:
    """Insert the automatic edges of a brand-new memory (no reverse rows can exist yet)."""
    rows = [_edge_row(edge) for edge in edges]
    await db.executemany(
        "INSERT OR REPLACE INTO edges (source_id, target_id, type, weight, metadata, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        rows,
    )


async def _hop_rows(
    db: aiosqlite.Connection, frontier: list[str], kinds: list[str], filters: Filters, cap: int
) -> list[tuple[Edge, str, str]]:
    clause = visible_clause(filters, None)
    half = (
        f"SELECT {EDGE_COLUMNS}, {{origin}} AS origin, m.id AS other FROM edges e "
        f"JOIN memories m ON m.id = {{other}} "
        f"WHERE {{origin}} IN (SELECT value FROM json_each(?)) "
        f"AND e.type IN (SELECT value FROM json_each(?)) AND {clause.text()}"
    )
    sql = (
        half.format(origin="e.source_id", other="e.target_id")
        + " UNION ALL "
        + half.format(origin="e.target_id", other="e.source_id")
        + " ORDER BY 4 DESC, 8, 3 LIMIT ?"
    )
    ids, types = json.dumps(frontier), json.dumps(kinds)
    params = (ids, types, *clause.params, ids, types, *clause.params, cap)
    rows = list(await db.execute_fetchall(sql, params))
    return [(edge_from_row(row), row[6], row[7]) for row in rows]


async def neighbors(
    db: aiosqlite.Connection,
    ids: Sequence[str],
    edge_types: Collection[EdgeType] | None,
    hops: int,
    limit: int,
    filters: Filters,
) -> list[Neighbor]:
    """Breadth-first expansion; one entry per (memory, edge type), strongest first, ties by id."""
    kinds = sorted(kind.value for kind in (set(EdgeType) if edge_types is None else set(edge_types)))
    start = await active_records(db, ids)
    frontier = [memory_id for memory_id in dict.fromkeys(ids) if memory_id in start]
    visited = set(ids)
    found: list[Neighbor] = []
    for hop in range(1, hops + 1):
        if not frontier:
            break
        best: dict[tuple[str, EdgeType], tuple[Edge, str]] = {}
        for edge, origin, other in await _hop_rows(db, frontier, kinds, filters, limit * ROWS_PER_LIMIT):
            key = (other, edge.type)
            if other in visited or (
                key in best and (-best[key][0].weight, best[key][1]) <= (-edge.weight, origin)
            ):
                continue
            best[key] = (edge, origin)
        ranked = sorted(best.items(), key=lambda item: (-item[1][0].weight, item[0][0], item[0][1].value))
        ranked = ranked[:limit]
        records = await active_records(db, (other for (other, _), _ in ranked))
        reached = [
            Neighbor(records[other], edge, origin, hop)
            for (other, _), (edge, origin) in ranked
            if other in records
        ]
        found.extend(reached)
        frontier = list(dict.fromkeys(item.record.id for item in reached))
        visited.update(frontier)
    found.sort(key=lambda item: (-item.edge.weight, item.hops, item.record.id, item.edge.type.value))
    return found[:limit]
