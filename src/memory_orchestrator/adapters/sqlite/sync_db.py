"""The few aiosqlite ``Connection`` methods reads and writes use, over a plain ``sqlite3`` connection.

Reads and writes (one memory or a batch of thousands) run the package's ordinary (async) read and
write code in a worker thread against this facade: every call completes at once, so a read or a
write costs no event-loop or thread hop per statement, and the code exists once, whatever connection
runs it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, TypeVar

import aiosqlite

T = TypeVar("T")
#: A read or a write of this package, as the backend runs it on its read or write connection: a
#: coroutine of the connection (a ``SyncConnection`` there), driven by ``run_to_end``.
Work = Callable[[aiosqlite.Connection], Coroutine[Any, Any, T]]


def run_to_end(coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of ``coroutine``, which never waits (each of its awaits on a ``SyncConnection``
    completes at once), driven here without an event loop (``asyncio.run`` costs ~0.15 ms)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError("work on a SyncConnection waited for something; it needs an event loop")


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
