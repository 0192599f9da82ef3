"""Ending an explicit transaction on every exit, cancellation included.

aiosqlite runs each statement on the connection's worker thread in the order it was queued, and a
statement is queued before its caller first waits. So a ``BEGIN`` whose caller is cancelled while
waiting still runs, and the connection would stay inside that transaction for good (holding the
file's write lock, every later ``BEGIN`` failing with "cannot start a transaction within a
transaction") unless the error path queues a ``ROLLBACK`` behind it, whatever the exception was.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import aiosqlite


async def rollback(db: aiosqlite.Connection) -> None:
    """Queue ``ROLLBACK``; "no transaction is active" (``BEGIN`` failed, ``COMMIT`` ran) is not an error."""
    try:
        await db.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "no transaction is active" not in str(exc):
            raise


def rollback_now(connection: sqlite3.Connection) -> None:
    """:func:`rollback` on a plain connection (a worker thread's)."""
    try:
        connection.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "no transaction is active" not in str(exc):
            raise


@contextmanager
def transaction(connection: sqlite3.Connection, begin: Callable[[], object]) -> Iterator[None]:
    """One transaction on a plain connection (the read or the write connection): ``begin()`` opens
    it, the body runs in it, ``COMMIT`` ends it; any exception, a failed ``COMMIT``'s included,
    rolls it back."""
    begin()
    try:
        yield
        connection.execute("COMMIT")
    except BaseException:
        rollback_now(connection)
        raise
