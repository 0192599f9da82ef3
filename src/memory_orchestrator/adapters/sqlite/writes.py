"""The write path in SQLite: duplicate lookup, candidate neighbours for the link rules, inserts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta

import aiosqlite

from memory_orchestrator.adapters.sqlite.rows import as_json, fts_query, stamp
from memory_orchestrator.ports import ChangeKind, MemoryRecord, parse_timestamp
from memory_orchestrator.ports.autolinks import DEFAULT_LIMITS, LinkLimits, MemorySketch
from memory_orchestrator.ports.text import tokenize

#: Lexically similar memories fetched from FTS as candidates for semantic edges.
LEXICAL_CANDIDATES = 20
#: Query terms used to find them (the longest ones: long words are the rarer, more telling ones).
LEXICAL_TERMS = 16


async def find_active_duplicate(db: aiosqlite.Connection, digest: str) -> str | None:
    """Id of the oldest active memory with this content hash, if any."""
    sql = (
        "SELECT id FROM memories WHERE content_hash = ? AND deleted_at IS NULL "
        "ORDER BY created_at, id LIMIT 1"
    )
    async with db.execute(sql, (digest,)) as cursor:
        row = await cursor.fetchone()
    return str(row[0]) if row else None


async def _ids(db: aiosqlite.Connection, sql: str, params: Sequence[object]) -> list[str]:
    async with db.execute(sql, tuple(params)) as cursor:
        return [str(row[0]) for row in await cursor.fetchall()]


async def candidate_ids(
    db: aiosqlite.Connection, new: MemorySketch, limits: LinkLimits = DEFAULT_LIMITS
) -> set[str]:
    """Every memory the link rules could pick for ``new``, each found through an index."""
    at = stamp(new.created_at)
    window = timedelta(hours=limits.proximity_hours)
    low, high = stamp(new.created_at - window), stamp(new.created_at + window)
    active = "SELECT id FROM memories WHERE deleted_at IS NULL AND "
    queries: list[tuple[str, tuple[object, ...]]] = [
        (
            active + "source = ? AND created_at <= ? ORDER BY created_at DESC, id DESC LIMIT ?",
            (new.source, at, limits.causal_window + 1),
        ),
        (active + "source = ? AND created_at >= ? ORDER BY created_at, id LIMIT 2", (new.source, at)),
        (
            active + "created_at BETWEEN ? AND ? ORDER BY created_at DESC LIMIT ?",
            (low, at, limits.proximity_max + 1),
        ),
        (
            active + "created_at BETWEEN ? AND ? ORDER BY created_at LIMIT ?",
            (at, high, limits.proximity_max + 1),
        ),
    ]
    per_name = limits.entity_per_name + 1
    for name in sorted(new.entities):
        queries.append(
            (
                "SELECT memory_id FROM memory_entities WHERE entity_norm = ? AND created_at <= ? "
                "ORDER BY created_at DESC LIMIT ?",
                (name, at, per_name),
            )
        )
        queries.append(
            (
                "SELECT memory_id FROM memory_entities WHERE entity_norm = ? AND created_at >= ? "
                "ORDER BY created_at LIMIT ?",
                (name, at, per_name),
            )
        )
    found: set[str] = set()
    for sql, params in queries:
        found.update(await _ids(db, sql, params))
    found.update(await _lexical_ids(db, new))
    found.discard(new.id)
    return found


async def _lexical_ids(db: aiosqlite.Connection, new: MemorySketch) -> list[str]:
    terms = sorted(new.tokens, key=lambda token: (-len(token), token))[:LEXICAL_TERMS]
    query = fts_query(terms)
    if query is None:
        return []
    sql = (
        "SELECT m.id FROM memories_fts JOIN memories m ON m.rowid = memories_fts.rowid "
        "WHERE memories_fts MATCH ? AND m.deleted_at IS NULL ORDER BY bm25(memories_fts) LIMIT ?"
    )
    return await _ids(db, sql, (query, LEXICAL_CANDIDATES))


async def load_sketches(db: aiosqlite.Connection, ids: set[str]) -> list[MemorySketch]:
    """Sketches of the candidate memories (content tokenized here, entity names casefolded)."""
    if not ids:
        return []
    sql = (
        "SELECT id, content, source, created_at, entities FROM memories "
        "WHERE id IN (SELECT value FROM json_each(?)) AND deleted_at IS NULL"
    )
    async with db.execute(sql, (json.dumps(sorted(ids)),)) as cursor:
        rows = await cursor.fetchall()
    return [
        MemorySketch(
            id=row[0],
            content=row[1],
            source=row[2],
            created_at=parse_timestamp(row[3]),
            tokens=frozenset(tokenize(row[1])),
            entities=frozenset(name.casefold() for name in json.loads(row[4])),
        )
        for row in rows
    ]


async def entity_counts(db: aiosqlite.Connection, names: frozenset[str]) -> dict[str, int]:
    """How many active memories carry each of the (casefolded) ``names``."""
    if not names:
        return {}
    sql = "SELECT entity_norm, uses FROM entity_stats WHERE entity_norm IN (SELECT value FROM json_each(?))"
    async with db.execute(sql, (json.dumps(sorted(names)),)) as cursor:
        return {str(row[0]): int(row[1]) for row in await cursor.fetchall()}


async def insert_memory(db: aiosqlite.Connection, record: MemoryRecord, digest: str, dedup: bool) -> None:
    """Insert the memory, its FTS row, its entity rows and entity statistics."""
    cursor = await db.execute(
        "INSERT INTO memories (id, content, content_hash, dedup_key, category, importance, tags, entities, "
        "source, metadata, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.id,
            record.content,
            digest,
            digest if dedup else None,
            record.category,
            record.importance,
            as_json(list(record.tags)),
            json.dumps(list(record.entities), ensure_ascii=False),
            record.source,
            as_json(dict(record.metadata)),
            stamp(record.created_at),
            stamp(record.updated_at),
        ),
    )
    rowid = cursor.lastrowid
    await cursor.close()
    await db.execute(
        "INSERT INTO memories_fts (rowid, tokens) VALUES (?, ?)", (rowid, " ".join(tokenize(record.content)))
    )
    spellings = {name.casefold(): name for name in reversed(record.entities)}
    created = stamp(record.created_at)
    await db.executemany(
        "INSERT OR IGNORE INTO memory_entities (memory_id, entity_norm, created_at) VALUES (?, ?, ?)",
        [(record.id, norm, created) for norm in spellings],
    )
    await db.executemany(
        "INSERT INTO entity_stats (entity_norm, name, uses) VALUES (?, ?, 1) "
        "ON CONFLICT (entity_norm) DO UPDATE SET uses = uses + 1",
        list(spellings.items()),
    )


async def remove_from_indexes(db: aiosqlite.Connection, memory_id: str) -> None:
    """Take a forgotten memory out of FTS, the entity index and the entity statistics."""
    await db.execute(
        "DELETE FROM memories_fts WHERE rowid = (SELECT rowid FROM memories WHERE id = ?)", (memory_id,)
    )
    norms = await _ids(db, "SELECT entity_norm FROM memory_entities WHERE memory_id = ?", (memory_id,))
    await db.execute("DELETE FROM memory_entities WHERE memory_id = ?", (memory_id,))
    await db.executemany(
        "UPDATE entity_stats SET uses = uses - 1 WHERE entity_norm = ?", [(n,) for n in norms]
    )
    await db.execute("DELETE FROM entity_stats WHERE uses <= 0")


async def log_change(
    db: aiosqlite.Connection, kind: ChangeKind, memory_id: str, at: str, detail: str = ""
) -> None:
    """Append one entry to the change log."""
    await db.execute(
        "INSERT INTO oplog (kind, memory_id, at, detail) VALUES (?, ?, ?, ?)",
        (kind.value, memory_id, at, detail),
    )
