"""Folding a single write's WAL pages back into the store on a thread of its own.

A commit used to checkpoint the WAL itself once it held 1,000 pages (SQLite's automatic
checkpoint): most writes paid nothing, and the one that crossed the mark copied every page in it.
After a bulk import that was the import's whole WAL (a batch lets it grow to ``BULK_WAL_BYTES``):
the first write after a 10k import waited ~0.2 s for it. Now a single write's commit never
checkpoints; it asks this thread to, and returns. The thread runs a PASSIVE checkpoint on a connection
of its own: it copies what it can without waiting for any reader or writer (another checkpoint
running, in this process or another, makes it skip: the next write asks again), and once it has
copied everything, the next write starts the WAL over from its beginning. Batches still checkpoint
at their commit (``BULK_WAL_BYTES``): between the back-to-back batches of an import a background
checkpoint would never finish before the next batch appended to the WAL, so the WAL would only grow.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable

from memory_orchestrator.adapters.sqlite.own_thread import ThreadConnection

LOG = logging.getLogger(__name__)


class Checkpointer:
    """One thread and one connection (opened by ``connect`` at the first checkpoint) that checkpoint
    when asked: at most one checkpoint runs and one more waits, whatever the number of requests."""

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._own = ThreadConnection(connect, "sqlite-checkpoint")
        self._lock = threading.Lock()
        #: A checkpoint is asked for and has not started yet.
        self._waiting = False
        #: Checkpoints run so far (for tests and benchmarks).
        self.runs = 0

    def request(self) -> None:
        """Checkpoint soon, in the background (nothing to do if one already waits to start)."""
        with self._lock:
            if self._waiting:
                return
            self._waiting = True
            self._own.submit(self._checkpoint)

    def now(self) -> None:
        """Checkpoint on the thread and wait for it, after any already asked for (blocking: call it
        from a worker thread). A failure is logged, as in the background."""
        self._own.submit(self._checkpoint).result()

    def _checkpoint(self) -> None:
        with self._lock:
            self._waiting = False
        try:
            self._own.using(
                lambda connection: connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            )
            self.runs += 1
        except sqlite3.Error as exc:  # the connection was dropped: the next request tries again
            LOG.debug("background checkpoint failed: %s", exc)

    def close(self) -> None:
        """Let the checkpoints asked for finish, close the connection and stop the thread (blocking:
        call it from a worker thread)."""
        with self._lock:
            self._waiting = False
            closed = self._own.close()
        if closed is not None:
            closed.result()
