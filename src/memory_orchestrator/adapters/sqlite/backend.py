"""The embedded SQLite backend: one database file per store, WAL, FTS5 keyword search, typed edges."""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TypeVar, cast

import aiosqlite

from memory_orchestrator.adapters.sqlite import context, graph, retrieval, similar, writes
from memory_orchestrator.adapters.sqlite import vectors as vector_rows
from memory_orchestrator.adapters.sqlite.batch import Batch, collector_paused, finish
from memory_orchestrator.adapters.sqlite.batch_view import BatchView
from memory_orchestrator.adapters.sqlite.checkpoints import Checkpointer
from memory_orchestrator.adapters.sqlite.health import health_report
from memory_orchestrator.adapters.sqlite.lexicon import Ahead
from memory_orchestrator.adapters.sqlite.planner import EntityInputs, Helper, Planned, entity_inputs, plan
from memory_orchestrator.adapters.sqlite.reader import Reader
from memory_orchestrator.adapters.sqlite.records import active_records, select_records
from memory_orchestrator.adapters.sqlite.rows import MEMORY_COLUMNS, stamp
from memory_orchestrator.adapters.sqlite.schema import SCHEMA_VERSION, migrate, schema_version
from memory_orchestrator.adapters.sqlite.sync_db import SyncConnection, Work, run_to_end
from memory_orchestrator.adapters.sqlite.transactions import transaction
from memory_orchestrator.ports import (
    AsyncLifecycle,
    BackendHealth,
    BackendRejected,
    BackendUnavailable,
    Capabilities,
    Change,
    ChangeKind,
    Clock,
    Edge,
    EdgeType,
    Filters,
    Hit,
    MemoryRecord,
    Neighbor,
    NeighborFloors,
    NewMemory,
    NotFound,
    OrchestratorError,
    RecallQuery,
    SystemClock,
    VectorPage,
    WriteAction,
    WriteResult,
    ensure_utc,
    parse_timestamp,
    superseded_change,
)
from memory_orchestrator.ports.autolinks import MemorySketch, entities_for, sketch
from memory_orchestrator.ports.commit_counter import CommitCounter
from memory_orchestrator.ports.recall import fuse_recall
from memory_orchestrator.ports.text import (
    content_hash,
    extract_entities,
    matched_names,
    name_candidates,
    tokenize,
)
from memory_orchestrator.ports.validation import (
    validate_edge,
    validate_hops,
    validate_limit,
    validate_new_memory,
)

T = TypeVar("T")
A = TypeVar("A")
#: Attempts and first back-off of a write transaction (or an open) that finds the database locked.
WRITE_ATTEMPTS = 6
FIRST_BACKOFF_S = 0.05
#: Page cache per connection, KiB (SQLite's default is 2 MiB). On a large store each write's candidate
#: lookups and keyword search touch more index pages than that: at 100k memories a write's candidate
#: query cost ~40% less CPU with 32-64 MiB. Allocated only as pages are read (it raises peak RSS).
CACHE_KIB = 32768
#: Page size of a store this program creates (SQLite's default is 4,096; a store keeps the size it
#: was created with, so older stores stay as they are). A bulk batch's random B-tree inserts (edge
#: targets, keyword postings, content hashes) dirty fewer pages, and its commit and checkpoints write
#: and index fewer: in-process 100k imports took 63.1 / 63.7 / 63.3 / 63.5 / 59.7 s against 68.1 /
#: 65.3 / 69.8 / 66.0 / 61.1 s at 4,096, five pairs run one after the other (16,384: 65.5 and
#: 64.2 s); `memory_context` on 10k and 100k stores of the same memories was as fast (interleaved).
PAGE_SIZE = 8192
#: WAL a batch's commit lets accumulate before it checkpoints (a single write's never does:
#: ``checkpoints.py``). With SQLite's default (1,000 pages, 4 MB) a batch of a few hundred memories
#: dirtied about that many pages, so each batch paid a checkpoint; with a larger WAL a page rewritten
#: by several batches is copied back once. Above 20k memories every batch rewrites most of the keyword
#: postings' pages: 256 MiB (65,536 pages of 4 KiB) rather than 64 MiB took a 100k import's commits and
#: checkpoints from 14.2-14.9 s to 11.0-11.6 s (four pairs), for a WAL of ~340 MB at its end
#: instead of ~125 MB (the single writes after it were as fast); its longest batch, checkpoint
#: included, held the write lock 3.3 s instead of 2.5 (one run each; see ``BULK_BATCH``). In bytes,
#: whatever the store's page size (8 KiB pages: 32,768 of them; imports as fast as with 65,536).
BULK_WAL_BYTES = 256 * 1024 * 1024
#: Memories an import hands ``remember_many`` at once. A batch commits once and writes its index
#: rows at its end, so larger batches rewrite fewer index pages: 10,000 memories into a 60k store took
#: 14.5 / 13.1 / 12.0 / 11.5 / 11.2 s of CPU in batches of 250 / 1,000 / 2,000 / 5,000 / 10,000
#: (medians of 3). Past ~20k memories each batch rewrites most pages of the keyword postings and many
#: of the edge-target, hash and entity indexes, whatever its size: a 100k import took 58.3-60.5 s in
#: batches of 5,000 against 63.2-65.6 s in batches of 2,000 (three rounds, interleaved), a 10k one
#: 4.2-4.3 s against 4.2-4.5 s. A batch holds the write lock throughout: 5,000 held it up to 3.7-3.9 s
#: on the way to 100k (2,000: 2.2-2.5 s), inside the 5 s busy timeout of a concurrent agent's write
#: (which then retries: ``WRITE_ATTEMPTS``); the import's peak RSS was 50-65 MB higher (336-340 MB
#: at 100k, 168 MB at 10k). Batches of 10,000 were faster still at 100k, for a peak RSS of 465 MB.
BULK_BATCH = 5000
#: What every SQLite store can do (see ``SqliteBackend.capabilities``).
_CAPABILITIES = Capabilities(
    vector_search=True,
    intent_recall=False,
    bulk_writes=True,
    bulk_batch=BULK_BATCH,
    ranked_neighbors=True,
    neighbor_floors=True,
)


#: ``writes.entity_stats`` or a batch's ``BatchView.entity_stats``: spelling and uses per known name.
EntityStats = Callable[[aiosqlite.Connection, set[str]], Awaitable[dict[str, tuple[str, int]]]]


def _planned_results(written: list[WriteResult | MemoryRecord], plans: list[Planned]) -> list[WriteResult]:
    """A batch's results, in order: the skipped ones as they are, each stored memory (its record)
    with what the batch's planner gave it (``plans``: one per stored memory, in order)."""
    planned = iter(plans)
    return [entry if isinstance(entry, WriteResult) else _added(entry, next(planned)) for entry in written]


def _added(record: MemoryRecord, planned: Planned) -> WriteResult:
    """The result of storing ``record``, with the links its planning gave it."""
    return WriteResult(
        record.id,
        WriteAction.ADDED,
        candidates=planned.candidates,
        edges_created=planned.created,
        record=record,
    )


class SqliteBackend(AsyncLifecycle):
    """A ``MemoryBackend`` in one SQLite file, safe for several processes writing at once."""

    name = "sqlite"

    def __init__(
        self,
        path: Path,
        *,
        store: str = "default",
        clock: Clock | None = None,
        busy_timeout_ms: int = 5000,
        bulk_helper: bool = True,
    ) -> None:
        """``bulk_helper``: plan large batches' links in a helper process (``planner.py``)."""
        self.path = Path(path)
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.busy_timeout_ms = busy_timeout_ms
        self._db: aiosqlite.Connection | None = None
        #: Where reads run (``reader.py``): set while open.
        self._reader: Reader | None = None
        self._write_lock = asyncio.Lock()
        #: Candidate sketches read by earlier writes (used only under the write lock).
        self._sketches = writes.SketchCache()
        #: Ids by rowid of the rows committed batches met (used only under the write lock).
        self._rowids = writes.RowIds()
        #: The connection every write runs on, from a worker thread (see ``_writer_transaction``),
        #: kept between writes so its page cache stays warm.
        self._writer: sqlite3.Connection | None = None
        #: The store's page size, read when the write connection opens (WAL budgets are in bytes).
        self._writer_page_size = PAGE_SIZE
        #: Held by the worker thread for a whole write: a write whose caller was cancelled still runs
        #: to its end, and closing waits for it rather than pulling the connection from under it.
        self._writer_lock = threading.Lock()
        #: Opened read-only because the store cannot be written (see ``open``).
        self.read_only = False
        #: Watches the file's commit counter while open (for the read cache).
        self._version: CommitCounter | None = None
        #: Plans large batches' links on a second core (``planner.py``), started at the first one.
        self._helper = Helper(enabled=bulk_helper)
        #: Checkpoints the WAL after single writes, in the background (``checkpoints.py``).
        self._checkpoints = Checkpointer(partial(self._connect_plain, check_same_thread=True))

    @property
    def capabilities(self) -> Capabilities:
        """Everything but intent-aware recall; vectors are stored for a plugin's dense channel; a batch
        of writes goes in one transaction (``remember_many``), best thousands at a time."""
        return _CAPABILITIES  # frozen: one instance, not one per read (the pipeline asks often)

    # -- life cycle -----------------------------------------------------------------------------

    async def open(self) -> None:
        """Create the folder and the file if needed, switch to WAL and migrate the schema.

        A store that exists but cannot be written (a read-only folder, file or medium) is opened
        read-only: reads work, writes are refused with a clear error naming the file.
        """
        if self._db is not None:
            return
        try:
            with self._translated(f"open {self.path}"):
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # Processes opening one file at once race for the WAL's locks while it is set up.
                self._db = await _retrying(self._connect_writable)
        except BackendUnavailable as exc:
            if not self.path.is_file() or not _cannot_write(exc):
                raise
            with self._translated(f"open {self.path} read-only (after: {exc})"):
                self._db = await self._connect_read_only()
            self.read_only = True
        self._reader = Reader(self._connect_reader)
        self._version = CommitCounter(self.path, immutable=self.read_only)
        with self._translated(f"open {self.path}"):
            self._version.open()

    def store_version(self) -> int | None:
        """The file's commit counter: it changes with every commit by anyone (``ports.VersionedStore``)."""
        return None if self._version is None else self._version.read()

    async def _connect_writable(self) -> aiosqlite.Connection:
        db = await aiosqlite.connect(self.path, isolation_level=None)
        try:
            await db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms):d}")
            # only a new (empty) file takes it: the WAL switch below writes its first page
            await db.execute(f"PRAGMA page_size = {PAGE_SIZE:d}")
            await db.execute("PRAGMA journal_mode = WAL")
            await db.execute("PRAGMA synchronous = NORMAL")
            await db.execute(f"PRAGMA cache_size = {-CACHE_KIB:d}")
            await migrate(db, backend=self.name)
        except BaseException:
            await db.close()
            raise
        return db

    async def _connect_read_only(self) -> aiosqlite.Connection:
        db = await aiosqlite.connect(self._read_only_uri(), uri=True, isolation_level=None)
        try:
            version = await schema_version(db)
            if version != SCHEMA_VERSION:
                raise BackendRejected(
                    f"{self.path} has schema version {version}, this program needs {SCHEMA_VERSION}, "
                    "and the store cannot be written to migrate it",
                    backend=self.name,
                )
        except BaseException:
            await db.close()
            raise
        return db

    def _read_only_uri(self) -> str:
        # immutable: nothing can write this file now, so no lock or -shm file is needed to read it
        return f"{self.path.resolve().as_uri()}?mode=ro&immutable=1"

    def _connect_reader(self) -> sqlite3.Connection:
        """The read connection (in the reader thread, at the first read): the store is in WAL mode and
        migrated by then (``open``)."""
        if self.read_only:
            return sqlite3.connect(self._read_only_uri(), uri=True, isolation_level=None)
        return self._connect_plain(check_same_thread=True)

    def _connect_plain(self, *, check_same_thread: bool) -> sqlite3.Connection:
        """A plain connection to the store with the pragmas the read and write connections share."""
        connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=check_same_thread)
        try:
            connection.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms):d}")
            connection.execute("PRAGMA synchronous = NORMAL")
            connection.execute(f"PRAGMA cache_size = {-CACHE_KIB:d}")
        except BaseException:
            connection.close()
            raise
        return connection

    async def aclose(self) -> None:
        """Close the connections. Idempotent."""
        db, self._db = self._db, None
        reader, self._reader = self._reader, None
        if reader is not None:
            await reader.aclose()
        if self._version is not None:
            self._version.close()
            self._version = None
        if self._writer is not None:
            await asyncio.to_thread(self._close_writer)
        await asyncio.to_thread(self._checkpoints.close)
        if self._helper.process is not None:
            await asyncio.to_thread(self._helper.close)
        self._rowids = writes.RowIds()  # reopened, the path may name another file
        if db is not None:
            await db.close()

    @property
    def db(self) -> aiosqlite.Connection:
        """The open connection (``BackendUnavailable`` before ``open``)."""
        if self._db is None:
            raise BackendUnavailable("the SQLite backend is not open", backend=self.name)
        return self._db

    @contextmanager
    def _translated(self, operation: str) -> Iterator[None]:
        try:
            yield
        except OrchestratorError:
            raise
        except sqlite3.IntegrityError as exc:
            raise BackendRejected(f"{operation}: {exc}", backend=self.name) from exc
        except (sqlite3.Error, OSError, ValueError) as exc:
            raise BackendUnavailable(f"{operation}: {exc}", backend=self.name) from exc

    async def _read(self, operation: str, work: Work[T]) -> T:
        """``work`` on the read connection, in the reader thread: one thread hop for all its
        statements (``reader.py``)."""
        reader = self._reader
        if reader is None:
            raise BackendUnavailable("the SQLite backend is not open", backend=self.name)
        with self._translated(operation):
            return await reader.run(work)

    async def _write(self, operation: str, work: Work[T]) -> T:
        """``work`` in one immediate transaction on the write connection, in a worker thread (see
        ``_writer_transaction``): one thread hop for all its statements. A caller cancelled meanwhile
        does not stop it: it runs to its end (and commits, unless it fails)."""
        return await self._in_writer_thread(operation, self._write_now, work)

    async def _in_writer_thread(self, operation: str, function: Callable[[A], T], argument: A) -> T:
        """``function(argument)`` in a worker thread, under the write lock, its errors translated."""
        self._check_writable(operation)
        async with self._write_lock:
            with self._translated(operation):
                return await asyncio.to_thread(function, argument)

    def _write_now(self, work: Work[T]) -> T:
        with self._writer_lock, self._writer_transaction(0) as db:
            done = run_to_end(work(db))
        self._checkpoints.request()  # committed: its pages go back to the store in the background
        return done

    def _check_writable(self, operation: str) -> None:
        if self.read_only:
            raise BackendRejected(
                f"{operation}: the store {self.path} is read-only (its folder or file cannot be "
                "written); reads still work",
                backend=self.name,
            )

    def _now(self) -> datetime:
        return ensure_utc(self.clock.now())

    # -- writes ---------------------------------------------------------------------------------

    async def remember(self, memory: NewMemory) -> WriteResult:
        """Store ``memory`` with its automatic edges in one immediate transaction on the write
        connection (``_write``): its ~40 statements take one thread hop instead of one each (an
        aiosqlite call costs ~0.1 ms, and they were about half of a write's time)."""
        validate_new_memory(memory)
        digest = content_hash(memory.content)
        try:
            return await self._write("remember", lambda db: self._store_one(db, memory, digest))
        except BackendRejected:
            # A racing writer inserted the same content between our check and insert: it won.
            existing = await self._write("remember", lambda db: self._stored_duplicate(db, digest))
            if existing is None:
                raise
            return existing

    async def _store_one(self, db: aiosqlite.Connection, memory: NewMemory, digest: str) -> WriteResult:
        if memory.dedup and (skipped := await self._stored_duplicate(db, digest)) is not None:
            return skipped
        return await self._insert(db, memory, digest)

    async def _stored_duplicate(self, db: aiosqlite.Connection, digest: str) -> WriteResult | None:
        existing = await writes.find_active_duplicate(db, digest)
        return None if existing is None else await self._skipped(db, existing)

    async def remember_many(self, memories: Sequence[NewMemory]) -> list[WriteResult]:
        """Store ``memories`` in order in one transaction, each exactly as ``remember`` would (same
        dedup, same automatic edges: later memories see earlier ones). Every memory is validated
        first; a failure stores none of them. The batch runs in a worker thread on the write
        connection (``_writer_transaction``), so the event loop stays free and no statement pays a
        thread hop."""
        for memory in memories:
            validate_new_memory(memory)
        if not memories:
            return []
        return await self._in_writer_thread("remember_many", self._remember_batch, list(memories))

    @asynccontextmanager
    async def bulk_session(self) -> AsyncIterator[None]:
        """An import's run of ``remember_many`` calls (``ports.BulkSession``): when it ends, the WAL
        its batches left is copied back into the store, once, before the import returns. A batch
        checkpoints only when the WAL holds ``BULK_WAL_BYTES``, so an import used to end with up to
        that much of its pages still in the WAL: every read that missed the page cache then looked
        them up in the WAL's index, until some later write's checkpoint (100k memories: context p50
        26.9 ms with the checkpoint, 29.1 ms without, same process, one pair). It is the single
        writes' PASSIVE checkpoint (``checkpoints.py``), waited for: it copies what no reader still
        needs, never waits for one, and a failure is logged, not raised (the batches are committed)."""
        yield
        if self._db is not None and not self.read_only:
            await asyncio.to_thread(self._checkpoints.now)

    def _remember_batch(self, memories: list[NewMemory]) -> list[WriteResult]:
        with self._writer_lock, collector_paused():
            with self._writer_transaction(BULK_WAL_BYTES) as db:
                results, rowids = run_to_end(self._store_batch(db, memories))
            self._rowids.update(rowids)  # committed: its rowids are taken for good
            return results

    @contextmanager
    def _writer_transaction(self, wal_bytes: int) -> Iterator[aiosqlite.Connection]:
        """One immediate transaction on the write connection (opened at the first write), whose commit
        checkpoints the WAL once it holds ``wal_bytes`` of pages (0: never), in the calling worker
        thread, with ``_writer_lock`` held: writes run one at a time, each on some worker thread,
        and the connection is reused across threads. It is a ``SyncConnection``:
        every statement runs at once, so the write code (the same coroutines as on aiosqlite) is
        driven to its end by ``run_to_end``, without an event loop. The connection is dropped after
        an SQLite error other than a constraint's, in case the failure was the connection's."""
        connection = self._writer
        if connection is None:
            # used from whichever worker thread runs the write, one at a time (``_writer_lock``)
            connection = self._writer = self._connect_plain(check_same_thread=False)
            self._writer_page_size = int(connection.execute("PRAGMA page_size").fetchone()[0])
        try:
            connection.execute(f"PRAGMA wal_autocheckpoint = {wal_bytes // self._writer_page_size:d}")
            # busy_timeout already waits; the bounded retry covers writers that outlast it.
            begin = partial(_retrying_now, partial(connection.execute, "BEGIN IMMEDIATE"))
            with transaction(connection, begin):
                yield cast(aiosqlite.Connection, SyncConnection(connection))
        except sqlite3.IntegrityError:
            raise
        except sqlite3.Error:
            self._close_writer_locked()
            raise

    def _close_writer(self) -> None:
        with self._writer_lock:
            self._close_writer_locked()

    def _close_writer_locked(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    async def _store_batch(
        self, db: aiosqlite.Connection, memories: list[NewMemory]
    ) -> tuple[list[WriteResult], dict[int, str]]:
        """A batch's writes (in the transaction of ``_writer_transaction``), and the rowids it met."""
        # What no write of the batch reads waits for its end (adapters/sqlite/batch.py).
        view = BatchView(known=self._rowids)
        digests = [content_hash(memory.content) for memory in memories]
        dedup = [memory.dedup for memory in memories]
        deduplicated = {digest for digest, flag in zip(digests, dedup, strict=True) if flag}
        texts = [tokenize(memory.content) for memory in memories]
        terms = {term for tokens in texts for term in tokens}
        await view.start(db, len(memories), deduplicated, terms)
        # the helper looks up the lexical candidates ahead, in the store as the batch found it, and
        # reads the candidates' sketches there (the batch loads them only for writes it plans itself)
        store = str(self.path.resolve())
        ahead = Ahead(store, view.lexicon.size, view.rowids(dedup, digests))

        def load(ids: Sequence[str]) -> list[MemorySketch]:
            return run_to_end(writes.load_sketches(db, set(ids), self._sketches))

        planner = self._helper.planner([memory.content for memory in memories], load, ahead, store)
        deferred = Batch(view=view, planner=planner)
        written: list[WriteResult | MemoryRecord] = []
        for index, (memory, digest, tokens) in enumerate(zip(memories, digests, texts, strict=True)):
            existing = view.duplicate(digest) if memory.dedup else None
            if existing is not None:
                planner.written(index, 0)
                written.append(await self._skipped(db, existing))
            else:
                written.append(await self._insert_deferred(db, memory, digest, deferred, tokens, index))
        results = _planned_results(written, await finish(db, deferred))
        return results, deferred.view.ids

    async def _skipped(self, db: aiosqlite.Connection, existing: str) -> WriteResult:
        found = await active_records(db, [existing])
        return WriteResult(existing, WriteAction.SKIPPED, duplicate_of=existing, record=found.get(existing))

    async def _insert(self, db: aiosqlite.Connection, memory: NewMemory, digest: str) -> WriteResult:
        """Store one new memory and its automatic edges."""
        tokens, read = tokenize(memory.content), entity_inputs(memory.content)
        now, record, new, others, counts = await self._linking(db, memory, None, tokens, read)
        found = await writes.load_sketches(db, set(others), self._sketches)
        planned = plan(new, found, now, counts)  # what a batch's planner gives each of its writes
        await writes.insert_memory(db, record, digest, memory.dedup, tokens=tokens)
        await graph.insert_rows(db, planned.rows)
        await writes.log_change(db, ChangeKind.ADDED, record.id, stamp(now))
        self._sketches.put(new)
        return _added(record, planned)

    async def _insert_deferred(
        self,
        db: aiosqlite.Connection,
        memory: NewMemory,
        digest: str,
        deferred: Batch,
        tokens: list[str],
        index: int,
    ) -> MemoryRecord:
        """Store the batch's memory number ``index`` (``tokens``: see :meth:`_linking`); its edges
        are planned by the batch's planner, and they, its FTS row and change-log entry are left in
        ``deferred`` for ``batch.finish`` before the batch commits."""
        planner = deferred.planner
        read = planner.entity_inputs(index, memory.content)
        now, record, new, others, counts = await self._linking(
            db, memory, deferred, tokens, read, planner.lexical(index)
        )
        planner.add(new, others, now, counts)
        row = await writes.insert_memory(
            db,
            record,
            digest,
            memory.dedup,
            deferred.unindexed,
            tokens,
            counted=False,
            pending=deferred.view.pending,
        )
        planner.written(index, row)
        deferred.view.added(record, row, new.tokens, digest)
        deferred.changes.append((ChangeKind.ADDED.value, record.id, stamp(now), ""))
        self._sketches.put(new)
        return record

    async def _linking(
        self,
        db: aiosqlite.Connection,
        memory: NewMemory,
        deferred: Batch | None,
        tokens: list[str],
        read: EntityInputs,
        lexical: list[int] | None = None,
    ) -> tuple[datetime, MemoryRecord, MemorySketch, list[str], dict[str, int]]:
        """What planning a new memory's links takes (``tokens``: ``tokenize(memory.content)``;
        ``read``: ``planner.entity_inputs(memory.content)``; ``lexical``: its lexical rows, when a
        batch's helper looked them up): its stamp, record and sketch, its candidates' ids and the
        counts of its entity names (a batch answers from its view where it can)."""
        now = self._now()
        names, extracted = read
        view = deferred.view if deferred is not None else None
        # a batch answers entity statistics from memory, a single write from SQLite
        entity_stats: EntityStats = view.entity_stats if view is not None else writes.entity_stats
        stats = await entity_stats(db, names)
        known = {norm: name for norm, (name, _) in stats.items()}
        record = MemoryRecord(
            id=new_id(),
            content=memory.content,
            created_at=ensure_utc(memory.created_at) if memory.created_at else now,
            updated_at=now,
            category=memory.category,
            importance=memory.importance,
            tags=tuple(memory.tags),
            entities=entities_for(memory, known, extracted),
            source=memory.source,
            metadata=dict(memory.metadata),
        )
        new = sketch(record, tokens)
        if view is None:
            others = list(await writes.candidate_ids(db, new))
        else:
            others = await view.candidates(db, new, self._sketches, lexical)
        # the counts of names among the candidates came with their spelling; the rest are looked up
        counts = {norm: stats[norm][1] for norm in new.entities if norm in stats}
        if unlisted := new.entities - names:
            extra = await entity_stats(db, set(unlisted))
            counts.update({norm: uses for norm, (_, uses) in extra.items()})
        return now, record, new, others, counts

    async def link(self, edge: Edge) -> Edge:
        """Create or replace ``edge`` between two active memories."""
        [stored] = await self._link("link", [edge])
        return stored

    async def link_many(self, edges: Sequence[Edge]) -> list[Edge]:
        """``link`` each of ``edges`` in order, in one transaction: every edge is validated first, and
        one between memories that are not both active stores none of them (``NotFound``)."""
        return await self._link("link_many", edges) if edges else []

    async def _link(self, operation: str, edges: Sequence[Edge]) -> list[Edge]:
        for edge in edges:
            validate_edge(edge)
        now = self._now()
        stored = [edge.stamped(now) for edge in edges]
        await self._write(operation, lambda db: self._store_edges(db, stored, now))
        return stored

    async def _store_edges(self, db: aiosqlite.Connection, edges: list[Edge], now: datetime) -> None:
        ends = list(dict.fromkeys(memory_id for edge in edges for memory_id in (edge.source, edge.target)))
        found = await active_records(db, ends)
        for memory_id in ends:
            if memory_id not in found:
                raise NotFound(f"memory {memory_id} not found")
        for edge in edges:
            await graph.store_edge(db, edge)
            if (change := superseded_change(edge, now)) is not None:
                await writes.log_change(db, change.kind, change.memory_id, stamp(now), change.detail)

    async def forget(self, memory_id: str) -> None:
        """Soft-delete ``memory_id``; its edges and index entries disappear from reads."""
        await self._write("forget", lambda db: self._forget(db, memory_id, stamp(self._now())))

    async def _forget(self, db: aiosqlite.Connection, memory_id: str, now: str) -> None:
        cursor = await db.execute(
            "UPDATE memories SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL", (now, memory_id)
        )
        if cursor.rowcount == 0:
            raise NotFound(f"memory {memory_id} not found")
        await writes.remove_from_indexes(db, memory_id)
        await writes.log_change(db, ChangeKind.FORGOTTEN, memory_id, now)

    # -- reads ----------------------------------------------------------------------------------

    async def get(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """Active memories by id, in the order asked (each once)."""
        found = await self._read("get", lambda db: active_records(db, ids))
        return [found[memory_id] for memory_id in dict.fromkeys(ids) if memory_id in found]

    async def recent(
        self, *, limit: int = 20, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[MemoryRecord]:
        """Newest visible memories first."""
        validate_limit(limit)
        moment = ensure_utc(now or self._now())
        return await self._read("recent", lambda db: retrieval.newest(db, filters, moment, limit))

    async def search(
        self, text: str, *, limit: int = 10, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[Hit]:
        """FTS5 BM25 keyword search."""
        validate_limit(limit)
        moment = ensure_utc(now or self._now())
        terms = tokenize(text)
        scored = await self._read("search", lambda db: retrieval.keyword(db, terms, filters, moment, limit))
        return [
            Hit(record, round(score, 6), via="keyword", signals={"keyword": round(score, 6)})
            for record, score in scored
        ]

    async def similar_memories(self, text: str, *, limit: int) -> list[MemoryRecord]:
        """The memories sharing the most rare words with ``text`` (``ports.similar``; see
        ``similar.similar_records``): a bounded lookup, where ``search`` scores every match."""
        validate_limit(limit)
        now = self._now()
        return await self._read("similar_memories", lambda db: similar.similar_records(db, text, now, limit))

    async def recall(self, query: RecallQuery) -> list[Hit]:
        """Keyword, entity and recency channels fused by weighted reciprocal rank."""
        validate_limit(query.limit)
        now = ensure_utc(query.now or self._now())
        scored, anchors, latest = await self._read("recall", lambda db: _recall_lists(db, query, now))
        channels = {"keyword": [record for record, _ in scored], "entity": anchors, "recency": latest}
        scores = {record.id: score for record, score in scored}
        return fuse_recall(channels, scores, now)[: query.limit]

    async def neighbors(
        self,
        ids: Sequence[str],
        *,
        edge_types: Collection[EdgeType] | None = None,
        hops: int = 1,
        limit: int = 100,
        filters: Filters = Filters(),
    ) -> list[Neighbor]:
        """Breadth-first over edges in both directions, one query per hop for the whole frontier.

        A memory reached over several edge types appears once per type (its strongest edge of that type).
        """
        validate_hops(hops)
        validate_limit(limit)
        frontier = list(ids)
        return await self._read(
            "neighbors", lambda db: graph.neighbors(db, frontier, edge_types, hops, limit, filters)
        )

    async def strongest_neighbors(
        self,
        ids: Sequence[str],
        *,
        weights: Mapping[EdgeType, float],
        per_source: int,
        min_strength: float,
        limit: int,
        filters: Filters = Filters(),
        floors: NeighborFloors | None = None,
    ) -> list[Neighbor]:
        """One hop ranked, capped per origin and floored in SQL (``ports.RankedNeighbors``); the walk's
        ``floors`` before any memory is read."""
        validate_limit(limit)
        validate_limit(per_source, name="per_source")
        ranking = graph.Ranking(
            {EdgeType(k).value: float(v) for k, v in weights.items()}, per_source, min_strength, floors
        )
        frontier = list(ids)
        return await self._read(
            "strongest_neighbors", lambda db: graph.strongest(db, frontier, ranking, limit, filters)
        )

    async def changes(self, since: datetime, *, limit: int = 100) -> list[Change]:
        """Changes at or after ``since``, oldest first."""
        validate_limit(limit)
        return await self._read("changes", lambda db: _changes(db, stamp(since), limit))

    async def known_entities(self, *, limit: int = 1000) -> list[str]:
        """Entity names of active memories, most used first, ties alphabetical."""
        validate_limit(limit)
        return await self._read("known_entities", lambda db: _entity_names(db, limit))

    async def health(self, *, probe: bool = False) -> BackendHealth:
        """File, schema and FTS checks; with ``probe`` a write/read/delete round trip on a scratch table."""
        return await health_report(self, probe=probe)

    # -- vectors (ports.VectorStore) -----------------------------------------------------------

    async def put_vectors(self, space: str, vectors: Sequence[tuple[str, bytes]]) -> int:
        """Store vectors of active memories in ``space``; returns how many were stored."""
        vector_rows.check_space(space)
        return await self._write("put_vectors", lambda db: vector_rows.put(db, space, vectors))

    async def vectors_after(self, space: str, cursor: int, *, limit: int) -> VectorPage:
        """Vectors of ``space`` stored after ``cursor``, oldest first."""
        vector_rows.check_space(space)
        validate_limit(limit)
        return await self._read("vectors_after", lambda db: vector_rows.after(db, space, cursor, limit))

    async def without_vectors(self, space: str, *, limit: int) -> list[MemoryRecord]:
        """Active memories with no vector in ``space`` yet, oldest first."""
        vector_rows.check_space(space)
        validate_limit(limit)
        return await self._read("without_vectors", lambda db: vector_rows.missing(db, space, limit))

    async def context_records(self, ids: Sequence[str]) -> dict[str, list[MemoryRecord]]:
        """Each memory's context neighbours (``ports.ContextSource``; see ``sqlite/context.py``)."""
        return await self._read("context_records", lambda db: context.context_records(db, ids))

    async def count(self, *, include_forgotten: bool = False) -> int:
        """Number of stored memories (active only unless asked)."""
        sql = "SELECT count(*) FROM memories" + ("" if include_forgotten else " WHERE deleted_at IS NULL")
        rows = list(await self._read("count", lambda db: db.execute_fetchall(sql)))
        return int(rows[0][0]) if rows else 0

    async def all_records(self) -> list[MemoryRecord]:
        """Every active memory, oldest first (exports and tests)."""
        sql = (
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.deleted_at IS NULL ORDER BY m.created_at, m.id"
        )
        return await self._read("all_records", lambda db: select_records(db, sql, ()))


async def _recall_lists(
    db: aiosqlite.Connection, query: RecallQuery, now: datetime
) -> tuple[list[tuple[MemoryRecord, float]], list[MemoryRecord], list[MemoryRecord]]:
    """``recall``'s keyword, entity and recency lists."""
    pool = query.limit * 5
    scored = await retrieval.keyword(db, tokenize(query.text), query.filters, now, pool)
    known = await writes.known_names(db, name_candidates(query.text))
    names = [*extract_entities(query.text), *matched_names(query.text, known)]
    anchors = await retrieval.anchored(db, names, query.filters, now, pool)
    latest = await retrieval.newest(db, query.filters, now, query.limit)
    return scored, anchors, latest


async def _changes(db: aiosqlite.Connection, since: str, limit: int) -> list[Change]:
    sql = "SELECT kind, memory_id, at, detail FROM oplog WHERE at >= ? ORDER BY at, seq LIMIT ?"
    rows = list(await db.execute_fetchall(sql, (since, limit)))
    records = await active_records(db, (row[1] for row in rows))
    return [
        Change(ChangeKind(row[0]), row[1], parse_timestamp(row[2]), records.get(row[1]), row[3])
        for row in rows
    ]


async def _entity_names(db: aiosqlite.Connection, limit: int) -> list[str]:
    sql = "SELECT name FROM entity_stats WHERE uses > 0 ORDER BY uses DESC, entity_norm LIMIT ?"
    return [str(row[0]) for row in await db.execute_fetchall(sql, (limit,))]


def new_id() -> str:
    """A fresh memory id, ``mem-`` and 20 hex digits: the time in microseconds, then 28 random bits.

    Ids in the order they are made keep each write's index entries (the id, its edges, its entity
    rows) at the end of their B-trees rather than scattered over them: a batch dirties a few pages
    instead of one per entry, which counts most in large stores."""
    return f"mem-{time.time_ns() // 1000:013x}{secrets.randbits(28):07x}"


async def _retrying(call: Callable[[], Awaitable[T]]) -> T:
    """``call()``, again after a growing pause while SQLite says another connection holds the file:
    "database is locked" / "busy" past the busy timeout, or "locking protocol", a race for the WAL's
    locks that SQLite gives up on at once instead of waiting (many processes opening or writing one
    file at the same moment)."""
    delay = FIRST_BACKOFF_S
    for attempt in range(WRITE_ATTEMPTS):
        try:
            return await call()
        except sqlite3.OperationalError as exc:
            if not _contended(exc) or attempt == WRITE_ATTEMPTS - 1:
                raise
            await asyncio.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")


def _retrying_now(call: Callable[[], T]) -> T:
    """:func:`_retrying` in a worker thread: the pauses block it."""
    delay = FIRST_BACKOFF_S
    for attempt in range(WRITE_ATTEMPTS):
        try:
            return call()
        except sqlite3.OperationalError as exc:
            if not _contended(exc) or attempt == WRITE_ATTEMPTS - 1:
                raise
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")


def _contended(exc: sqlite3.OperationalError) -> bool:
    message = str(exc)
    return "locked" in message or "busy" in message or "locking protocol" in message


def _cannot_write(exc: BaseException) -> bool:
    """Whether an open failed because the store's folder or file cannot be written."""
    text = str(exc).lower()
    return any(cue in text for cue in ("unable to open database file", "readonly", "read-only"))
