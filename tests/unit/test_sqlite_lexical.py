"""SQLite's lexical candidates: the postings of a write's rarest terms, ranked, found beyond its time."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_orchestrator.adapters.sqlite import create_backend
from memory_orchestrator.adapters.sqlite.lexical import lexical_rows
from memory_orchestrator.ports import EdgeType, NewMemory
from memory_orchestrator.ports.text import tokenize

T0 = datetime(2026, 1, 5, 9, tzinfo=UTC)


def _filler(count: int) -> list[NewMemory]:
    return [
        NewMemory(
            f"weekly standup note number {i} about the roadmap",
            source="bot",
            dedup=False,
            created_at=T0 + timedelta(days=i),
        )
        for i in range(count)
    ]


async def _rowids(backend: object, ids: list[str]) -> dict[int, str]:
    db = backend.db  # type: ignore[attr-defined]
    rows = await db.execute_fetchall(
        "SELECT rowid, id FROM memories WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(ids),),
    )
    return {int(row[0]): str(row[1]) for row in rows}


@pytest.mark.anyio
async def test_the_memory_sharing_more_rare_words_ranks_first_and_a_forgotten_one_is_gone(
    tmp_path: Path,
) -> None:
    async with create_backend({"path": str(tmp_path / "m.db")}) as backend:
        await backend.remember_many(_filler(30))
        one = await backend.remember(NewMemory("zanzibar ferry schedule", created_at=T0))
        both = await backend.remember(NewMemory("zanzibar ferry kilimanjaro trek", created_at=T0))
        gone = await backend.remember(NewMemory("kilimanjaro trek permit", created_at=T0))
        names = await _rowids(backend, [one.id, both.id, gone.id])
        query = tokenize("zanzibar kilimanjaro holiday")
        assert [names[row] for row in await lexical_rows(backend.db, query)] == [both.id, gone.id, one.id]
        await backend.forget(gone.id)
        assert [names[row] for row in await lexical_rows(backend.db, query)] == [both.id, one.id]


@pytest.mark.anyio
async def test_a_lexically_close_memory_a_year_away_gets_a_semantic_edge(tmp_path: Path) -> None:
    # other sources, no entity, a year apart: only the lexical lookup can find it
    text = "stratus hosting invoices arrive on the first of the month"
    async with create_backend({"path": str(tmp_path / "m.db")}) as backend:
        old = await backend.remember(NewMemory(text, source="alice", created_at=T0))
        await backend.remember_many(_filler(40))
        later = T0 + timedelta(days=365)
        new = await backend.remember(
            NewMemory(text.replace("first", "fifth"), source="bob", created_at=later)
        )
        assert not new.record or not new.record.entities
        found = await backend.neighbors([new.id], edge_types=[EdgeType.SEMANTIC])
        assert [item.record.id for item in found] == [old.id]
        assert [candidate.id for candidate in new.candidates] == [old.id]


@pytest.mark.anyio
async def test_a_version_4_store_gets_its_postings_from_the_index(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    async with create_backend({"path": str(path)}) as backend:
        kept = await backend.remember(NewMemory("Atlas moves its database to Postgres 16"))
        gone = await backend.remember(NewMemory("Lunch on Friday at the Italian place"))
        await backend.remember(NewMemory("Postgres 16 upgrade of Atlas is done, Atlas is happy"))
        await backend.forget(gone.id)
    with sqlite3.connect(path) as db:
        written = sorted(db.execute("SELECT term, row, size FROM memory_terms"))
        db.execute("DROP TABLE memory_terms")  # as version 4 left it
        db.execute("PRAGMA user_version = 4")
    async with create_backend({"path": str(path)}) as backend:
        assert kept.id
    with sqlite3.connect(path) as db:
        assert sorted(db.execute("SELECT term, row, size FROM memory_terms")) == written
        assert ("lunch",) not in db.execute("SELECT term FROM memory_terms").fetchall()
        assert ("atlas", 3, 6) in written  # distinct tokens: postgres 16 upgrade atlas done happy
