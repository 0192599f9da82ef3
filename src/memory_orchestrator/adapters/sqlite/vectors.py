"""Vectors kept beside memories for a plugin's dense channel (``ports.VectorStore``).

One row per (space, memory) with the bytes the channel gave; ``seq`` grows with every store, so a
channel loads only what is new since its last look. Vectors are made in insertion order, so the
memories still without one are those stored after the newest memory that has one (an indexed
lookup, not a scan of the store).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import aiosqlite

from memory_orchestrator.adapters.sqlite.records import select_records
from memory_orchestrator.adapters.sqlite.rows import MEMORY_COLUMNS
from memory_orchestrator.ports import InvalidRequest, MemoryRecord, VectorPage
from memory_orchestrator.ports.channels import MAX_SPACE_CHARS


def check_space(space: str) -> None:
    """A vector space is a short non-empty name (the model's)."""
    if not isinstance(space, str) or not space.strip() or len(space) > MAX_SPACE_CHARS:
        raise InvalidRequest(f"a vector space is a name of 1 to {MAX_SPACE_CHARS} characters")


async def put(db: aiosqlite.Connection, space: str, vectors: Sequence[tuple[str, bytes]]) -> int:
    """Store the vectors of active memories (replacing older ones); returns how many were stored."""
    wanted = {memory_id: bytes(vector) for memory_id, vector in vectors}
    if not wanted:
        return 0
    sql = "SELECT id, rowid FROM memories WHERE id IN (SELECT value FROM json_each(?)) AND deleted_at IS NULL"
    rowids = {str(row[0]): int(row[1]) for row in await db.execute_fetchall(sql, (json.dumps(list(wanted)),))}
    rows = [
        (space, memory_id, rowids[memory_id], vector)
        for memory_id, vector in wanted.items()
        if memory_id in rowids
    ]
    await db.executemany("DELETE FROM vectors WHERE space = ? AND memory_id = ?", [row[:2] for row in rows])
    await db.executemany(
        "INSERT INTO vectors (space, memory_id, memory_rowid, vector) VALUES (?, ?, ?, ?)", rows
    )
    return len(rows)


async def after(db: aiosqlite.Connection, space: str, cursor: int, limit: int) -> VectorPage:
    """Vectors of ``space`` stored after ``cursor``, oldest first."""
    sql = "SELECT seq, memory_id, vector FROM vectors WHERE space = ? AND seq > ? ORDER BY seq LIMIT ?"
    rows = list(await db.execute_fetchall(sql, (space, cursor, limit)))
    if not rows:
        return VectorPage([], cursor)
    return VectorPage([(str(row[1]), bytes(row[2])) for row in rows], int(rows[-1][0]))


async def missing(db: aiosqlite.Connection, space: str, limit: int) -> list[MemoryRecord]:
    """Active memories stored after the newest one with a vector in ``space``, oldest first."""
    sql = (
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.deleted_at IS NULL AND m.rowid > "
        "(SELECT coalesce(max(memory_rowid), 0) FROM vectors WHERE space = ?) ORDER BY m.rowid LIMIT ?"
    )
    return await select_records(db, sql, (space, limit))
