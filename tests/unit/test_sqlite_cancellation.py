"""A write cancelled at any point must not leave a connection inside its transaction, nor be lost.

aiosqlite queues each statement on the connection's worker thread before the caller waits, so a
``BEGIN IMMEDIATE`` (or ``COMMIT``) whose caller is cancelled still runs. Before the fix a cancelled
``remember`` left the connection in an open transaction for good: it kept the file's write lock, so
another connection's write waited out its busy timeout and failed, and every later write on the same
connection failed with "cannot start a transaction within a transaction".

``remember`` now runs its transaction in a worker thread on the write connection: a caller cancelled
meanwhile (a call's deadline) no longer stops it, the write completes, and the same write sent again
is skipped as its duplicate (what a timed-out write's error tells the caller).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from memory_orchestrator.adapters.sqlite import SqliteBackend
from memory_orchestrator.adapters.sqlite.trace_store import SqliteTraceStore
from memory_orchestrator.ports import NewMemory, WriteAction

T0 = datetime(2026, 1, 5, 8, 30, tzinfo=UTC)
#: Cancel after this many event-loop turns: 1 lands on the queued BEGIN, later ones inside the body
#: and on the COMMIT; past the end the write simply completes.
TURNS = range(1, 40)


async def _cancel_after(turns: int, call: asyncio.Future[Any]) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)
    call.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await call


@pytest.mark.anyio
@pytest.mark.parametrize("turns", TURNS)
async def test_a_cancelled_remember_leaves_no_transaction_open(tmp_path: Path, turns: int) -> None:
    path = tmp_path / "store.db"
    with anyio.fail_after(20):
        async with SqliteBackend(path) as backend, SqliteBackend(path, busy_timeout_ms=200) as other:
            await backend.remember(NewMemory("Atlas launch moved to April", created_at=T0))
            task = asyncio.ensure_future(backend.remember(NewMemory(f"cancelled write {turns}")))
            await _cancel_after(turns, task)
            assert not backend.db.in_transaction
            # the same connection writes again, and so does another one (no write lock left behind)
            await backend.remember(NewMemory("Atlas review on Friday"))
            await other.remember(NewMemory("Atlas budget approved"))
            assert await backend.count() in (3, 4)  # 4 when the cancelled write had committed


@pytest.mark.anyio
async def test_a_write_whose_caller_is_cancelled_completes_and_its_retry_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release = threading.Event(), threading.Event()
    store_one = SqliteBackend._store_one

    async def held(self: SqliteBackend, db: Any, memory: NewMemory, digest: str) -> Any:
        started.set()  # inside the write's transaction, on the worker thread
        release.wait(10)
        return await store_one(self, db, memory, digest)

    monkeypatch.setattr(SqliteBackend, "_store_one", held)
    with anyio.fail_after(20):
        async with SqliteBackend(tmp_path / "store.db") as backend:
            task = asyncio.ensure_future(backend.remember(NewMemory("Atlas launch moved to April")))
            assert await asyncio.to_thread(started.wait, 10)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            release.set()
            again = await backend.remember(NewMemory("Atlas launch moved to April"))
            assert again.action is WriteAction.SKIPPED and again.duplicate_of
            assert await backend.count() == 1
            assert not backend.db.in_transaction


@pytest.mark.anyio
@pytest.mark.parametrize("turns", range(1, 12))
async def test_a_cancelled_trace_save_leaves_no_transaction_open(tmp_path: Path, turns: int) -> None:
    with anyio.fail_after(20):
        async with SqliteTraceStore(tmp_path / "traces.db", busy_timeout_ms=200) as store:
            await store.save("t-saved", T0, {"q": "saved"})
            # a wait for the written traces (a read's, or closing's) cancelled at any point
            task = asyncio.ensure_future(store.flush())
            await _cancel_after(turns, task)
            await store.save("t-next", T0, {"q": "next"})
            assert await store.load("t-next") == {"q": "next"}
            assert await store.load("t-saved") == {"q": "saved"}  # the write went on
