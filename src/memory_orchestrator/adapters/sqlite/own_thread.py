"""One SQLite connection used only from a thread of its own (the read connection, the checkpoints').

The connection is opened by ``connect`` at the first work, in that thread; an SQLite error drops it
(the connection may be what failed: a file replaced, an I/O error), and the next work opens a fresh
one. Work runs one at a time, in the order submitted; closing runs after the work already submitted.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class ThreadConnection:
    """A connection and the one thread (started at the first submit) that uses it."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], name: str) -> None:
        self._connect = connect
        self._name = name
        self._thread: ThreadPoolExecutor | None = None
        self._connection: sqlite3.Connection | None = None

    def submit(self, call: Callable[[], T]) -> Future[T]:
        """Run ``call()`` in the thread (it may use :meth:`using` there)."""
        if self._thread is None:
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._name)
        return self._thread.submit(call)

    def using(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work(connection)``, in the thread: the connection opened if needed, dropped after an
        SQLite error (which is raised)."""
        try:
            connection = self._connection
            if connection is None:
                connection = self._connection = self._connect()
            return work(connection)
        except sqlite3.Error:
            self._close_now()
            raise

    def _close_now(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def close(self) -> Future[None] | None:
        """Close the connection after the work already submitted and stop the thread (a later
        submit starts another); the close's future, or ``None`` when no thread ran."""
        thread, self._thread = self._thread, None
        if thread is None:
            return None
        closed = thread.submit(self._close_now)
        thread.shutdown(wait=False)
        return closed
