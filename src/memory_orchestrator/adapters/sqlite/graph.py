"""Edges in SQLite: storing one row per edge and walking them from both ends, one query per hop."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, cast

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
from memory_orchestrator.ports import Edge, EdgeType, Filters, Neighbor, NeighborFloors
from memory_orchestrator.ports.records import edge_strength, reached_neighbor

#: An edge as stored: ``(source_id, target_id, type, weight, metadata, created_at)``.
EdgeRow = tuple[str, str, str, float, str, str]
#: A hop without filters reads the frontier's edges alone and leaves out forgotten memories by id
#: while the store holds at most this many (listed through the ``memories_forgotten`` index: at 10k
#: memories that made a hop's query ~40% cheaper than joining each reached memory to check it); past
#: that, each reached memory is joined.
FORGOTTEN_LISTED = 1000


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


def _edge_row(edge: Edge) -> EdgeRow:
    # Backends stamp every edge before storing it; the epoch only keeps the column non-null.
    created = stamp(edge.created_at) if edge.created_at else "1970-01-01T00:00:00.000000Z"
    return (edge.source, edge.target, edge.type.value, edge.weight, as_json(dict(edge.metadata)), created)


async def insert_rows(db: aiosqlite.Connection, rows: list[EdgeRow], *, in_key_order: bool = False) -> None:
    """Insert the automatic edges of brand-new memories (no reverse rows can exist yet) as
    :func:`edge_rows` gives them; with ``in_key_order`` (a batch's edges) in primary-key order, so the
    B-tree inserts are sequential."""
    if in_key_order:
        # a stable sort of plain tuples: edges with one key keep their order (the last one stays)
        rows.sort(key=itemgetter(0, 1, 2))
    await db.executemany(
        "INSERT OR REPLACE INTO edges (source_id, target_id, type, weight, metadata, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        rows,
    )


def edge_rows(edges: Sequence[Edge]) -> list[EdgeRow]:
    """The rows of ``edges``, as :func:`_edge_row` makes them; the automatic edges of one write share
    their stamp and a few metadata shapes, so each distinct one is formatted once."""
    stamps: dict[object, str] = {}
    texts: dict[tuple[tuple[str, object], ...], str] = {}
    # metadata objects several edges share (ports.autolinks' constant ones), by identity: each is
    # alive for the whole call, so no id is reused meanwhile
    shared: dict[int, str] = {}
    rows = []
    for edge in edges:
        created = stamps.get(edge.created_at)
        if created is None:
            created = stamps[edge.created_at] = _edge_row(edge)[5]
        text = shared.get(id(edge.metadata))
        if text is None:
            text = shared[id(edge.metadata)] = _metadata_text(edge.metadata, texts)
        # _value_, not the enum's slower .value property: a batch formats hundreds of thousands
        rows.append((edge.source, edge.target, edge.type._value_, edge.weight, text, created))
    return rows


def _metadata_text(metadata: Mapping[str, str], texts: dict[tuple[tuple[str, object], ...], str]) -> str:
    key = tuple(metadata.items())
    try:
        text = texts.get(key)
    except TypeError:  # an unhashable metadata value: formatted on its own
        return as_json(dict(metadata))
    if text is None:
        text = texts[key] = as_json(dict(metadata))
    return text


@dataclass(frozen=True, slots=True)
class Ranking:
    """How ``strongest_neighbors`` ranks a hop: strength = type weight x edge weight (0..1)."""

    weights: Mapping[str, float]
    per_source: int
    min_strength: float
    #: A walk's floors per origin (``ports.NeighborFloors``), applied after the ``limit`` cut.
    floors: NeighborFloors | None = None

    def strength(self, row: Reach) -> float:
        """The entry's type weight times its edge weight clamped to 0..1 (0 for a type not followed)."""
        return edge_strength(self.weights.get(row[2], 0.0), row[3])

    def weight_floors(self) -> dict[str, float] | None:
        """The edge weight each followed type needs to reach ``min_strength`` (lowered by a billionth:
        rounding never leaves out an edge that passes), types that cannot reach it left out; ``None``
        when every edge passes. An edge below its type's floor cannot be kept, nor decide what is
        (``_winners``), so a hop never reads it: under a WHEN question's weights, ~99% of the entity
        edges of the bench's store (and of an ENTITY question's, ~90% of the temporal ones)."""
        if self.min_strength <= 0:
            return None
        need = self.min_strength * (1.0 - 1e-9)
        return {kind: need / weight for kind, weight in self.weights.items() if weight >= need}


#: One edge reaching a memory: ``(source_id, target_id, type, weight, origin, other)``, where
#: ``origin`` is the frontier end and ``other`` the memory reached.
Reach = tuple[str, str, str, float, str, str]


async def _hop(
    db: aiosqlite.Connection,
    frontier: list[str],
    kinds: list[str],
    visited: set[str],
    filters: Filters,
    limit: int,
    hop: int,
    forgotten: frozenset[str] | None,
    ranking: Ranking | None = None,
    floors: Mapping[str, float] | None = None,
) -> list[Neighbor]:
    """One hop: the best edge per (reached memory, type), strongest first, ties by id then type.

    The store reads only keys and weights of the frontier's edges (covered by the primary key and
    ``edges_target``) with the reached memory's visibility (under no filters, by ``forgotten``: see
    ``_forgotten``); choosing the winners is a few dict passes here (SQL window functions over the
    same rows cost several times more), and the full edge and memory rows are read for the ``limit``
    winners only. With a ``ranking`` only the strongest ``per_source`` memories per origin (one
    entry each) at or above ``min_strength`` are kept (``ports.RankedNeighbors``), and edges below
    its type's weight ``floors`` are not read. Frontier memories that are deleted reach nothing.
    """
    rows = await _reach(db, frontier, _Kinds(kinds, floors), filters, forgotten)
    winners = _winners(rows, visited, limit, ranking)
    return await _neighbours_of(db, winners, hop)


async def _forgotten(db: aiosqlite.Connection, filters: Filters) -> frozenset[str] | None:
    """The ids of the store's forgotten memories, for hops under ``filters``; ``None`` when filters
    (checked on each reached memory) or too many of them (see ``FORGOTTEN_LISTED``) need the join."""
    if visible_clause(filters, None).params:
        return None
    sql = "SELECT id FROM memories WHERE deleted_at IS NOT NULL LIMIT ?"
    rows = list(await db.execute_fetchall(sql, (FORGOTTEN_LISTED + 1,)))
    return None if len(rows) > FORGOTTEN_LISTED else frozenset(row[0] for row in rows)


@dataclass(frozen=True, slots=True)
class _Kinds:
    # The edge types a hop follows, and the weight each takes (``Ranking.weight_floors``), if any.
    names: list[str]
    floors: Mapping[str, float] | None

    def clause(self) -> tuple[str, list[Any]]:
        """The condition on ``e`` and its parameters."""
        sql = "e.type IN (SELECT value FROM json_each(?))"
        params: list[Any] = [json.dumps(self.names)]
        if self.floors and any(floor > 0 for floor in self.floors.values()):
            sql += " AND e.weight >= CASE e.type" + " WHEN ? THEN ?" * len(self.floors) + " ELSE 0 END"
            params += [value for pair in sorted(self.floors.items()) for value in pair]
        return sql, params


async def _reach(
    db: aiosqlite.Connection,
    frontier: list[str],
    kinds: _Kinds,
    filters: Filters,
    forgotten: frozenset[str] | None,
) -> list[Reach]:
    if forgotten is not None:
        return await _reach_unfiltered(db, frontier, kinds, forgotten)
    clause = visible_clause(filters, None)
    followed, followed_params = kinds.clause()
    active = "SELECT id FROM memories WHERE id IN (SELECT value FROM json_each(?)) AND deleted_at IS NULL"
    sql = _both_ways(
        "SELECT e.source_id, e.target_id, e.type, e.weight, {origin}, m.id FROM edges e "
        f"JOIN memories m ON m.id = {{other}} WHERE {{origin}} IN ({active}) "
        f"AND {followed} AND {clause.text()}"
    )
    params = (json.dumps(frontier), *followed_params, *clause.params)
    return [tuple(row) for row in await db.execute_fetchall(sql, params + params)]


async def _reach_unfiltered(
    db: aiosqlite.Connection, frontier: list[str], kinds: _Kinds, forgotten: frozenset[str]
) -> list[Reach]:
    # the edges alone (the primary key and ``edges_target`` cover them), forgotten ends left out here
    followed, followed_params = kinds.clause()
    sql = _both_ways(
        "SELECT e.source_id, e.target_id, e.type, e.weight, {origin}, {other} FROM edges e "
        f"WHERE {{origin}} IN (SELECT value FROM json_each(?)) AND {followed}"
    )
    ids = json.dumps([memory_id for memory_id in frontier if memory_id not in forgotten])
    params = (ids, *followed_params)
    # plain tuples already (no row factory): not copied row by row
    rows = cast(list[Reach], list(await db.execute_fetchall(sql, params + params)))
    return [row for row in rows if row[5] not in forgotten] if forgotten else rows


def _both_ways(half: str) -> str:
    """``half`` (with ``{origin}`` and ``{other}``) from the edges' sources, then from their targets:
    the parameters of a half are passed twice."""
    return (
        half.format(origin="e.source_id", other="e.target_id")
        + " UNION ALL "
        + half.format(origin="e.target_id", other="e.source_id")
    )


def _winners(rows: list[Reach], visited: set[str], limit: int, ranking: Ranking | None) -> list[Reach]:
    """The hop's result edges, strongest first (weight, then reached id, then type), at most ``limit``."""
    best: dict[tuple[str, str], Reach] = {}  # per (reached memory, type): its heaviest edge
    for row in rows:
        if row[5] in visited:
            continue
        key = (row[5], row[2])
        current = best.get(key)
        # heaviest first, then the lowest origin (then source, for a pair linked both ways)
        if current is None or (-row[3], row[4], row[0]) < (-current[3], current[4], current[0]):
            best[key] = row
    chosen = list(best.values()) if ranking is None else _strongest_per_origin(best.values(), ranking)
    chosen.sort(key=lambda row: (-row[3], row[5], row[2]))
    if ranking is None or ranking.floors is None:
        return chosen[:limit]
    return ranking.floors.keep(chosen[:limit], _ORIGIN, _REACHED, ranking.strength)


_ORIGIN, _REACHED = itemgetter(4), itemgetter(5)


def _strongest_per_origin(rows: Iterable[Reach], ranking: Ranking) -> list[Reach]:
    """Per origin, its ``per_source`` strongest reached memories (one edge each: the strongest, then
    the heaviest, then the first type) of strength ``min_strength`` or more."""
    picked: dict[tuple[str, str], tuple[float, Reach]] = {}
    for row in rows:
        if row[2] not in ranking.weights:
            continue
        strength = ranking.strength(row)
        key = (row[4], row[5])
        current = picked.get(key)
        if current is None or (-strength, -row[3], row[2]) < (-current[0], -current[1][3], current[1][2]):
            picked[key] = (strength, row)
    by_origin: dict[str, list[tuple[float, str, Reach]]] = {}
    for (origin, other), (strength, row) in picked.items():
        if strength >= ranking.min_strength:
            by_origin.setdefault(origin, []).append((-strength, other, row))
    kept: list[Reach] = []
    for group in by_origin.values():
        group.sort(key=lambda entry: (entry[0], entry[1]))
        kept.extend(row for _, _, row in group[: ranking.per_source])
    return kept


async def _neighbours_of(db: aiosqlite.Connection, winners: list[Reach], hop: int) -> list[Neighbor]:
    """The winners' full edge and memory rows (in the winners' order), superseders attached."""
    if not winners:
        return []
    sql = (
        f"SELECT {EDGE_COLUMNS}, {MEMORY_COLUMNS} FROM json_each(?) w "
        "JOIN edges e ON e.source_id = json_extract(w.value, '$[0]') "
        "AND e.target_id = json_extract(w.value, '$[1]') AND e.type = json_extract(w.value, '$[2]') "
        "JOIN memories m ON m.id = json_extract(w.value, '$[3]') ORDER BY w.key"
    )
    keys = json.dumps([[row[0], row[1], row[2], row[5]] for row in winners])
    rows = list(await db.execute_fetchall(sql, (keys,)))
    edge_width = len(EDGE_COLUMNS.split(","))
    replaced = await superseders(db, (row[edge_width] for row in rows))
    origins = {(row[0], row[1], row[2]): row[4] for row in winners}
    return [
        reached_neighbor(
            record_from_row(row[edge_width:], replaced.get(row[edge_width], ())),
            edge_from_row(row[:edge_width]),
            origins[(row[0], row[1], row[2])],
            hop,
        )
        for row in rows
    ]


async def strongest(
    db: aiosqlite.Connection, ids: Sequence[str], ranking: Ranking, limit: int, filters: Filters
) -> list[Neighbor]:
    """One ranked hop from ``ids`` (see ``ports.RankedNeighbors``)."""
    floors = ranking.weight_floors()
    kinds = sorted(ranking.weights if floors is None else floors)
    frontier = list(dict.fromkeys(ids))
    if not frontier or not kinds:
        return []
    forgotten = await _forgotten(db, filters)
    return await _hop(db, frontier, kinds, set(ids), filters, limit, 1, forgotten, ranking, floors)


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
    frontier = list(dict.fromkeys(ids))  # deleted ones reach nothing (see ``_hop``)
    visited = set(ids)
    found: list[Neighbor] = []
    forgotten = await _forgotten(db, filters)
    for hop in range(1, hops + 1):
        if not frontier:
            break
        reached = await _hop(db, frontier, kinds, visited, filters, limit, hop, forgotten)
        found.extend(reached)
        frontier = list(dict.fromkeys(item.record.id for item in reached))
        visited.update(frontier)
    found.sort(key=lambda item: (-item.edge.weight, item.hops, item.record.id, item.edge.type.value))
    return found[:limit]
