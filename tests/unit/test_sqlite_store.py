"""SQLite specifics: file per store, migrations, error translation, safe FTS queries, trace store."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import struct
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import pytest

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.adapters.sqlite import SqliteBackend, create_backend, rows, store_path, writes
from memory_orchestrator.adapters.sqlite.backend import BULK_WAL_BYTES, PAGE_SIZE
from memory_orchestrator.adapters.sqlite.rows import fts_query, parse_stamp, stamp
from memory_orchestrator.adapters.sqlite.schema import SCHEMA_VERSION
from memory_orchestrator.adapters.sqlite.trace_store import SCHEMA, SqliteTraceStore
from memory_orchestrator.evaluation.datasets import Dataset, DatasetMemory, ingest
from memory_orchestrator.ports import (
    BackendRejected,
    BackendUnavailable,
    Edge,
    EdgeType,
    FixedClock,
    InvalidRequest,
    NewMemory,
    RecallQuery,
    TimestampOutOfRange,
    TraceStore,
    parse_timestamp,
)
from memory_orchestrator.ports.notifying import NotifyingBackend

T0 = datetime(2026, 1, 5, 8, 30, tzinfo=UTC)


def test_store_path_gives_one_file_per_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert store_path(None, "work") == tmp_path / "xdg" / "memory-orchestrator" / "work.db"
    assert store_path(tmp_path, "work") == tmp_path / "work.db"
    assert store_path(tmp_path / "memories.db", "default") == tmp_path / "memories.db"
    assert store_path(tmp_path / "memories.db", "eval1") == tmp_path / "memories.eval1.db"
    with pytest.raises(InvalidRequest):
        store_path(tmp_path, "../escape")


def test_stamps_sort_like_time() -> None:
    early, late = stamp(T0), stamp(T0 + timedelta(microseconds=1))
    assert early == "2026-01-05T08:30:00.000000Z"
    assert early < late
    assert stamp(datetime(2026, 1, 5, 10, 30, tzinfo=UTC)) > stamp(T0 + timedelta(hours=1, minutes=59))


def test_stamps_of_equal_moments_agree_whatever_was_stamped_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rows, "STAMP_CACHE", 3)
    paris = timezone(timedelta(hours=1))
    assert stamp(T0.astimezone(paris)) == "2026-01-05T08:30:00.000000Z"
    assert stamp(T0) == "2026-01-05T08:30:00.000000Z"  # the same instant, remembered
    naive = T0.replace(tzinfo=None) + timedelta(hours=1)
    assert stamp(naive) == "2026-01-05T09:30:00.000000Z"  # naive is UTC, never the aware 08:30
    assert stamp(naive.replace(tzinfo=paris)) == "2026-01-05T08:30:00.000000Z"
    for minutes in range(10):  # more moments than the cache holds: it empties and refills
        assert stamp(T0 + timedelta(minutes=minutes)) == f"2026-01-05T08:{30 + minutes}:00.000000Z"
    assert len(rows._STAMPS) <= 3
    with pytest.raises(TimestampOutOfRange):
        stamp(datetime(1, 1, 1, tzinfo=UTC))


def test_stored_stamps_parse_as_the_general_parser_reads_them() -> None:
    for moment in (T0, T0 + timedelta(microseconds=7), datetime(2, 1, 1, tzinfo=UTC)):
        parsed = parse_stamp(stamp(moment))
        assert parsed == parse_timestamp(stamp(moment)) == moment
        assert parsed.tzinfo is UTC
    # text in another form (written by hand or an older version) is read by the general parser
    for text in ("2026-01-05T08:30:00", "2026-01-05T09:30:00+01:00", "2026-01-05T08:30:00Z"):
        assert parse_stamp(text) == T0 and parse_stamp(text).tzinfo is not None


def test_fts_query_quotes_every_term() -> None:
    assert fts_query(["redis", "cache", "redis"]) == '"redis" OR "cache"'
    assert fts_query(['a"b']) == '"a""b"'
    assert fts_query([]) is None


@pytest.mark.anyio
async def test_open_creates_wal_database_at_current_schema(tmp_path: Path) -> None:
    backend = create_backend({"path": str(tmp_path / "m.db")})
    async with backend:
        await backend.remember(NewMemory("hello sqlite"))
    with sqlite3.connect(tmp_path / "m.db") as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT count(*) FROM memories").fetchone()[0] == 1


@pytest.mark.anyio
async def test_a_new_store_gets_the_larger_pages_and_an_older_one_keeps_its_own(tmp_path: Path) -> None:
    older = tmp_path / "older.db"
    with sqlite3.connect(older) as db:  # a store as SQLite's default page size made it
        db.execute("PRAGMA page_size = 4096")
        db.execute("PRAGMA journal_mode = WAL").fetchall()
    for path, size in ((tmp_path / "new.db", PAGE_SIZE), (older, 4096)):
        backend = SqliteBackend(path, bulk_helper=False)
        async with backend:
            notes = [
                NewMemory(f"note {i} about the atlas rollout", created_at=T0 + timedelta(minutes=i))
                for i in range(3)
            ]
            stored = await backend.remember_many(notes)
            assert {hit.record.id for hit in await backend.search("atlas rollout")} == {r.id for r in stored}
            assert backend._writer is not None
            # a batch's WAL budget is in bytes, whatever the page size
            assert (
                backend._writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == BULK_WAL_BYTES // size
            )
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA page_size").fetchone()[0] == size
            assert db.execute("SELECT count(*) FROM memories").fetchone()[0] == len(stored) == 3
    assert PAGE_SIZE != 4096  # so the two stores tell the sizes apart


def _wal_frames(path: Path) -> tuple[int, int]:
    """(frames in the WAL, frames of them copied back into the store), from the WAL index's header:
    ``mxFrame`` and ``nBackfill`` (https://www.sqlite.org/walformat.html, native byte order)."""
    header = path.with_name(path.name + "-shm").read_bytes()[:100]
    return struct.unpack_from("=I", header, 16)[0], struct.unpack_from("=I", header, 96)[0]


@pytest.mark.anyio
async def test_a_bulk_session_copies_its_wal_back_when_it_ends(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    backend = SqliteBackend(path, bulk_helper=False)
    notes = [
        NewMemory(f"note {i} about the atlas rollout", created_at=T0 + timedelta(minutes=i))
        for i in range(40)
    ]
    async with backend:
        async with backend.bulk_session():
            await backend.remember_many(notes[:20])
            await backend.remember_many(notes[20:])
            frames, copied = _wal_frames(path)
            assert frames > copied  # well under the batches' WAL budget: no batch checkpointed
        frames, copied = _wal_frames(path)
        assert copied == frames > 0 and backend._checkpoints.runs == 1
        assert len(await backend.search("atlas rollout", limit=50)) == 40
        with pytest.raises(RuntimeError, match="interrupted"):
            async with backend.bulk_session():
                await backend.remember_many(
                    [NewMemory("one more atlas note", created_at=T0 + timedelta(hours=2))]
                )
                raise RuntimeError("interrupted")
        frames, copied = _wal_frames(path)
        assert frames > copied and backend._checkpoints.runs == 1  # cut short: the batch stays, no checkpoint
        assert len(await backend.search("atlas", limit=50)) == 41


@pytest.mark.anyio
async def test_an_import_is_one_bulk_session_through_any_wrapper(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    inner = SqliteBackend(path, bulk_helper=False)
    memories = tuple(
        DatasetMemory(
            id=f"m{i}", content=f"note {i} about the atlas rollout", created_at=T0 + timedelta(minutes=i)
        )
        for i in range(30)
    )
    async with NotifyingBackend(inner, lambda: None) as backend:
        report = await ingest(backend, Dataset(name="notes", memories=memories))
        assert report.written == 30 and inner._checkpoints.runs == 1
    async with InMemoryBackend() as memory:  # a backend without sessions imports as before
        assert (await ingest(memory, Dataset(name="notes", memories=memories))).written == 30


@pytest.mark.anyio
async def test_keyword_search_stems_english_words(tmp_path: Path) -> None:
    backend = create_backend({"path": str(tmp_path / "m.db")})
    async with backend:
        invoice = await backend.remember(NewMemory("Sent the invoice to the vendor"))
        await backend.remember(NewMemory("Lunch plans for Friday"))
        assert [hit.record.id for hit in await backend.search("invoices")] == [invoice.id]
        assert [hit.record.id for hit in await backend.search("invoicing")] == [invoice.id]


@pytest.mark.anyio
async def test_a_version_1_keyword_index_is_migrated_and_stems(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    async with create_backend({"path": str(path)}) as backend:
        stored = await backend.remember(NewMemory("Renewed the parking permits"))
    with sqlite3.connect(path) as db:  # put the index back as version 1 built it (no stemming)
        db.execute("DROP TABLE memories_fts")
        db.execute(
            "CREATE VIRTUAL TABLE memories_fts USING fts5(tokens, tokenize = 'unicode61 remove_diacritics 0')"
        )
        db.execute(
            "INSERT INTO memories_fts (rowid, tokens) SELECT rowid, 'renewed parking permits' FROM memories"
        )
        db.execute("PRAGMA user_version = 1")
    async with create_backend({"path": str(path)}) as backend:
        assert [hit.record.id for hit in await backend.search("permit renewal")] == [stored.id]
        assert [record.content for record in await backend.get([stored.id])] == [
            "Renewed the parking permits"
        ]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "memories_fts_v1" not in tables


@pytest.mark.anyio
async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "m.db") as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(BackendRejected, match="newer"):
        await create_backend({"path": str(tmp_path / "m.db")}).open()


@pytest.mark.anyio
async def test_a_corrupt_file_is_reported_unavailable(tmp_path: Path) -> None:
    (tmp_path / "m.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(BackendUnavailable):
        await create_backend({"path": str(tmp_path / "m.db")}).open()


@pytest.mark.anyio
async def test_calls_before_open_are_unavailable(tmp_path: Path) -> None:
    backend = create_backend({"path": str(tmp_path / "m.db")})
    with pytest.raises(BackendUnavailable, match="not open"):
        await backend.recent()
    health = await backend.health()
    assert health.status == "error"


@pytest.mark.anyio
async def test_forget_removes_index_entries_and_entity_counts(tmp_path: Path) -> None:
    backend = SqliteBackend(tmp_path / "m.db", clock=FixedClock(T0))
    async with backend:
        kept = await backend.remember(NewMemory("Kafka topic a", entities=("Kafka",)))
        gone = await backend.remember(NewMemory("Kafka topic b", entities=("Kafka", "Zookeeper")))
        await backend.forget(gone.id)
        assert await backend.known_entities() == ["Kafka"]
        assert [hit.record.id for hit in await backend.search("topic")] == [kept.id]
    with sqlite3.connect(tmp_path / "m.db") as db:
        assert db.execute("SELECT count(*) FROM memories_fts").fetchone()[0] == 1
        assert db.execute("SELECT uses FROM entity_stats WHERE entity_norm = 'kafka'").fetchone()[0] == 1
        assert db.execute("SELECT docs FROM term_stats WHERE term = 'topic'").fetchone()[0] == 1


@pytest.mark.anyio
async def test_change_times_come_from_the_clock(tmp_path: Path) -> None:
    clock = FixedClock(T0)
    async with SqliteBackend(tmp_path / "m.db", clock=clock) as backend:
        written = await backend.remember(NewMemory("clocked", created_at=T0 - timedelta(days=9)))
        clock.set(T0 + timedelta(hours=1))
        await backend.forget(written.id)
        changes = await backend.changes(T0)
    assert [(change.kind.value, change.at) for change in changes] == [
        ("added", T0),
        ("forgotten", T0 + timedelta(hours=1)),
    ]


@pytest.mark.anyio
async def test_trace_store_saves_loads_and_prunes(tmp_path: Path) -> None:
    store = SqliteTraceStore(tmp_path / "traces.db", retention=2)
    assert isinstance(store, TraceStore)
    async with store:
        for index in range(3):
            await store.save(f"t{index}", T0 + timedelta(minutes=index), {"n": index, "stages": ["plan"]})
        assert await store.load("t0") is None
        assert await store.load("t2") == {"n": 2, "stages": ["plan"]}
        assert await store.recent() == [("t2", T0 + timedelta(minutes=2)), ("t1", T0 + timedelta(minutes=1))]
        await store.save("t1", T0 + timedelta(minutes=5), {"n": "replaced"})
        assert await store.load("t1") == {"n": "replaced"}
    await store.aclose()
    async with SqliteTraceStore(tmp_path / "traces.db", retention=2) as reopened:
        assert await reopened.load("t1") == {"n": "replaced"}


@pytest.mark.anyio
async def test_a_trace_document_reads_back_as_json_dumps_would_give_it(tmp_path: Path) -> None:
    odd = object()
    document = {
        "query": "café \u2028 ✓",
        "scores": [0.1 + 0.2, float("inf"), -0.0, 10**30],
        "pair": (1, "two"),
        3: "an int key",
        "when": T0,
        "opaque": odd,
        "nested": {"flag": True, "none": None},
    }
    async with SqliteTraceStore(tmp_path / "traces.db") as store:
        await store.save("t", T0, document)
        loaded = await store.load("t")
        text = (await store._conn().execute_fetchall("SELECT document FROM traces"))[0][0]
    assert isinstance(text, str)  # TEXT, so SQLite's JSON functions read it (a BLOB would be JSONB)
    assert "café \u2028 ✓" in text  # UTF-8 as it is, not escaped
    expected = json.loads(json.dumps(document, default=str))
    expected["when"] = "2026-01-05T08:30:00Z"  # ISO 8601 where json.dumps would write str(T0)
    assert loaded == expected
    assert loaded is not None and loaded["scores"][0] == 0.30000000000000004


class _GatedInserts:
    """Holds the trace store's INSERTs at a gate the test opens, and counts them. Used as a context
    manager, it opens the gate on the way out: a failed assertion with the gate shut would leave the
    writer, the store's closing and with them the test process stuck."""

    def __init__(self, store: SqliteTraceStore) -> None:
        self.gate = asyncio.Event()
        self.inserts: list[str] = []
        self._execute = store._conn().execute
        store._conn().execute = self  # type: ignore[method-assign]

    def __call__(self, sql: str, *args: object) -> object:
        if not sql.startswith("INSERT"):
            return self._execute(sql, *args)  # as it is (reads use it as a context manager)
        self.inserts.append(sql)
        return self._held(sql, *args)

    async def _held(self, sql: str, *args: object) -> object:
        await self.gate.wait()
        return await self._execute(sql, *args)

    def __enter__(self) -> _GatedInserts:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.gate.set()


def _rows_in_file(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as other:
        return int(other.execute("SELECT count(*) FROM traces").fetchone()[0])


async def _turns(count: int = 20) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


@pytest.mark.anyio
async def test_saves_made_while_the_writer_waits_are_written_together(tmp_path: Path) -> None:
    async with SqliteTraceStore(tmp_path / "traces.db", retention=100) as store:
        gated = _GatedInserts(store)
        gated.gate.set()
        await asyncio.gather(*(store.save(f"t{n}", T0 + timedelta(seconds=n), {"n": n}) for n in range(20)))
        assert [await store.load(f"t{n}") for n in range(20)] == [{"n": n} for n in range(20)]
        assert len(gated.inserts) == 1  # every save queued before the writer ran: one statement


@pytest.mark.anyio
async def test_a_save_returns_before_its_trace_is_written_and_reads_wait_for_it(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with anyio.fail_after(10):
        async with SqliteTraceStore(path) as store:
            with _GatedInserts(store) as gated:
                await store.save("t1", T0, {"n": 1})  # returns with its INSERT held at the gate
                await _turns()
                assert gated.inserts and _rows_in_file(path) == 0
                load = asyncio.ensure_future(store.load("t1"))
                recent = asyncio.ensure_future(store.recent())
                await _turns()
                assert not load.done() and not recent.done()
            assert await load == {"n": 1}
            assert await recent == [("t1", T0)]
            assert _rows_in_file(path) == 1


@pytest.mark.anyio
async def test_a_save_never_waits_and_drops_its_trace_while_the_writer_is_too_far_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from memory_orchestrator.adapters.sqlite import trace_store

    monkeypatch.setattr(trace_store, "MAX_QUEUED", 3)
    lost: list[int] = []
    with anyio.fail_after(10):
        async with SqliteTraceStore(tmp_path / "traces.db", on_lost=lost.append) as store:
            with _GatedInserts(store):
                await store.save("t0", T0, {"n": 0})
                await _turns()  # the writer took t0 and waits at the gate
                for n in range(1, 6):
                    await store.save(f"t{n}", T0, {"n": n})  # returns at once, the write held or not
                assert store.failed == 2 and lost == [1, 1]  # t4 and t5: three were queued already
                assert caplog.text.count("dropped") == 1  # the second drop is not logged again
                assert "1 trace(s) dropped: 3 were queued for its writer" in caplog.text
            found = [await store.load(f"t{n}") for n in range(6)]
            assert found == [{"n": 0}, {"n": 1}, {"n": 2}, {"n": 3}, None, None]
            await store.save("t6", T0, {"n": 6})  # the writer caught up: queued again
            assert await store.load("t6") == {"n": 6}
            assert store.failed == 2


@pytest.mark.anyio
async def test_closing_the_store_writes_what_is_queued(tmp_path: Path) -> None:
    store = SqliteTraceStore(tmp_path / "traces.db")
    await store.open()
    for n in range(3):
        await store.save(f"t{n}", T0, {"n": n})
    await store.aclose()
    async with SqliteTraceStore(tmp_path / "traces.db") as reopened:
        assert [await reopened.load(f"t{n}") for n in range(3)] == [{"n": n} for n in range(3)]


@pytest.mark.anyio
async def test_a_failed_trace_write_is_logged_and_counted_and_the_next_one_is_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lost: list[int] = []
    async with SqliteTraceStore(tmp_path / "traces.db", on_lost=lost.append) as store:
        await store.save("before", T0, {"n": 0})
        await store.flush()
        await store._conn().execute("DROP TABLE traces")
        await asyncio.gather(*(store.save(f"t{n}", T0, {"n": n}) for n in range(5)))  # the caller goes on
        await store.flush()
        assert store.failed == 5 and lost == [5]
        assert "5 trace(s) not stored: no such table: traces" in caplog.text
        await store._conn().execute(SCHEMA)
        await store.save("after", T0, {"n": 1})
        assert await store.load("after") == {"n": 1}
        assert store.failed == 5


@pytest.mark.anyio
async def test_a_document_json_cannot_carry_is_lost_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with SqliteTraceStore(tmp_path / "traces.db") as store:
        await store.save("bad", T0, {"query": "lone \ud800 surrogate"})
        await store.save("good", T0, {"query": "fine"})
        assert await store.load("good") == {"query": "fine"}
        assert await store.load("bad") is None
        assert store.failed == 1
        assert "trace bad cannot be encoded" in caplog.text


@pytest.mark.anyio
async def test_a_database_locked_by_another_writer_gives_unavailable_and_no_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory_orchestrator.adapters.sqlite import backend as backend_module

    monkeypatch.setattr(backend_module, "FIRST_BACKOFF_S", 0.001)
    path = tmp_path / "m.db"
    async with SqliteBackend(path, busy_timeout_ms=1) as backend:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(BackendUnavailable, match="locked"):
                await backend.remember(NewMemory("blocked write"))
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert await backend.recent() == []
        assert (await backend.remember(NewMemory("after the lock"))).action.value == "added"


@pytest.mark.anyio
async def test_a_lost_race_for_the_wal_locks_is_retried_on_open_and_on_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite answers "locking protocol" (SQLITE_PROTOCOL) at once when processes race for the WAL's
    # locks; seen with several processes opening and writing one file on a loaded machine. Opening
    # happens on aiosqlite's connection, every write on the write connection.
    from memory_orchestrator.adapters.sqlite import backend as backend_module

    monkeypatch.setattr(backend_module, "FIRST_BACKOFF_S", 0.001)
    real_connect = SqliteBackend._connect_writable
    lost = {"open": 2, "begin": 0}

    class LosingWriter:
        def __init__(self, connection: sqlite3.Connection) -> None:
            self.connection = connection

        def __getattr__(self, name: str) -> Any:
            return getattr(self.connection, name)

        def execute(self, sql: str, *args: object) -> object:
            if sql == "BEGIN IMMEDIATE" and lost["begin"]:
                lost["begin"] -= 1
                raise sqlite3.OperationalError("locking protocol")
            return self.connection.execute(sql, *args)

    async def connect(self: SqliteBackend) -> object:
        if lost["open"]:
            lost["open"] -= 1
            raise sqlite3.OperationalError("locking protocol")
        return await real_connect(self)

    monkeypatch.setattr(SqliteBackend, "_connect_writable", connect)
    async with SqliteBackend(tmp_path / "m.db") as backend:
        first = await backend.remember(NewMemory("written before any lost race"))
        assert lost["open"] == 0
        backend._writer = LosingWriter(backend._writer)  # type: ignore[arg-type, assignment]
        lost["begin"] = 2
        second = await backend.remember(NewMemory("written after two lost races"))
        assert second.action.value == "added" and lost["begin"] == 0
        lost["begin"] = 2
        await backend.link(Edge(second.id, first.id, EdgeType.CAUSAL, 0.5))
        assert lost["begin"] == 0
        causal = await backend.neighbors([second.id], edge_types=[EdgeType.CAUSAL])
        assert [neighbour.record.id for neighbour in causal] == [first.id]
        backend._writer = LosingWriter(backend._writer)  # type: ignore[arg-type, assignment]
        lost["begin"] = backend_module.WRITE_ATTEMPTS  # never won: a clear error, nothing written
        with pytest.raises(BackendUnavailable, match="locking protocol"):
            await backend.remember(NewMemory("never written"))
        assert [record.content for record in await backend.recent()] == [
            "written after two lost races",
            "written before any lost race",
        ]
        reopened = await backend.remember(NewMemory("written on a new write connection"))
        assert reopened.action.value == "added"


@pytest.mark.anyio
async def test_the_store_version_changes_with_every_commit_by_anyone_and_only_then(tmp_path: Path) -> None:
    path = tmp_path / "versions.db"
    async with SqliteBackend(path) as backend:
        start = backend.store_version()
        assert start is not None and backend.store_version() == start  # reading changes nothing
        await backend.recall(RecallQuery("anything"))
        assert backend.store_version() == start
        await backend.remember(NewMemory("our own write"))
        ours = backend.store_version()
        assert ours != start
        async with SqliteBackend(path) as other:  # as another process would
            await other.remember(NewMemory("their write"))
        assert backend.store_version() not in (start, ours)
    assert backend.store_version() is None  # closed: unknown


def test_a_sketch_reads_its_entities_casefolded_and_its_time_as_stored() -> None:
    row = ("mem-1", "Atlas moves", "user", "2026-01-05T08:30:00.000007Z", '["Atlas", "ATLAS", "Kafka"]', None)
    sketch = writes.sketch_of(row)
    assert sketch.entities == frozenset({"atlas", "kafka"})
    assert sketch.created_at == T0 + timedelta(microseconds=7)
    assert sketch.tokens == frozenset({"atlas", "moves"})
    assert writes.entity_set('["Atlas", "ATLAS", "Kafka"]') is sketch.entities  # parsed once
