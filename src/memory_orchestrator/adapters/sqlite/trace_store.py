"""``SqliteTraceStore``: explain traces as JSON documents in a SQLite file, oldest pruned."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import aiosqlite

from memory_orchestrator.adapters.sqlite.rows import stamp
from memory_orchestrator.ports import BackendUnavailable, InvalidRequest, parse_timestamp

SCHEMA = """
CREATE TABLE IF NOT EXISTS traces (
    trace_id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    document TEXT NOT NULL
)
"""


#: Traces written by one statement at most (three parameters each, well inside SQLite's limit).
MAX_BATCH = 200
#: ``json.dumps(document, ensure_ascii=False, default=str)`` without the check for circular
#: references (a trace document is a tree of plain values): the same text, ~10% less of the time
#: encoding a trace takes (a search's is ~20 KB, ~600 numbers), built once rather than per save.
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str, check_circular=False)


class SqliteTraceStore:
    """A ``TraceStore`` keeping at most ``retention`` traces (0 keeps none, the newest win)."""

    def __init__(self, path: Path | str, *, retention: int = 1000, busy_timeout_ms: int = 5000) -> None:
        if retention < 0:
            raise InvalidRequest("trace retention must be 0 or more")
        self.path = Path(path)
        self.retention = retention
        self.busy_timeout_ms = busy_timeout_ms
        self._db: aiosqlite.Connection | None = None
        #: Saves since the last prune: pruning is an index scan of ``retention`` rows, so it runs
        #: once per 1/16 of the retention (the store holds at most 6% more than it keeps, briefly).
        self._unpruned = 0
        #: Group commit: rows waiting for the next write, and how many saves were queued, written
        #: (or failed) so far; one write at a time, each taking every row queued meanwhile.
        self._queued: list[tuple[str, str, str]] = []
        self._enqueued = 0
        self._written = 0
        self._failed: tuple[int, int, str] | None = None
        self._writing = asyncio.Lock()

    async def open(self) -> None:
        """Create the file and table if needed. Idempotent."""
        if self._db is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = await aiosqlite.connect(self.path, isolation_level=None)
            await db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms):d}")
            await db.execute("PRAGMA journal_mode = WAL")
            # A trace is a debugging aid: no fsync per saved trace (WAL + NORMAL survives a crashed
            # process; a power cut may lose the last traces, never corrupt the file).
            await db.execute("PRAGMA synchronous = NORMAL")
            await db.execute(SCHEMA)
            await db.execute("CREATE INDEX IF NOT EXISTS traces_created ON traces(created_at)")
        except (sqlite3.Error, OSError) as exc:
            raise BackendUnavailable(f"trace store: {exc}", backend="sqlite-traces") from exc
        self._db = db
        self._writing = asyncio.Lock()  # a lock waited on belongs to one event loop: one per opening

    async def aclose(self) -> None:
        """Close the connection. Idempotent."""
        db, self._db = self._db, None
        if db is not None:
            await db.close()

    async def __aenter__(self) -> SqliteTraceStore:
        """Open and return the store."""
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the store."""
        await self.aclose()

    def _conn(self) -> aiosqlite.Connection:
        if self._db is None:
            raise BackendUnavailable("the trace store is not open", backend="sqlite-traces")
        return self._db

    async def save(self, trace_id: str, created_at: datetime, document: Mapping[str, Any]) -> None:
        """Store (or replace) one document, then prune beyond ``retention`` now and then.

        Group commit: concurrent saves are written together, one multi-row INSERT (one statement,
        so one commit and one round trip to the connection's thread) per batch. A save returns once
        the batch holding its row is committed, and raises if that batch failed. Under load this
        turns one thread round trip per request into one per batch: each trip also hands the GIL
        to the connection's thread and back, which queued every request behind it.
        """
        text = _ENCODER.encode(document)
        db = self._conn()
        self._queued.append((trace_id, stamp(created_at), text))
        self._enqueued += 1
        mine = self._enqueued
        async with self._writing:
            if self._written < mine:
                await self._write_queued(db)
        failed = self._failed
        if failed is not None and failed[0] < mine <= failed[1]:
            raise BackendUnavailable(f"trace store: {failed[2]}", backend="sqlite-traces")

    async def _write_queued(self, db: aiosqlite.Connection) -> None:
        rows, self._queued = self._queued, []
        first, last = self._written, self._enqueued
        self._written = last  # also when it fails: those saves are answered (with the failure)
        try:
            for start in range(0, len(rows), MAX_BATCH):
                chunk = rows[start : start + MAX_BATCH]
                values = ", ".join(["(?, ?, ?)"] * len(chunk))
                await db.execute(
                    f"INSERT OR REPLACE INTO traces (trace_id, created_at, document) VALUES {values}",
                    [value for row in chunk for value in row],
                )
            self._unpruned += len(rows)
            if self._unpruned >= max(1, self.retention // 16):
                self._unpruned = 0
                # Keep the newest `retention` rows; the index makes the offset lookup cheap.
                await db.execute(
                    "DELETE FROM traces WHERE rowid IN (SELECT rowid FROM traces "
                    "ORDER BY created_at DESC, trace_id DESC LIMIT -1 OFFSET ?)",
                    (self.retention,),
                )
        except sqlite3.Error as exc:
            self._failed = (first, last, str(exc))

    async def load(self, trace_id: str) -> Mapping[str, Any] | None:
        """The stored document, or ``None``."""
        try:
            async with self._conn().execute(
                "SELECT document FROM traces WHERE trace_id = ?", (trace_id,)
            ) as cursor:
                row = await cursor.fetchone()
        except sqlite3.Error as exc:
            raise BackendUnavailable(f"trace store: {exc}", backend="sqlite-traces") from exc
        if row is None:
            return None
        document: Mapping[str, Any] = json.loads(row[0])
        return document

    async def recent(self, *, limit: int = 20) -> list[tuple[str, datetime]]:
        """Ids and times of the newest traces, newest first."""
        try:
            async with self._conn().execute(
                "SELECT trace_id, created_at FROM traces ORDER BY created_at DESC, trace_id DESC LIMIT ?",
                (limit,),
            ) as cursor:
                rows = await cursor.fetchall()
        except sqlite3.Error as exc:
            raise BackendUnavailable(f"trace store: {exc}", backend="sqlite-traces") from exc
        return [(str(row[0]), parse_timestamp(row[1])) for row in rows]
