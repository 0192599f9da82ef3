"""The commit counter of an SQLite file: it changes with every commit by any connection, and only then,
whether it reads the mapped WAL index (WAL mode) or asks SQLite (any other journal mode)."""

from __future__ import annotations

import sqlite3
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
