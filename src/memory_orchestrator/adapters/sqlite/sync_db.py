"""The few aiosqlite ``Connection`` methods the write path uses, over a plain ``sqlite3`` connection.

Bulk writes run the ordinary (async) write path in a worker thread against this facade: every call
completes at once, so a batch of thousands of memories costs no event-loop or thread hop per
statement, and the write code exists once for single and bulk writes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any


class SyncConnection:
    """``execute``, ``execute_fetchall``, ``execute_insert``, ``executemany`` of aiosqlite, synchronous."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    async def execute(self, sql: str, parameters: Sequence[Any] = ()) -> sqlite3.Cursor:
        """Run one statement."""
        return self.connection.execute(sql, parameters)

    async def execute_fetchall(self, sql: str, parameters: Sequence[Any] = ()) -> list[Any]:
        """Run one query and return every row."""
        return self.connection.execute(sql, parameters).fetchall()

    async def execute_insert(self, sql: str, parameters: Sequence[Any] = ()) -> tuple[int | None]:
        """Run one insert; ``(lastrowid,)`` like aiosqlite."""
        return (self.connection.execute(sql, parameters).lastrowid,)

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> sqlite3.Cursor:
        """Run one statement per row."""
        return self.connection.executemany(sql, rows)
