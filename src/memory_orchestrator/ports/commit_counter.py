"""The commit counter of an SQLite database file, for adapters whose store is one (``VersionedStore``).

A read cache asks on every read, on the event loop, whether anyone (this process or another) has
committed to the file since an answer was computed. In WAL mode every commit rewrites the header of
the shared WAL index (``<file>-shm``: the newest frame, a change counter, checksums; see
https://www.sqlite.org/walformat.html), which every connection maps into memory: reading its 48 bytes
from our own read-only mapping answers in well under a microsecond and without a system call, so the
event loop never gives up the GIL for it. ``PRAGMA data_version`` says the same through SQLite
(a statement, so the GIL is released and must be won back: ~0.4 ms a call under HTTP load); it is
the fallback when the file has no WAL index to map.

The mapping is safe because the counter keeps a connection of its own open for as long as it is
mapped: SQLite truncates a WAL index only when it is the first connection to open the file, which no
connection is while ours is open.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import sqlite3
from pathlib import Path

#: Bytes of the first copy of the WAL-index header.
HEADER_BYTES = 48


class CommitCounter:
    """Reads the commit counter of one database file (see the module docstring)."""

    def __init__(self, path: Path, *, immutable: bool = False) -> None:
        self._path = path
        #: Opened read-only: nobody can change the file, so its version is fixed.
        self._immutable = immutable
        self._connection: sqlite3.Connection | None = None
        self._header: mmap.mmap | None = None

    def open(self) -> None:
        """Open the watching connection (read-only; it never takes a write lock) and map the file's
        WAL index when it has one."""
        if self._immutable or self._connection is not None:
            return
        uri = f"{self._path.resolve().as_uri()}?mode=ro"
        self._connection = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        self._connection.execute("PRAGMA data_version").fetchone()  # joins the WAL index, if any
        self._header = _map_header(Path(f"{self._path}-shm"))

    def read(self) -> int | None:
        """The current version; None when closed or unreadable right now (a cache then keeps nothing)."""
        if self._immutable:
            return 0
        if self._header is not None:
            return int.from_bytes(self._header[:HEADER_BYTES], "little")
        if self._connection is None:
            return None
        try:
            row = self._connection.execute("PRAGMA data_version").fetchone()
        except sqlite3.Error:
            return None
        return int(row[0])

    def close(self) -> None:
        """Unmap, then close the watching connection. Idempotent."""
        header, self._header = self._header, None
        if header is not None:
            header.close()
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()


def _map_header(shm: Path) -> mmap.mmap | None:
    """A read-only mapping of the WAL-index header, or None (no WAL index: not in WAL mode)."""
    try:
        descriptor = os.open(shm, os.O_RDONLY)
    except OSError:
        return None
    try:
        if os.fstat(descriptor).st_size < HEADER_BYTES:
            return None
        with contextlib.suppress(OSError, ValueError):
            return mmap.mmap(descriptor, HEADER_BYTES, prot=mmap.PROT_READ)
        return None
    finally:
        os.close(descriptor)  # the mapping stays valid without the descriptor
