"""``SqliteTraceStore``: explain traces as JSON documents in a SQLite file, oldest pruned."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import aiosqlite
import pydantic_core

from memory_orchestrator.adapters.sqlite.rows import stamp
from memory_orchestrator.ports import BackendUnavailable, InvalidRequest, parse_timestamp

SCHEMA = """
CREATE TABLE IF NOT EXISTS traces (
    trace_id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    document TEXT NOT NULL
)
"""


#: Traces written by one statement at most (three parameters each, well inside SQLite's limit). Under
#: load a statement costs its thread's waits for the interpreter lock more than its rows: few, large
#: statements keep the writer ahead.
MAX_BATCH = 1000
#: Documents queued for the writer at most; a save past that drops its trace (see the class).
MAX_QUEUED = 1024
#: Seconds between two log lines about dropped traces (each drop is counted, not each logged).
DROP_LOG_EVERY_S = 10.0
LOG = logging.getLogger("memory_orchestrator")


def encode(document: Mapping[str, Any]) -> str:
    """The JSON text stored for a trace document: pydantic-core's encoder (part of pydantic), 2.5-3.5x
    faster than the standard library's on a search's trace (~20 KB, ~600 numbers; 0.3 against 1.0
    ms here), and that time was spent on every answered call. Compact, UTF-8 as it is; the values
    read back are ``json.dumps``'s (NaN and infinities as JavaScript constants, tuples as lists,
    other keys as strings), except that a value JSON has no type for is written as ``str`` of it,
    and a datetime as ISO 8601."""
    return pydantic_core.to_json(document, fallback=str).decode()


class SqliteTraceStore:
    """A ``TraceStore`` keeping at most ``retention`` traces (0 keeps none, the newest win).

    Write-behind: :meth:`save` queues the document and returns, and one writer task per opening
    encodes and writes everything queued, one multi-row INSERT (one statement, one commit, one round
    trip to the connection's thread) per batch. So an answer no longer waits for its trace to be
    encoded and committed, nor, under load, for the event loop to take the commit's completion off
    its queue. :meth:`load`, :meth:`recent` and :meth:`aclose` wait for the writer first (a trace
    saved is a trace read).

    A save never waits: while ``MAX_QUEUED`` documents are queued (the writer is behind: a stalled
    file, a checkpoint, a thread starved of the interpreter lock), a save drops its document instead
    of queueing it, so memory stays bounded and an answer never waits for a debugging aid. (It used
    to wait for the writer: under HTTP load, calls then waited 0.5-1.5 s at once for a slow write
    round and some of them failed their 2 s deadline.) A dropped trace, like one whose write
    failed, is lost: counted in :attr:`failed`, told to ``on_lost`` (the server's metrics) and
    logged (drops at most once per ``DROP_LOG_EVERY_S``); the next batch tries again.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        retention: int = 1000,
        busy_timeout_ms: int = 5000,
        on_lost: Callable[[int], None] | None = None,
    ) -> None:
        """``on_lost``: told how many traces each failed write or drop lost (the server's metrics)."""
        if retention < 0:
            raise InvalidRequest("trace retention must be 0 or more")
        self.path = Path(path)
        self.retention = retention
        self.busy_timeout_ms = busy_timeout_ms
        self._db: aiosqlite.Connection | None = None
        #: Saves since the last prune: pruning is an index scan of ``retention`` rows, so it runs
        #: once per 1/16 of the retention (the store holds at most 6% more than it keeps, briefly).
        self._unpruned = 0
        #: Documents waiting for the writer, how many were queued and written (or failed) so far,
        #: and the writer task while it runs.
        self._queued: list[tuple[str, str, Mapping[str, Any]]] = []
        self._enqueued = 0
        self._written = 0
        self._writer: asyncio.Task[None] | None = None
        #: Traces lost since the store was made: written in vain or dropped (see the class).
        self.failed = 0
        self.on_lost = on_lost
        #: Drops not yet logged, and when the last log line about drops was written.
        self._unlogged_drops = 0
        self._drops_logged_at: float | None = None

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

    async def aclose(self) -> None:
        """Write what is queued, then close the connection. Idempotent."""
        if self._db is not None:
            await self.flush()
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
        """Queue one document to store (or replace); the writer task writes it after the caller
        goes on, or drops it when ``MAX_QUEUED`` are queued (see the class). The document must not
        change afterwards (the domain's are built for the save and only read later)."""
        db = self._conn()
        if len(self._queued) >= MAX_QUEUED:
            self._dropped()
            return
        self._queued.append((trace_id, stamp(created_at), document))
        self._enqueued += 1
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write_behind(db))

    def _dropped(self) -> None:
        self._count_lost(1)
        self._unlogged_drops += 1
        now = time.monotonic()
        if self._drops_logged_at is None or now - self._drops_logged_at >= DROP_LOG_EVERY_S:
            LOG.warning(
                "trace store %s: %d trace(s) dropped: %d were queued for its writer",
                self.path,
                self._unlogged_drops,
                len(self._queued),
            )
            self._unlogged_drops, self._drops_logged_at = 0, now

    async def flush(self) -> None:
        """Wait until every document saved so far is written (or its write failed). Cancelling the
        wait does not cancel the writing."""
        mine = self._enqueued
        while self._written < mine and (writer := self._writer) is not None:
            await asyncio.shield(writer)

    async def _write_behind(self, db: aiosqlite.Connection) -> None:
        try:
            while self._queued:
                rows, self._queued = self._queued, []
                await self._write(db, rows)
                self._written += len(rows)
        finally:
            self._writer = None

    async def _write(self, db: aiosqlite.Connection, rows: list[tuple[str, str, Mapping[str, Any]]]) -> None:
        encoded = []
        for trace_id, created_at, document in rows:
            try:
                encoded.append((trace_id, created_at, encode(document)))
            except Exception as exc:  # a string JSON cannot carry (a lone surrogate), a cycle...
                self._lost(1, f"trace {trace_id} cannot be encoded: {exc}")
        written = 0
        try:
            for start in range(0, len(encoded), MAX_BATCH):
                chunk = encoded[start : start + MAX_BATCH]
                values = ", ".join(["(?, ?, ?)"] * len(chunk))
                await db.execute(
                    f"INSERT OR REPLACE INTO traces (trace_id, created_at, document) VALUES {values}",
                    [value for row in chunk for value in row],
                )
                written += len(chunk)
            self._unpruned += written
            if self._unpruned >= max(1, self.retention // 16):
                self._unpruned = 0
                # Keep the newest `retention` rows; the index makes the offset lookup cheap.
                await db.execute(
                    "DELETE FROM traces WHERE rowid IN (SELECT rowid FROM traces "
                    "ORDER BY created_at DESC, trace_id DESC LIMIT -1 OFFSET ?)",
                    (self.retention,),
                )
        except Exception as exc:  # sqlite3.Error, aiosqlite's ValueError once closed: never stop writing
            self._lost(len(encoded) - written, str(exc))

    def _lost(self, traces: int, reason: str) -> None:
        if not traces:  # written, but the prune failed: the next one tries again
            LOG.warning("trace store %s: pruning failed: %s", self.path, reason)
            return
        LOG.warning("trace store %s: %d trace(s) not stored: %s", self.path, traces, reason)
        self._count_lost(traces)

    def _count_lost(self, traces: int) -> None:
        """Count ``traces`` lost (written in vain or dropped) and tell ``on_lost``."""
        self.failed += traces
        if self.on_lost is not None:
            try:
                self.on_lost(traces)
            except Exception:  # metrics must never stop the writer or fail a save
                LOG.exception("trace store: the lost-trace observer failed")

    async def load(self, trace_id: str) -> Mapping[str, Any] | None:
        """The stored document, or ``None``."""
        await self.flush()
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
        await self.flush()
        try:
            async with self._conn().execute(
                "SELECT trace_id, created_at FROM traces ORDER BY created_at DESC, trace_id DESC LIMIT ?",
                (limit,),
            ) as cursor:
                rows = await cursor.fetchall()
        except sqlite3.Error as exc:
            raise BackendUnavailable(f"trace store: {exc}", backend="sqlite-traces") from exc
        return [(str(row[0]), parse_timestamp(row[1])) for row in rows]
