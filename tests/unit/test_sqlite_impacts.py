"""SQLite keyword search over impact-ordered postings: the same pool as scoring every match, and
postings that follow every write of the keyword index (and that a version 5 store gets on opening)."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_orchestrator.adapters.sqlite import create_backend, impacts, retrieval, schema
from memory_orchestrator.adapters.sqlite.context import BM25
from memory_orchestrator.ports import Filters, NewMemory
from memory_orchestrator.ports.text import tokenize

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)
WORDS = ["invoice", "invoices", "deploy", "deployed", "budget", "roadmap", "outage", "ferry"]


def _conversation(count: int) -> list[NewMemory]:
    """Turns of two speakers a minute apart (so the context column is filled), common words
    repeated and rows of varied length (so BM25's frequency and length parts both matter)."""
    memories = []
    for i in range(count):
        words = [WORDS[(i * 7 + k) % len(WORDS)] for k in range(1 + i % 4)]
        if i % 5 == 0:
            words += words[:1]  # a repeated word
        filler = " ".join(f"filler{(i * 3 + k) % 40}" for k in range(i % 9))
        memories.append(
            NewMemory(
                f"note {' '.join(words)} {filler} rare{i}",
                source="ann" if i % 2 else "bob",
                dedup=False,
                created_at=T0 + timedelta(minutes=i),
            )
        )
    return memories


async def _reorder(db: Any, reference: float) -> None:
    """Re-derive every posting by another reference length (what drift makes of the stored order)."""
    await db.execute("UPDATE meta SET value = ? WHERE key = 'keyword_length'", (reference,))
    rows = [int(row[0]) for row in await db.execute_fetchall("SELECT rowid FROM memories_fts")]
    await impacts.reindex(db, rows)
    await db.commit()


def _prune_every_query(monkeypatch: pytest.MonkeyPatch, deepest: float | None = None) -> None:
    # postings on a tiny store, pruning on every query, a pool small enough to leave matches out
    monkeypatch.setattr(impacts, "SMALL_QUERY", 0)
    monkeypatch.setattr(impacts, "SMALL_STORE", 0)
    if deepest is not None:
        monkeypatch.setattr(impacts, "DEEPEST", deepest)
    monkeypatch.setattr(retrieval, "KEYWORD_POOL", 8)


def _rows(path: Path) -> list[tuple[str, float, int]]:
    with sqlite3.connect(path) as db:
        found = db.execute("SELECT term, impact, row FROM keyword_impacts ORDER BY term, row")
        return [(str(term), round(float(impact), 9), int(row)) for term, impact, row in found]


@pytest.mark.anyio
@pytest.mark.parametrize("reference", [None, 6.0])
async def test_the_pruned_pool_is_the_pool_of_scoring_every_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reference: float | None
) -> None:
    # a reference length far from the rows' (6 against ~15) orders postings unlike the scores: the
    # first postings read are not the pool, and the bound must send the search deeper
    _prune_every_query(monkeypatch, deepest=1.0)
    used: list[bool] = []
    pruned = retrieval.best_matches

    async def watched(*args: Any) -> Any:
        found = await pruned(*args)
        used.append(found is not None)
        return found

    async def unpruned(*_: Any) -> None:
        return None

    async with create_backend({"path": str(tmp_path / "m.db")}) as backend:
        await backend.remember_many(_conversation(240))
        if reference is not None:
            await _reorder(backend.db, reference)
        for text in ["invoice budget", "deploy", "outage ferry roadmap", "invoices deployed rare7"]:
            monkeypatch.setattr(retrieval, "best_matches", watched)
            # through the backend: on its read connection, as a served search runs it
            fast = [(hit.record, hit.score) for hit in await backend.search(text, limit=2)]
            monkeypatch.setattr(retrieval, "best_matches", unpruned)
            every = await retrieval.keyword(backend.db, tokenize(text), Filters(), None, 2)
            assert [score for _, score in fast] == pytest.approx([score for _, score in every], abs=1e-6)
            assert {record.id for record, _ in fast} == {record.id for record, _ in every}
    assert used and all(used)


@pytest.mark.anyio
async def test_postings_follow_every_write_as_a_build_from_the_index_finds_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.db"
    async with create_backend({"path": str(path)}) as backend:
        written = await backend.remember_many(_conversation(30))
        assert _rows(path) == []  # a small store keeps no postings
        monkeypatch.setattr(impacts, "SMALL_STORE", 30)
        await backend.remember_many(_conversation(2))  # the write that makes it large builds them all
        assert {row[2] for row in _rows(path)} >= {1, 30, 32}
        # one at a time, between two indexed turns: both neighbours' context changes
        await backend.remember(
            NewMemory("ferry budget invoice", source="cat", created_at=T0 + timedelta(minutes=3, seconds=30))
        )
        await backend.remember_many(_conversation(3))  # a batch next to indexed memories
        await backend.forget(written[10].id)  # its neighbours take the memories beyond it
        await backend.forget(written[11].id)
        maintained = _rows(path)
        # every posting again from FTS5's whole vocabulary, by the same reference length
        await backend.db.execute("DELETE FROM keyword_impacts")
        await backend.db.execute(f"CREATE VIRTUAL TABLE temp.everything USING {impacts.ALL_ROWS}")
        await backend.db.execute(impacts.impact_sql("temp.everything"))
        await backend.db.commit()
    rebuilt = _rows(path)
    assert rebuilt == maintained
    assert any(row[0] == "invoic" for row in rebuilt)  # FTS5's stems: invoice and invoices are one


@pytest.mark.anyio
async def test_a_large_version_5_store_gets_its_postings_on_opening(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.db"
    monkeypatch.setattr(impacts, "SMALL_STORE", 10)
    async with create_backend({"path": str(path)}) as backend:
        gone = (await backend.remember_many(_conversation(20)))[5]
        await backend.forget(gone.id)
    written = _rows(path)
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE keyword_impacts")  # as version 5 left it
        db.execute("DELETE FROM meta WHERE key = 'keyword_length'")
        db.execute("PRAGMA user_version = 5")
    large = schema.schema_v6(impacts.LARGE.format(threshold=10))
    monkeypatch.setattr(schema, "MIGRATIONS", (*schema.MIGRATIONS[:-1], (6, large)))
    async with create_backend({"path": str(path)}):
        pass
    # the same postings; their reference length is now the average of all twenty rows
    assert written and [row[0::2] for row in _rows(path)] == [row[0::2] for row in written]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (6,)
        assert db.execute("SELECT value FROM meta WHERE key = 'keyword_length'").fetchone()


@pytest.mark.anyio
async def test_postings_ordered_unlike_the_scores_still_give_the_best_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # by a reference length of 2 the short rows with one "invoice" come first, but against the
    # store's real average the long rows saying it three times score higher: the bound must find them
    _prune_every_query(monkeypatch, deepest=1.0)
    filler = " ".join(f"word{k}" for k in range(12))
    texts = [f"invoice short{i}" for i in range(12)]
    texts += [f"invoice invoice invoice {filler} long{i}" for i in range(12)]
    texts += [f"{filler} {filler} other{i}" for i in range(40)]
    moments = [T0 + timedelta(days=i) for i in range(len(texts))]
    memories = [NewMemory(text, dedup=False, created_at=at) for text, at in zip(texts, moments, strict=True)]
    async with create_backend({"path": str(tmp_path / "m.db")}) as backend:
        await backend.remember_many(memories)
        await _reorder(backend.db, 2.0)
        found = await retrieval.keyword(backend.db, tokenize("invoice"), Filters(), None, 2)
    assert all(record.content.startswith("invoice invoice") for record, _ in found)


@pytest.mark.anyio
async def test_keyword_searches_sharing_the_connection_at_once_each_find_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _prune_every_query(monkeypatch)
    texts = ["invoice", "deploy", "budget roadmap", "outage", "ferry invoices", "roadmap"]
    async with create_backend({"path": str(tmp_path / "m.db")}) as backend:
        await backend.remember_many(_conversation(120))
        alone = [await retrieval.keyword(backend.db, tokenize(text), Filters(), None, 2) for text in texts]
        together = await asyncio.gather(
            *(retrieval.keyword(backend.db, tokenize(text), Filters(), None, 2) for text in texts)
        )
    assert [[(r.id, s) for r, s in found] for found in together] == [
        [(r.id, s) for r, s in found] for found in alone
    ]


def _fts_pool(db: sqlite3.Connection, terms: list[str], pool: int) -> list[tuple[int, float]]:
    sql = f"SELECT rowid, {BM25} AS rank FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rank LIMIT ?"
    return [(int(row), float(rank)) for row, rank in db.execute(sql, (" OR ".join(terms), pool))]


@pytest.mark.anyio
@pytest.mark.parametrize("combined", [impacts.COMBINED_STEMS, 0])
async def test_both_scorers_give_fts5s_own_scores_and_the_rows_matching_several_terms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, combined: int
) -> None:
    # rows saying "alpha" or "beta" three times fill each stem's best postings; rows saying both
    # once, among many other words, are in none of them and still make the pool, as does a row
    # saying all three terms: by combination (the default for two or three distinct stems) or by
    # one scan of every match, the pool and its doubles are FTS5's
    _prune_every_query(monkeypatch, deepest=1.0)
    monkeypatch.setattr(impacts, "COMBINED_STEMS", combined)
    filler = " ".join(f"word{k}" for k in range(6))
    texts = [f"alpha alpha alpha short{i}" for i in range(8)] + [f"beta beta beta short{i}" for i in range(8)]
    texts += [f"alpha beta {filler} both{i}" for i in range(4)] + [f"alpha beta gamma {filler} all"]
    texts += [f"gamma {filler} {filler} long{i}" for i in range(6)]
    texts += [f"{filler} other{i}" for i in range(30)]
    moments = [T0 + timedelta(days=i) for i in range(len(texts))]
    memories = [NewMemory(text, dedup=False, created_at=at) for text, at in zip(texts, moments, strict=True)]
    path = tmp_path / "m.db"
    async with create_backend({"path": str(path)}) as backend:
        await backend.remember_many(memories)
        with sqlite3.connect(path) as db:
            for terms in (["alpha", "beta"], ["beta", "gamma", "alpha"], ["alpha", "beta", "gamma", "both0"]):
                pruned = await impacts.best_matches(backend.db, BM25, terms, 8, len(texts))
                every = _fts_pool(db, terms, 8)
                assert pruned is not None
                assert [rank for _, rank in pruned] == [rank for _, rank in every]  # the same doubles
                # the same rows, but for ties with the last one
                assert {row for row, rank in pruned if rank < every[-1][1]} == {
                    row for row, rank in every if rank < every[-1][1]
                }
                # ... rows that no term's best postings hold, found as matching several terms
                sql = "SELECT row FROM keyword_impacts WHERE term = ? ORDER BY impact DESC LIMIT 8"
                read = {int(row) for term in terms for (row,) in db.execute(sql, (term,))}
                assert {row for row, _ in pruned} - read
