"""The commit counter of an SQLite file: it changes with every commit by any connection, and only then,
in any journal mode; and watching it leaves SQLite's locks alone."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memory_orchestrator.ports.commit_counter import CommitCounter


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_the_counter_moves_with_each_commit_by_another_connection(tmp_path: Path, journal: str) -> None:
    path = tmp_path / "store.db"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute(f"PRAGMA journal_mode = {journal}")
    writer.execute("CREATE TABLE t (x)")
    counter = CommitCounter(path)
    counter.open()
    seen = [counter.read()]
    assert counter.read() == seen[0]  # reading changes nothing
    for value in range(3):
        writer.execute("INSERT INTO t VALUES (?)", (value,))
        seen.append(counter.read())
    writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the WAL starts over: still a new value
    writer.execute("INSERT INTO t VALUES (9)")
    seen.append(counter.read())
    assert None not in seen and len(set(seen)) == len(seen)
    counter.close()
    counter.close()
    assert counter.read() is None
    writer.close()


def test_an_immutable_store_has_one_version(tmp_path: Path) -> None:
    counter = CommitCounter(tmp_path / "absent.db", immutable=True)
    counter.open()
    assert counter.read() == counter.read() == 0


# SQLite (unix VFS) keeps a shared lock on byte 128 of the WAL index while a process has the file
# open (its "dead-man switch"); a process that can take it exclusively believes it is alone and
# truncates and rebuilds the WAL index. Asked from another process, as the next opener would.
DMS_PROBE = r"""
import fcntl, os, sys
descriptor = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 128)
    print("free")
except OSError:
    print("held")
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX advisory locks")
@pytest.mark.anyio
async def test_an_open_store_keeps_sqlites_wal_index_lock_while_its_counter_watches(tmp_path: Path) -> None:
    from memory_orchestrator.adapters.sqlite import SqliteBackend
    from memory_orchestrator.ports import NewMemory

    path = tmp_path / "store.db"
    async with SqliteBackend(path) as backend:
        await backend.remember(NewMemory("a write, so the WAL index is in use"))
        assert backend.store_version() is not None
        command = [sys.executable, "-c", DMS_PROBE, f"{path}-shm"]
        probe = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, check=True)
        assert probe.stdout.strip() == "held"
