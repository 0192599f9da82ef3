"""The commit counter of an SQLite database file, for adapters whose store is one (``VersionedStore``).

``PRAGMA data_version`` on a connection changes whenever another connection, in this process or any
other, commits to the file; reading it touches no page (in WAL mode the index is shared memory), so
a read cache can ask on every read, synchronously, in a few microseconds. The counter has a
connection of its own: the adapter's writes go through its other connections and so change it too.
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
