"""A batch's postings and entity rows kept until its end, then written in key order."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import cast

import aiosqlite
import pytest

from memory_orchestrator.adapters.sqlite.backend import SqliteBackend
from memory_orchestrator.adapters.sqlite.lexical import term_rows
from memory_orchestrator.adapters.sqlite.pending import PendingRows
from memory_orchestrator.adapters.sqlite.sync_db import SyncConnection


def test_the_newest_postings_of_a_term_come_newest_first_up_to_the_limit() -> None:
    pending = PendingRows()
    pending.add(term_rows(7, ["kafka", "lag"]), [])
    pending.add(term_rows(8, ["kafka"]), [])
    pending.add(term_rows(9, ["kafka", "lag", "report"]), [])
    assert pending.newest("kafka", 10) == [(9, 3), (8, 1), (7, 2)]
    assert pending.newest("kafka", 2) == [(9, 3), (8, 1)]
    assert pending.newest("lag", 1) == [(9, 3)]
    assert pending.newest("kafka", 0) == []
    assert pending.newest("redis", 5) == []


@pytest.mark.anyio
async def test_flushing_writes_every_row_once_and_forgets_them(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    async with SqliteBackend(path):
        pass  # creates the schema
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        db = cast(aiosqlite.Connection, SyncConnection(connection))
        pending = PendingRows()
        pending.add(term_rows(2, ["zeta", "alpha"]), [("mem-b", "zeta", "t2"), ("mem-b", "alpha", "t2")])
        pending.add(term_rows(1, ["alpha"]), [("mem-a", "alpha", "t1")])
        await pending.flush(db)
        assert pending.newest("alpha", 5) == []
        await pending.flush(db)  # nothing left: nothing written twice
        terms = connection.execute("SELECT term, row, size FROM memory_terms ORDER BY term, row").fetchall()
        assert terms == [("alpha", 1, 1), ("alpha", 2, 2), ("zeta", 2, 2)]
        entities = connection.execute(
            "SELECT entity_norm, memory_id, created_at FROM memory_entities"
        ).fetchall()
        assert sorted(entities) == [
            ("alpha", "mem-a", "t1"),
            ("alpha", "mem-b", "t2"),
            ("zeta", "mem-b", "t2"),
        ]
    finally:
        connection.close()
