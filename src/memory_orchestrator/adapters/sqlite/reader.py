"""The read connection: a whole read (all its statements) in one hop to one dedicated thread.

On aiosqlite every statement is a trip to its thread and back (~0.07 ms quiet, ~0.15 ms busy), and
a graph hop or keyword search is three or four statements. Here a read is an ordinary read coroutine
of this package run on a ``SyncConnection`` (``sync_db``): driven to its end in the reader thread,
it crosses between threads once. Reads run one at a time, in the order asked, on one connection
whose page cache stays warm, as they did on aiosqlite's; a read whose caller gave up still runs to
its end, and closing waits for it. Each read is one read transaction, so all its statements see the
store as of one moment (a graph hop lists the forgotten memories, then reads edges). (Not
``query_only``: a keyword search on a large store stems its terms through a TEMP table.)
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from functools import partial
from typing import TypeVar, cast

import aiosqlite

from memory_orchestrator.adapters.sqlite.own_thread import ThreadConnection
from memory_orchestrator.adapters.sqlite.sync_db import SyncConnection, Work, run_to_end
from memory_orchestrator.adapters.sqlite.transactions import transaction

T = TypeVar("T")


class Reader:
    """One connection opened by ``connect`` at the first read, used only from its own thread."""

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._own = ThreadConnection(connect, "sqlite-read")

    async def run(self, read: Work[T]) -> T:
        """The result of ``read`` on the connection, in the reader thread."""
        return await asyncio.wrap_future(self._own.submit(partial(self._own.using, partial(_read, read))))

    async def aclose(self) -> None:
        """Close the connection after the reads already asked for, and stop the thread."""
        closed = self._own.close()
        if closed is not None:
            await asyncio.wrap_future(closed)


def _read(read: Work[T], connection: sqlite3.Connection) -> T:
    # one read transaction: every statement of the read sees the store as of one moment
    with transaction(connection, lambda: connection.execute("BEGIN")):
        return run_to_end(read(cast(aiosqlite.Connection, SyncConnection(connection))))
