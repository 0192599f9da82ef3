"""Reads in SQLite: BM25 keyword search, entity anchors and recency (fused by ``ports.recall``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

import aiosqlite

from memory_orchestrator.adapters.sqlite.context import BM25
from memory_orchestrator.adapters.sqlite.impacts import best_matches
from memory_orchestrator.adapters.sqlite.records import records_from_rows, select_records
from memory_orchestrator.adapters.sqlite.rows import MEMORY_COLUMNS, fts_query, visible_clause
from memory_orchestrator.adapters.sqlite.terms import choose_terms, term_frequencies
from memory_orchestrator.ports import Filters, MemoryRecord

#: Best BM25 matches (at least; four times the limit when larger) joined to their memories.
KEYWORD_POOL = 200


async def keyword(
    db: aiosqlite.Connection, tokens: Sequence[str], filters: Filters, now: datetime | None, limit: int
) -> list[tuple[MemoryRecord, float]]:
    """FTS5 BM25 matches (score: higher is better), best first, ties by id.

    Two phases: the best ``pool`` matches by BM25 from the index alone, then only those are joined to
    their memories and filtered (joining every match was most of the cost on a large store). When
    the filters leave fewer than ``limit`` of a full pool, the exact one-phase query runs instead.
    """
    frequencies, size = await term_frequencies(db, tokens, unseen=True)
    terms = list(dict.fromkeys(term for term in choose_terms(frequencies, size) if term))
    query = fts_query(terms)
    if query is None:
        return []
    clause = visible_clause(filters, now)
    pool = max(KEYWORD_POOL, 4 * limit)
    top, found = await _pool(db, terms, query, pool, size)
    bounded = (
        f"WITH top AS ({top}) "
        f"SELECT {MEMORY_COLUMNS}, -top.rank AS score FROM top JOIN memories m ON m.rowid = top.rowid "
        f"WHERE {clause.text()} ORDER BY top.rank, m.created_at DESC, m.id LIMIT ?"
    )
    rows = list(await db.execute_fetchall(bounded, (*found, *clause.params, limit)))
    if len(rows) < limit:
        counted = await db.execute_fetchall(
            "SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?)",
            (query, pool),
        )
        if int(next(iter(counted))[0]) == pool:  # the pool was full: filters may have hidden more
            exact = (
                f"SELECT {MEMORY_COLUMNS}, -{BM25} AS score FROM memories_fts "
                f"JOIN memories m ON m.rowid = memories_fts.rowid "
                f"WHERE memories_fts MATCH ? AND {clause.text()} "
                f"ORDER BY {BM25}, m.created_at DESC, m.id LIMIT ?"
            )
            rows = list(await db.execute_fetchall(exact, (query, *clause.params, limit)))
    records = await records_from_rows(db, rows)
    return [(record, float(row[-1])) for record, row in zip(records, rows, strict=True)]


async def _pool(
    db: aiosqlite.Connection, terms: list[str], query: str, pool: int, size: int
) -> tuple[str, tuple[object, ...]]:
    """The SQL of the best ``pool`` matches by BM25 (``rowid``, ``rank``) and its parameters."""
    best = await best_matches(db, BM25, terms, pool, size)
    if best is None:  # straight from FTS5, every match scored
        top = f"SELECT rowid, {BM25} AS rank FROM memories_fts WHERE memories_fts MATCH ? "
        top += "ORDER BY rank LIMIT ?"
        return top, (query, pool)
    # the same pool, found by scoring only the matches that can be in it (impacts.py)
    top = "SELECT json_extract(value, '$[0]') AS rowid, json_extract(value, '$[1]') AS rank FROM json_each(?)"
    return top, (json.dumps(best),)


async def anchored(
    db: aiosqlite.Connection, names: Sequence[str], filters: Filters, now: datetime | None, limit: int
) -> list[MemoryRecord]:
    """Memories carrying any of the entity ``names`` (case-insensitive), newest first."""
    norms = sorted({name.casefold() for name in names})
    if not norms:
        return []
    clause = visible_clause(filters, now)
    sql = (
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id IN (SELECT memory_id FROM memory_entities "
        f"WHERE entity_norm IN (SELECT value FROM json_each(?))) AND {clause.text()} "
        f"ORDER BY m.created_at DESC, m.id DESC LIMIT ?"
    )
    return await select_records(db, sql, (json.dumps(norms), *clause.params, limit))


async def newest(
    db: aiosqlite.Connection, filters: Filters, now: datetime | None, limit: int
) -> list[MemoryRecord]:
    """The newest visible memories first."""
    clause = visible_clause(filters, now)
    sql = (
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {clause.text()} "
        f"ORDER BY m.created_at DESC, m.id DESC LIMIT ?"
    )
    return await select_records(db, sql, (*clause.params, limit))
