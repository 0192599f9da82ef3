"""The commit counter of an SQLite database file, for adapters whose store is one (``VersionedStore``).

A read cache asks on every read whether anyone (this process or another) has committed to the file
since an answer was computed: ``PRAGMA data_version`` on a connection of the counter's own changes
with every commit by any other connection, ours included (~5 us; a statement, so it releases the GIL
and must win it back, ~0.4 ms a call on a loaded event loop).

It must go through SQLite. An earlier version read the WAL index's header (``<file>-shm``) through a
read-only mapping of its own, and closed the descriptor it mapped from: on POSIX, closing *any*
descriptor of a file drops every lock the process holds on that file, including the shared
"dead-man switch" lock by which SQLite tells other processes that this one is using the WAL index.
The next process to open the store then believed it was alone, truncated and rebuilt the WAL index
under the running one (a worker of the concurrency test died of SIGBUS reading it). A test now
checks that an open store still holds that lock.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


class CommitCounter:
    """Reads the commit counter of one database file (see the module docstring)."""

    def __init__(self, path: Path, *, immutable: bool = False) -> None:
        self._path = path
        #: Opened read-only: nobody can change the file, so its version is fixed.
        self._immutable = immutable
        self._connection: sqlite3.Connection | None = None

    def open(self) -> None:
        """Open the watching connection (read-only; it never takes a write lock)."""
        if self._immutable or self._connection is not None:
            return
        uri = f"{self._path.resolve().as_uri()}?mode=ro"
        self._connection = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        self._connection.execute("PRAGMA data_version").fetchone()

    def read(self) -> int | None:
        """The current version; None when closed or unreadable right now (a cache then keeps nothing)."""
        if self._immutable:
            return 0
        if self._connection is None:
            return None
        try:
            row = self._connection.execute("PRAGMA data_version").fetchone()
        except sqlite3.Error:
            return None
        return int(row[0])

    def close(self) -> None:
        """Close the watching connection. Idempotent."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
