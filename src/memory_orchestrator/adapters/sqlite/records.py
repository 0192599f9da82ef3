"""Loading memory records (with their ``superseded_by``) from SQLite in set-at-a-time queries."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import aiosqlite

from memory_orchestrator.adapters.sqlite.rows import MEMORY_COLUMNS, record_from_row
from memory_orchestrator.ports import MemoryRecord


async def superseders(db: aiosqlite.Connection, ids: Iterable[str]) -> dict[str, list[str]]:
    """Active memories superseding each of ``ids`` (sorted), one query for all."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return {}
    found: dict[str, list[str]] = {}
    sql = (
        "SELECT e.target_id, e.source_id FROM edges e "
        "JOIN memories s ON s.id = e.source_id AND s.deleted_at IS NULL "
        "WHERE e.type = 'supersedes' AND e.target_id IN (SELECT value FROM json_each(?)) "
        "ORDER BY e.source_id"
    )
    for target, source in await db.execute_fetchall(sql, (json.dumps(wanted),)):
        found.setdefault(target, []).append(source)
    return found


async def records_from_rows(db: aiosqlite.Connection, rows: Sequence[Sequence[Any]]) -> list[MemoryRecord]:
    """Records of rows selected with ``MEMORY_COLUMNS``, in row order, superseders attached."""
    replaced = await superseders(db, (row[0] for row in rows))
    return [record_from_row(row, replaced.get(row[0], ())) for row in rows]


async def select_records(db: aiosqlite.Connection, sql: str, params: Sequence[Any]) -> list[MemoryRecord]:
    """Run a query selecting ``MEMORY_COLUMNS`` first and return its records in order."""
    rows = list(await db.execute_fetchall(sql, tuple(params)))
    return await records_from_rows(db, rows)


async def active_records(db: aiosqlite.Connection, ids: Iterable[str]) -> dict[str, MemoryRecord]:
    """Active memories among ``ids``, by id."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return {}
    sql = (
        f"SELECT {MEMORY_COLUMNS} FROM memories m "
        "WHERE m.id IN (SELECT value FROM json_each(?)) AND m.deleted_at IS NULL"
    )
    records = await select_records(db, sql, (json.dumps(wanted),))
    return {record.id: record for record in records}
