"""Edges in SQLite: storing one row per edge and walking them from both ends, one query per hop."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import aiosqlite

from memory_orchestrator.adapters.sqlite.records import superseders
from memory_orchestrator.adapters.sqlite.rows import (
    EDGE_COLUMNS,
    MEMORY_COLUMNS,
    as_json,
    edge_from_row,
    record_from_row,
    stamp,
    visible_clause,
)
from memory_orchestrator.ports import Edge, EdgeType, Filters, Neighbor


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
    await db.executemany(
        "INSERT OR REPLACE INTO edges (source_id, target_id, type, weight, metadata, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        edge_rows(edges),
    )


def edge_rows(edges: Sequence[Edge]) -> list[tuple[str, str, str, float, str, str]]:
    """The rows of ``edges``, as :func:`_edge_row` makes them; the automatic edges of one write share
    their stamp and a few metadata shapes, so each distinct one is formatted once."""
    stamps: dict[object, str] = {}
    texts: dict[tuple[tuple[str, object], ...], str] = {}
    rows = []
    for edge in edges:
        created = stamps.get(edge.created_at)
        if created is None:
            created = stamps[edge.created_at] = _edge_row(edge)[5]
        key = tuple(edge.metadata.items())
        try:
            text = texts.get(key)
        except TypeError:  # an unhashable metadata value: formatted on its own
            text = as_json(dict(edge.metadata))
        if text is None:
            text = texts[key] = as_json(dict(edge.metadata))
        rows.append((edge.source, edge.target, edge.type.value, edge.weight, text, created))
    return rows


@dataclass(frozen=True, slots=True)
class Ranking:
    """How ``strongest_neighbors`` ranks a hop: strength = type weight x edge weight (0..1)."""

    weights: Mapping[str, float]
    per_source: int
    min_strength: float


async def _hop(
    db: aiosqlite.Connection,
    frontier: list[str],
    kinds: list[str],
    visited: set[str],
    filters: Filters,
    limit: int,
    hop: int,
    ranking: Ranking | None = None,
) -> list[Neighbor]:
    """One hop: the best edge per (reached memory, type), strongest first, ties by id then type.

    Ranking reads only keys and weights (covered by the primary key and ``edges_target``); the full
    edge and memory rows are joined for the ``limit`` winners only, in the same query, so a hop is
    two round trips (this query and the winners' superseders) even around hub memories. With a
    ``ranking`` the store also keeps, per origin, only the strongest ``per_source`` memories (one
    entry each) at or above ``min_strength`` (``ports.RankedNeighbors``).
    """
    clause = visible_clause(filters, None)
    half = (
        "SELECT e.source_id, e.target_id, e.type, e.weight, {origin} AS origin, m.id AS other FROM edges e "
        "JOIN memories m ON m.id = {other} WHERE {origin} IN (SELECT value FROM json_each(?)) "
        f"AND e.type IN (SELECT value FROM json_each(?)) AND {clause.text()}"
    )
    best = "SELECT * FROM ranked WHERE rank = 1"
    extra: tuple[object, ...] = ()
    if ranking is not None:
        best = (
            "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY origin ORDER BY strength DESC, "
            "other) AS place FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY origin, other ORDER BY "
            "strength DESC, weight DESC, type) AS pick FROM (SELECT r.*, t.value * min(max(r.weight, 0), 1) "
            "AS strength FROM ranked r JOIN json_each(?) t ON t.key = r.type WHERE r.rank = 1)) "
            "WHERE pick = 1 AND strength >= ?) WHERE place <= ?"
        )
        extra = (json.dumps(dict(ranking.weights)), ranking.min_strength, ranking.per_source)
    sql = (
        "WITH reach AS ("
        + half.format(origin="e.source_id", other="e.target_id")
        + " UNION ALL "
        + half.format(origin="e.target_id", other="e.source_id")
        + "), ranked AS (SELECT *, ROW_NUMBER() OVER (PARTITION BY other, type ORDER BY weight DESC, origin) "
        "AS rank FROM reach WHERE other NOT IN (SELECT value FROM json_each(?))), "
        f"winners AS (SELECT source_id, target_id, type, weight, origin, other FROM ({best}) "
        "ORDER BY weight DESC, other, type LIMIT ?) "
        f"SELECT w.origin, {EDGE_COLUMNS}, {MEMORY_COLUMNS} FROM winners w "
        "JOIN edges e ON e.source_id = w.source_id AND e.target_id = w.target_id AND e.type = w.type "
        "JOIN memories m ON m.id = w.other "
        "ORDER BY w.weight DESC, w.other, w.type"
    )
    ids, types = json.dumps(frontier), json.dumps(kinds)
    params = (
        ids,
        types,
        *clause.params,
        ids,
        types,
        *clause.params,
        json.dumps(sorted(visited)),
        *extra,
        limit,
    )
    rows = list(await db.execute_fetchall(sql, params))
    edge_width = len(EDGE_COLUMNS.split(","))
    memory_rows = [row[1 + edge_width :] for row in rows]
    replaced = await superseders(db, (row[0] for row in memory_rows))
    return [
        Neighbor(
            record_from_row(memory, replaced.get(memory[0], ())),
            edge_from_row(row[1 : 1 + edge_width]),
            str(row[0]),
            hop,
        )
        for row, memory in zip(rows, memory_rows, strict=True)
    ]


async def strongest(
    db: aiosqlite.Connection, ids: Sequence[str], ranking: Ranking, limit: int, filters: Filters
) -> list[Neighbor]:
    """One ranked hop from ``ids`` (see ``ports.RankedNeighbors``)."""
    kinds = sorted(ranking.weights)
    frontier = await _active_ids(db, ids)
    if not frontier or not kinds:
        return []
    return await _hop(db, frontier, kinds, set(ids), filters, limit, 1, ranking)


async def _active_ids(db: aiosqlite.Connection, ids: Sequence[str]) -> list[str]:
    sql = "SELECT id FROM memories WHERE id IN (SELECT value FROM json_each(?)) AND deleted_at IS NULL"
    active = {str(row[0]) for row in await db.execute_fetchall(sql, (json.dumps(list(ids)),))}
    return [memory_id for memory_id in dict.fromkeys(ids) if memory_id in active]


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
    frontier = await _active_ids(db, ids)
    visited = set(ids)
    found: list[Neighbor] = []
    for hop in range(1, hops + 1):
        if not frontier:
            break
        reached = await _hop(db, frontier, kinds, visited, filters, limit, hop)
        found.extend(reached)
        frontier = list(dict.fromkeys(item.record.id for item in reached))
        visited.update(frontier)
    found.sort(key=lambda item: (-item.edge.weight, item.hops, item.record.id, item.edge.type.value))
    return found[:limit]
