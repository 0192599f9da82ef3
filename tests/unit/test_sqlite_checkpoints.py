"""A single write leaves its WAL pages to the background checkpoint (adapters/sqlite/checkpoints.py)."""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_orchestrator.adapters.sqlite import backend as backend_module
from memory_orchestrator.adapters.sqlite.backend import SqliteBackend
from memory_orchestrator.adapters.sqlite.checkpoints import Checkpointer
from memory_orchestrator.ports import FixedClock, NewMemory

T0 = datetime(2026, 2, 1, 9, tzinfo=UTC)


def memories(count: int) -> list[NewMemory]:
    return [
        NewMemory(
            f"note {i} about the {('atlas', 'billing', 'vendor')[i % 3]} project",
            created_at=T0 + timedelta(hours=i),
        )
        for i in range(count)
    ]


def backfilled(path: Path) -> tuple[int, int]:
    """(frames in the WAL, frames copied back) once a checkpoint from another connection has run."""
    with sqlite3.connect(path) as db:
        _, log, copied = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return int(log), int(copied)


def wal_of(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


@pytest.mark.anyio
async def test_a_write_after_an_import_leaves_the_wal_to_the_background_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backend_module, "BULK_WAL_BYTES", 1 << 42)  # the import never checkpoints
    path = tmp_path / "store.db"
    async with SqliteBackend(path, clock=FixedClock(T0), bulk_helper=False) as backend:
        asked: list[int] = []
        monkeypatch.setattr(backend._checkpoints, "request", lambda: asked.append(1))
        await backend.remember_many(memories(2400))  # a WAL of more than 1,000 pages (SQLite's mark)
        size = path.stat().st_size
        await backend.remember(NewMemory("one more note about the atlas project", created_at=T0))
        await backend.forget((await backend.recent(limit=1))[0].id)
        # neither write copied the import's pages into the store file: each asked the checkpointer
        assert path.stat().st_size == size and asked == [1, 1]
        backend._checkpoints._checkpoint()  # what the thread runs
        assert path.stat().st_size > size
        log, copied = backfilled(path)
        assert log > 1000 and copied == log  # everything was copied already: nothing was left to do
        assert backend._checkpoints.runs == 1


@pytest.mark.anyio
async def test_writes_run_the_checkpoint_in_the_background_and_closing_waits_for_it(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    backend = SqliteBackend(path, clock=FixedClock(T0), bulk_helper=False)
    for _ in range(2):  # a reopened backend checkpoints again
        async with backend:
            for memory in memories(5):
                await backend.remember(memory)
        assert backend._checkpoints.runs >= 1
    assert not wal_of(path).exists()  # the last connection closed folded the WAL back


def test_requests_while_a_checkpoint_runs_add_one_more_at_most(tmp_path: Path) -> None:
    sqlite3.connect(tmp_path / "store.db").execute("PRAGMA journal_mode = WAL").fetchall()
    started, release = threading.Event(), threading.Event()

    def connect() -> sqlite3.Connection:
        started.set()
        release.wait(10)
        return sqlite3.connect(tmp_path / "store.db")

    checkpoints = Checkpointer(connect)
    checkpoints.request()
    assert started.wait(10)  # the first one runs (its connection opening)
    for _ in range(20):
        checkpoints.request()
    release.set()
    checkpoints.close()
    assert checkpoints.runs == 2


def test_a_failed_checkpoint_is_tried_again_at_the_next_request(tmp_path: Path) -> None:
    attempts: list[int] = []

    def connect() -> sqlite3.Connection:
        attempts.append(1)
        if len(attempts) == 1:
            raise sqlite3.OperationalError("unable to open database file")
        return sqlite3.connect(tmp_path / "store.db")

    checkpoints = Checkpointer(connect)
    checkpoints.request()
    checkpoints.close()
    assert checkpoints.runs == 0
    checkpoints.request()
    checkpoints.close()
    assert checkpoints.runs == 1 and len(attempts) == 2
