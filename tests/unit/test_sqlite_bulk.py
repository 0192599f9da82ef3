"""SQLite's bulk path: a batch stores the same memories and the same edges as one write at a time."""

from __future__ import annotations

import gc
import logging
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any, cast

import aiosqlite
import anyio
import pytest

from memory_orchestrator.adapters.sqlite import backend as backend_module
from memory_orchestrator.adapters.sqlite import planner, writes
from memory_orchestrator.adapters.sqlite.backend import SqliteBackend
from memory_orchestrator.adapters.sqlite.batch_view import BatchView
from memory_orchestrator.adapters.sqlite.lexicon import Ahead
from memory_orchestrator.adapters.sqlite.planner import Helper
from memory_orchestrator.adapters.sqlite.sync_db import SyncConnection
from memory_orchestrator.ports import (
    FixedClock,
    InvalidRequest,
    NewMemory,
    WriteAction,
    WriteResult,
    remember_all,
)
from memory_orchestrator.ports.autolinks import MemorySketch
from memory_orchestrator.ports.text import tokenize

T0 = datetime(2026, 2, 1, 9, tzinfo=UTC)


def batch() -> list[NewMemory]:
    texts = [
        ("Atlas moves its database to Postgres 16", ("Atlas", "Postgres"), "alice"),
        ("The Postgres migration of Atlas was delayed because the vendor missed the deadline", (), "bob"),
        ("Atlas launch is planned for May", ("Atlas",), "alice"),
        ("We no longer plan the Atlas launch for May; it moves to June", ("Atlas",), "carol"),
        ("Atlas moves its database to Postgres 16", ("Atlas", "Postgres"), "alice"),  # an exact repeat
        ("Lunch on Friday at the Italian place", (), "bob"),
        ("Stratus Hosting invoices arrive on the first of the month", ("Stratus Hosting",), "dave"),
    ]
    return [
        NewMemory(text, entities=entities, source=source, created_at=T0 + timedelta(minutes=7 * i))
        for i, (text, entities, source) in enumerate(texts)
    ]


def snapshot(path: Path, ids: list[str]) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """Memories and edges with ids replaced by the batch position (ids are random)."""
    position = {memory_id: index for index, memory_id in enumerate(ids)}
    with sqlite3.connect(path) as db:
        memories = sorted(
            (position[row[0]], *row[1:])
            for row in db.execute(
                "SELECT id, content, content_hash, category, importance, tags, entities, source, "
                "created_at, deleted_at FROM memories"
            )
        )
        edges = sorted(
            (position[row[0]], position[row[1]], *row[2:])
            for row in db.execute("SELECT source_id, target_id, type, weight, metadata FROM edges")
        )
        return memories, edges


def indexes(path: Path, ids: list[str]) -> tuple[list[tuple[object, ...]], ...]:
    """The keyword index (own words and context), the postings, the term and entity counts."""
    position = {memory_id: index for index, memory_id in enumerate(ids)}
    with sqlite3.connect(path) as db:
        rowids = {int(row[0]): position[row[1]] for row in db.execute("SELECT rowid, id FROM memories")}
        fts = sorted(
            (rowids[row[0]], row[1], row[2])
            for row in db.execute("SELECT rowid, tokens, context FROM memories_fts")
        )
        postings = sorted(
            (row[0], rowids[row[1]], row[2]) for row in db.execute("SELECT term, row, size FROM memory_terms")
        )
        terms = sorted(db.execute("SELECT term, docs FROM term_stats WHERE docs > 0"))
        terms += sorted(db.execute("SELECT entity_norm, name, uses FROM entity_stats"))
        return fts, postings, terms


@pytest.mark.anyio
async def test_a_batch_stores_what_one_write_at_a_time_stores(tmp_path: Path) -> None:
    one, many = tmp_path / "one.db", tmp_path / "many.db"
    async with SqliteBackend(one, clock=FixedClock(T0)) as backend:
        singles = [await backend.remember(memory) for memory in batch()]
    async with SqliteBackend(many, clock=FixedClock(T0)) as backend:
        assert backend.capabilities.bulk_writes
        bulk = await remember_all(backend, batch())
    assert [r.action for r in bulk] == [r.action for r in singles]
    assert bulk[4].action is WriteAction.SKIPPED and bulk[4].duplicate_of == bulk[0].id
    assert [dict(r.edges_created) for r in bulk] == [dict(r.edges_created) for r in singles]
    memories_one, edges_one = snapshot(one, [r.id for r in singles])
    memories_many, edges_many = snapshot(many, [r.id for r in bulk])
    assert memories_many == memories_one
    assert edges_many == edges_one and len(edges_one) > 5
    assert indexes(many, [r.id for r in bulk]) == indexes(one, [r.id for r in singles])
    async with SqliteBackend(many) as backend:
        hits = await backend.search("invoice Stratus", limit=3)
        assert hits[0].record.id == bulk[6].id
        assert "Stratus Hosting" in await backend.known_entities()


@pytest.mark.anyio
async def test_an_invalid_memory_stores_nothing_of_its_batch(tmp_path: Path) -> None:
    async with SqliteBackend(tmp_path / "m.db") as backend:
        with pytest.raises(InvalidRequest):
            await backend.remember_many([NewMemory("fine"), NewMemory("   ")])
        assert await backend.count() == 0
        assert await backend.remember_many([]) == []


@pytest.mark.anyio
async def test_keyword_search_finds_visible_matches_beyond_the_bounded_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory_orchestrator.adapters.sqlite import retrieval

    monkeypatch.setattr(retrieval, "KEYWORD_POOL", 3)
    memories = [
        # the shortest texts score best in BM25, and they are all created after the question
        NewMemory(
            "kafka lag" + " noted" * (i % 3) + (" in the evening report" if i < 5 else ""),
            created_at=T0 + timedelta(days=i if i < 5 else 100 + i),
            dedup=False,
        )
        for i in range(20)
    ]
    async with SqliteBackend(tmp_path / "m.db", clock=FixedClock(T0)) as backend:
        written = await backend.remember_many(memories)
        asked = T0 + timedelta(days=10)
        hits = await backend.search("kafka lag", limit=2, now=asked)
        assert len(hits) == 2
        assert {hit.record.id for hit in hits} <= {result.id for result in written[:5]}
        everything = await backend.search("kafka lag", limit=20, now=T0 + timedelta(days=400))
        assert len(everything) == 20


def corpus() -> list[NewMemory]:
    """A few hundred synthetic memories in three batches: exact repeats inside a batch and across
    batches, one kept without dedup, and back-dated memories that slot into earlier chains."""
    from memory_orchestrator.evaluation.datasets import chronological, to_new_memory
    from memory_orchestrator.evaluation.synthetic import synthetic_dataset

    dataset = synthetic_dataset(240, queries=1, seed=3)
    memories = [
        replace(to_new_memory(memory, backdated=True), dedup=True)
        for memory in chronological(dataset.memories)
    ]
    repeats = [memories[10], memories[95], memories[150]]  # same batch, earlier batch, two back
    memories[100:100] = repeats[:1]
    memories[130:130] = repeats[1:2]
    memories[200:200] = repeats[2:]
    memories.insert(170, NewMemory(memories[20].content, source="user", dedup=False))
    early = [replace(memories[i], created_at=T0 - timedelta(days=400 - i)) for i in (3, 90, 160)]
    memories[120:120] = [replace(early[0], content=early[0].content + " (late)"), early[1]]
    return memories


def patient(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches wait for every answer of the helper (its read of each text, its plan of each chunk)
    instead of doing what it has not answered yet themselves: all of it comes from the helper."""
    answer = Helper.answer
    monkeypatch.setattr(Helper, "answer", lambda self, wait=True: answer(self, wait=True))


@pytest.mark.anyio
@pytest.mark.parametrize(
    "helper", ["none", "helper", "patient"], ids=["in process", "helper", "patient helper"]
)
async def test_batches_store_what_one_write_at_a_time_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helper: str
) -> None:
    if helper != "none":  # every batch plans in the helper process, whatever its size and the machine's cores
        monkeypatch.setattr(planner, "HELPER_MIN_BATCH", 1)
        monkeypatch.setattr(planner, "usable_cores", lambda: 2)
    if helper == "patient":
        patient(monkeypatch)
    memories = corpus()
    cuts = [0, 90, 180, len(memories)]
    one, many = tmp_path / "one.db", tmp_path / "many.db"
    async with SqliteBackend(one, clock=FixedClock(T0)) as backend:
        singles = []
        for start, end in pairwise(cuts):
            singles += [await backend.remember(memory) for memory in memories[start:end]]
            await backend.forget(singles[start + 5].id)  # a forgotten memory is no candidate any more
    async with SqliteBackend(many, clock=FixedClock(T0)) as backend:
        bulk = []
        for start, end in pairwise(cuts):
            bulk += await backend.remember_many(memories[start:end])
            await backend.forget(bulk[start + 5].id)
    # each chunk of each batch (64 writes a chunk, and a batch's last) was planned by the helper or,
    # while the helper was behind, by the batch; a patient batch took every plan and lookup from it
    used = backend._helper
    assert used.broken is None and used.answered + used.taken == (0 if helper == "none" else 6)
    if helper == "patient":
        assert used.answered == 6 and used.looked_up > len(memories) // 2
    assert [r.action for r in bulk] == [r.action for r in singles]
    skipped = [i for i, r in enumerate(bulk) if r.action is WriteAction.SKIPPED]
    assert len(skipped) >= 3
    position = {r.id: i for i, r in enumerate(bulk) if r.action is WriteAction.ADDED}
    assert [position[bulk[i].duplicate_of or ""] for i in skipped] == [
        next(i for i, r in enumerate(singles) if r.id == singles[j].duplicate_of) for j in skipped
    ]
    assert [dict(r.edges_created) for r in bulk] == [dict(r.edges_created) for r in singles]
    ids_one = {r.id: i for i, r in enumerate(singles)}
    ids_many = {r.id: i for i, r in enumerate(bulk)}
    assert [[(ids_many[c.id], c.similarity, c.reason) for c in r.candidates] for r in bulk] == [
        [(ids_one[c.id], c.similarity, c.reason) for c in r.candidates] for r in singles
    ]
    memories_one, edges_one = snapshot(one, [r.id for r in singles])
    memories_many, edges_many = snapshot(many, [r.id for r in bulk])
    assert memories_many == memories_one
    assert edges_many == edges_one and len(edges_one) > 10 * len(memories)
    fts, postings, terms = indexes(many, [r.id for r in bulk])
    assert (fts, postings, terms) == indexes(one, [r.id for r in singles])
    assert sum(1 for row in fts if row[2]) >= 10  # memories with a context to compare


async def stored_count(path: Path, memories: list[NewMemory]) -> int:
    """How many of ``memories`` a fresh store keeps (repeats are skipped)."""
    async with SqliteBackend(path, clock=FixedClock(T0)) as backend:
        await backend.remember_many(memories)
        return await backend.count()


@pytest.mark.anyio
async def test_closing_during_a_cancelled_batch_leaves_it_whole(tmp_path: Path) -> None:
    import asyncio

    memories = corpus()
    backend = SqliteBackend(tmp_path / "m.db", clock=FixedClock(T0))
    await backend.open()
    await backend.remember_many(memories[:10])  # the bulk connection now exists
    task = asyncio.create_task(backend.remember_many(memories[10:]))
    await asyncio.sleep(0.05)
    task.cancel()
    await backend.aclose()  # waits for the batch still running on its worker thread, if it started
    async with SqliteBackend(tmp_path / "m.db", clock=FixedClock(T0)) as reopened:
        # the batch is all or nothing
        assert await reopened.count() in (10, await stored_count(tmp_path / "all.db", memories))
        more = await reopened.remember_many([NewMemory("one more memory after the close")])
        assert more[0].action is WriteAction.ADDED


def conversation() -> list[NewMemory]:
    """Two speakers taking turns minutes apart (each turn is the other's context), a third source's
    notes between them, and late turns dated inside earlier batches, between two stored turns."""
    words = ["kayak", "harbour", "violin", "pottery", "marathon", "orchard", "lantern", "glacier"]
    turns = [
        NewMemory(
            f"{words[i % 8]} and {words[(i * 3) % 8]} talk turn {i}",
            source=("ann", "ben", "log")[i % 3 if i % 5 else 2],
            created_at=T0 + timedelta(minutes=20 * i),
        )
        for i in range(90)
    ]
    late = [
        NewMemory(
            f"late {words[i % 8]} reply {i}", source="ben", created_at=T0 + timedelta(minutes=20 * i + 7)
        )
        for i in (4, 5, 33, 61)
    ]
    return turns[:40] + late[:2] + turns[40:70] + late[2:] + turns[70:]


@pytest.mark.anyio
async def test_batches_index_the_context_one_write_at_a_time_leaves(tmp_path: Path) -> None:
    memories = conversation()
    cuts = [0, 25, 41, 80, len(memories)]
    one, many = tmp_path / "one.db", tmp_path / "many.db"
    async with SqliteBackend(one, clock=FixedClock(T0)) as backend:
        singles = []
        for start, end in pairwise(cuts):
            singles += [await backend.remember(memory) for memory in memories[start:end]]
            await backend.forget(singles[start + 3].id)  # its neighbours take the ones beyond it
    async with SqliteBackend(many, clock=FixedClock(T0)) as backend:
        bulk = []
        for start, end in pairwise(cuts):
            bulk += await backend.remember_many(memories[start:end])
            await backend.forget(bulk[start + 3].id)
    fts, postings, terms = indexes(many, [r.id for r in bulk])
    assert (fts, postings, terms) == indexes(one, [r.id for r in singles])
    assert sum(1 for row in fts if row[2]) > len(fts) // 2
    assert snapshot(many, [r.id for r in bulk]) == snapshot(one, [r.id for r in singles])


@pytest.mark.anyio
async def test_an_entity_not_named_in_the_text_weighs_by_its_carriers(tmp_path: Path) -> None:
    """A write looks its entities' counts up with the names in its text; a given entity the text
    does not spell still weighs by how many memories carry it (rarer names weigh more)."""
    memories = [
        NewMemory(
            f"status report number {i}",
            entities=("Zeus Rollout",),
            source="ops",
            created_at=T0 + timedelta(hours=30 * i),
        )
        for i in range(3)
    ]
    for name in ("one", "many"):
        async with SqliteBackend(tmp_path / f"{name}.db", clock=FixedClock(T0)) as backend:
            if name == "one":
                written = [await backend.remember(memory) for memory in memories]
            else:
                written = await backend.remember_many(memories)
        with sqlite3.connect(tmp_path / f"{name}.db") as db:
            weights = dict(
                db.execute(
                    "SELECT source_id || '>' || target_id, weight FROM edges WHERE type = 'entity'"
                ).fetchall()
            )
        ids = [result.id for result in written]
        assert weights[f"{ids[1]}>{ids[0]}"] == 1.0  # one carrier before it
        # two carriers: 1 / (1 + ln 2), what a lookup missing the name (count 1) would not give
        assert weights[f"{ids[2]}>{ids[0]}"] == weights[f"{ids[2]}>{ids[1]}"] == 0.590616


def ties() -> list[NewMemory]:
    """Memories sharing their moment: more of them at one time than the proximity and entity limits
    keep (a tie at the limit), a later batch again at that moment and after it, and a repeat of an
    earlier memory of the same batch."""
    words = ["kayak", "harbour", "violin", "pottery", "marathon", "orchard"]
    memories = [
        NewMemory(
            f"Atlas {words[i % 6]} check {i} with {words[(i * 5) % 6]}",
            entities=("Atlas",) if i % 4 else ("Atlas", "Stratus"),
            source=("ann", "ben")[i % 2],
            created_at=T0 + timedelta(minutes=10 * (i // 14)),
        )
        for i in range(42)
    ]
    memories.insert(9, memories[3])  # a repeat inside the batch
    # a back-dated copy kept without dedup, then a repeat: its oldest copy is the back-dated one
    memories += [replace(memories[35], dedup=False, created_at=T0 - timedelta(days=1)), memories[35]]
    return memories


@pytest.mark.anyio
async def test_batches_of_memories_at_one_moment_store_what_one_write_at_a_time_stores(
    tmp_path: Path,
) -> None:
    memories = ties()
    cuts = [0, 20, 31, len(memories)]
    one, many = tmp_path / "one.db", tmp_path / "many.db"
    async with SqliteBackend(one, clock=FixedClock(T0)) as backend:
        singles = [await backend.remember(memory) for memory in memories]
    async with SqliteBackend(many, clock=FixedClock(T0)) as backend:
        bulk = []
        for start, end in pairwise(cuts):
            bulk += await backend.remember_many(memories[start:end])
    assert [r.action for r in bulk] == [r.action for r in singles]
    assert bulk[9].duplicate_of == bulk[3].id and singles[9].duplicate_of == singles[3].id
    assert bulk[-1].duplicate_of == bulk[-2].id and singles[-1].duplicate_of == singles[-2].id
    assert [dict(r.edges_created) for r in bulk] == [dict(r.edges_created) for r in singles]
    ids_one = {r.id: i for i, r in enumerate(singles)}
    ids_many = {r.id: i for i, r in enumerate(bulk)}
    assert [[(ids_many[c.id], c.similarity) for c in r.candidates] for r in bulk] == [
        [(ids_one[c.id], c.similarity) for c in r.candidates] for r in singles
    ]
    assert snapshot(many, [r.id for r in bulk]) == snapshot(one, [r.id for r in singles])
    assert indexes(many, [r.id for r in bulk]) == indexes(one, [r.id for r in singles])


@pytest.mark.anyio
async def test_a_batch_that_rolled_back_leaves_no_trace_for_later_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed batch's rows are undone and their rowids taken by later writes: the next batches find
    those writes, not the memories of the failed batch."""
    from memory_orchestrator.adapters.sqlite import backend as module

    memories = corpus()
    first, failed, singles_part, last = memories[:80], memories[80:200], memories[80:140], memories[140:]
    one, many = tmp_path / "one.db", tmp_path / "many.db"
    async with SqliteBackend(one, clock=FixedClock(T0)) as backend:
        expected = [await backend.remember(memory) for memory in [*first, *singles_part, *last]]
    async with SqliteBackend(many, clock=FixedClock(T0)) as backend:
        got = await backend.remember_many(first)
        finish = module.finish

        async def failing(*args: object) -> None:
            raise RuntimeError("the disk is gone")

        monkeypatch.setattr(module, "finish", failing)
        with pytest.raises(RuntimeError):
            await backend.remember_many(failed)
        monkeypatch.setattr(module, "finish", finish)
        got += [await backend.remember(memory) for memory in singles_part]
        got += await backend.remember_many(last)
    assert [dict(r.edges_created) for r in got] == [dict(r.edges_created) for r in expected]
    assert snapshot(many, [r.id for r in got]) == snapshot(one, [r.id for r in expected])


@pytest.mark.anyio
async def test_a_stored_memory_sketches_back_with_the_tokens_of_its_text(tmp_path: Path) -> None:
    # a write's candidates are sketched from their FTS rows, a batch's own from their text
    backend = SqliteBackend(tmp_path / "s.db", clock=FixedClock(T0 + timedelta(days=1)))
    async with backend:
        results = await remember_all(backend, batch())
    ids = {result.id for result in results}
    contents = {result.id: result.record.content for result in results if result.record is not None}
    with sqlite3.connect(tmp_path / "s.db") as connection:
        db = cast(aiosqlite.Connection, SyncConnection(connection))
        sketches = await writes.load_sketches(db, ids)
    assert {item.id for item in sketches} == ids
    for item in sketches:
        assert item.tokens == frozenset(tokenize(contents[item.id]))


@pytest.mark.anyio
async def test_the_cycle_collector_pauses_for_a_batch_and_comes_back_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory_orchestrator.adapters.sqlite import backend as module

    seen: list[bool] = []
    finish = module.finish

    async def watched(*args: object) -> object:
        seen.append(gc.isenabled())
        return await finish(*args)  # type: ignore[arg-type]

    async def failing(*args: object) -> None:
        raise RuntimeError("the disk is gone")

    assert gc.isenabled()
    async with SqliteBackend(tmp_path / "m.db", clock=FixedClock(T0)) as backend:
        monkeypatch.setattr(module, "finish", watched)
        await backend.remember_many(batch()[:3])
        assert seen == [False] and gc.isenabled()
        monkeypatch.setattr(module, "finish", failing)
        with pytest.raises(RuntimeError):
            await backend.remember_many(batch()[3:])
        assert gc.isenabled()  # back on after a failed batch too
        monkeypatch.setattr(module, "finish", watched)
        gc.disable()
        try:
            await backend.remember_many(batch()[3:])
            assert not gc.isenabled()  # whoever turned it off turns it back on
        finally:
            gc.enable()
        assert seen == [False, False]
        assert await backend.count() == 6


def test_the_sketch_cache_keeps_the_candidates_of_a_large_store() -> None:
    # A write's lexical candidates reach back over the whole store: a cache that kept only the last
    # 8,192 sketches missed more of them the larger the store grew (writes.SketchCache).
    cache = writes.SketchCache()
    for index in range(20000):
        cache.put(MemorySketch(f"m{index:05d}", "text", "user", T0, frozenset({"text"})))
    found, missing = cache.split({"m00000", "m10000", "m19999", "gone"})
    assert sorted(item.id for item in found) == ["m00000", "m10000", "m19999"]
    assert missing == ["gone"]


# -- the link planning helper (adapters/sqlite/planner.py) --------------------------------------


@pytest.fixture
def helper_planning(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch plans in the helper process, whatever its size and the machine's cores."""
    monkeypatch.setattr(planner, "HELPER_MIN_BATCH", 1)
    monkeypatch.setattr(planner, "usable_cores", lambda: 2)


async def bulk_in_batches(
    path: Path, memories: list[NewMemory], cuts: list[int], *, bulk_helper: bool = True
) -> tuple[list[WriteResult], Helper]:
    """``memories`` stored in the batches between ``cuts`` (the fifth memory of each forgotten)."""
    async with SqliteBackend(path, clock=FixedClock(T0), bulk_helper=bulk_helper) as backend:
        results: list[WriteResult] = []
        for start, end in pairwise(cuts):
            results += await backend.remember_many(memories[start:end])
            await backend.forget(results[start + 5].id)
        return results, backend._helper


def stored(path: Path, results: list[WriteResult]) -> tuple[object, ...]:
    """What a store holds and what its writes answered, ids replaced by positions."""
    ids = [r.id for r in results]
    position = {memory_id: index for index, memory_id in enumerate(ids)}
    answered = [
        (r.action, dict(r.edges_created), [(position[c.id], c.similarity, c.reason) for c in r.candidates])
        for r in results
    ]
    return answered, snapshot(path, ids), indexes(path, ids)


@pytest.mark.anyio
@pytest.mark.usefixtures("helper_planning")
async def test_a_helper_killed_mid_import_costs_no_edge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    memories = corpus()
    cuts = [0, 90, 180, len(memories)]
    reference, _ = await bulk_in_batches(tmp_path / "reference.db", memories, cuts, bulk_helper=False)
    added = 0
    queue_write = planner._HelperPlanner.add

    def add_then_kill(self: planner._HelperPlanner, *args: Any) -> None:
        nonlocal added
        added += 1
        if added == 160:  # in the second batch, its first chunk just sent
            process = self._helper.process
            assert process is not None
            process.kill()
            process.wait()
        queue_write(self, *args)

    monkeypatch.setattr(planner._HelperPlanner, "add", add_then_kill)
    patient(monkeypatch)
    with caplog.at_level(logging.WARNING, logger=planner.__name__):
        results, helper = await bulk_in_batches(tmp_path / "killed.db", memories, cuts)
    assert helper.broken is not None and helper.answered >= 2  # the first batch's two chunks at least
    assert "batches plan their links in process" in caplog.text
    assert stored(tmp_path / "killed.db", results) == stored(tmp_path / "reference.db", reference)


@pytest.mark.anyio
@pytest.mark.usefixtures("helper_planning")
async def test_a_batch_hands_the_helper_its_last_chunk_before_the_work_that_needs_no_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The helper plans the batch's last chunk while the batch writes its FTS rows (batch.finish),
    # instead of the batch sending it only when it asks for the plans and then waiting for them.
    from memory_orchestrator.adapters.sqlite import batch as batch_module

    events: list[str] = []
    results, index = planner._HelperPlanner.results, batch_module.index

    def asked(self: planner._HelperPlanner) -> list[planner.Planned]:
        events.append("plans asked")
        return results(self)

    async def indexed(*args: Any) -> None:
        events.append("indexed")
        await index(*args)

    sent = Helper.send

    def counted(self: Helper, message: Any) -> bool:
        events.append(f"sent {message[0]}")
        return sent(self, message)

    monkeypatch.setattr(planner._HelperPlanner, "results", asked)
    monkeypatch.setattr(batch_module, "index", indexed)
    monkeypatch.setattr(Helper, "send", counted)
    patient(monkeypatch)
    memories = corpus()[:100]  # one full chunk of 64, then a last one of 36
    _, helper = await bulk_in_batches(tmp_path / "store.db", memories, [0, len(memories)])
    assert helper.broken is None and helper.answered == 2
    assert events == ["sent prepare", "sent plan", "sent plan", "indexed", "plans asked"]


#: Helpers that fail: what each program does when started as the helper, and what the batch says.
FAILING_HELPERS = {
    "missing": (None, "could not start"),
    "silent": ("#!/bin/sh\nexec sleep 60\n", "did not answer within 0.5 s"),  # reads and says nothing
    # says HELLO, then neither reads nor answers: the batch's chunks fill the pipe and its writer
    # blocks, which must not keep the batch from giving the helper up
    "deaf": (
        "#!/bin/sh\nexec {python} -c 'import sys, time\n"
        "from memory_orchestrator.adapters.sqlite.planner import HELLO, put\n"
        "put(sys.stdout.buffer, HELLO); time.sleep(60)'\n",
        "did not answer within 0.5 s",
    ),
    # says HELLO, then answers every message with a chunk no batch sent
    "garbled": (
        "#!/bin/sh\nexec {python} -c 'import sys\n"
        "from memory_orchestrator.adapters.sqlite.planner import HELLO, get, put\n"
        "put(sys.stdout.buffer, HELLO)\n"
        "while True:\n"
        '    put(sys.stdout.buffer, ("planned", get(sys.stdin.buffer)[1], 99, []))\'\n',
        "answered out of order",
    ),
    # says HELLO, then frames what is no pickle
    "gibberish": (
        "#!/bin/sh\nexec {python} -c 'import sys\n"
        "from memory_orchestrator.adapters.sqlite.planner import HELLO, put, read_frame\n"
        "put(sys.stdout.buffer, HELLO)\n"
        "out = sys.stdout.buffer\n"
        "while read_frame(sys.stdin.buffer):\n"
        '    out.write(bytes([5, 0, 0, 0, 0, 0, 0, 0]) + b"hello"); out.flush()\'\n',
        "answered nonsense (",  # whatever the unpickler raises
    ),
    # says HELLO, then answers every message with a pickle of something no answer is
    "stranger": (
        "#!/bin/sh\nexec {python} -c 'import sys\n"
        "from memory_orchestrator.adapters.sqlite.planner import HELLO, get, put\n"
        "put(sys.stdout.buffer, HELLO)\n"
        "while get(sys.stdin.buffer):\n"
        '    put(sys.stdout.buffer, ["planned", 1, 0, []])\'\n',
        "answered nonsense (unexpected answer list)",
    ),
    # writes what is no message at all (a length no message has)
    "noise": ("#!/bin/sh\nexec yes\n", "not the planner's protocol"),
}


@pytest.mark.anyio
@pytest.mark.usefixtures("helper_planning")
@pytest.mark.parametrize("kind", sorted(FAILING_HELPERS))
async def test_a_helper_that_cannot_start_never_answers_or_answers_nonsense_costs_no_edge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    memories = corpus()
    cuts = [0, 150, len(memories)]  # a batch sends more than a pipe holds (64 KiB)
    reference, _ = await bulk_in_batches(tmp_path / "reference.db", memories, cuts, bulk_helper=False)
    script, reason = FAILING_HELPERS[kind]
    program = tmp_path / kind
    if script is not None:
        program.write_text(script.format(python=sys.executable))
        program.chmod(0o755)
    monkeypatch.setattr(planner.sys, "executable", str(program))
    monkeypatch.setattr(planner, "ANSWER_WAIT_S", 0.5)
    started: list[subprocess.Popen[bytes]] = []
    popen = subprocess.Popen

    def recorded(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(planner.subprocess, "Popen", recorded)
    try:
        # giving the helper up takes ANSWER_WAIT_S, not the helper's own time (it sleeps a minute)
        with caplog.at_level(logging.WARNING, logger=planner.__name__), anyio.fail_after(30):
            results, helper = await bulk_in_batches(tmp_path / "alone.db", memories, cuts)
    finally:
        for process in started:  # a batch stuck on it (the failure this guards against) goes on
            process.kill()
    assert helper.answered == 0 and helper.broken is not None and reason in helper.broken
    assert caplog.text.count("batches plan their links in process") == 1  # given up once, not per batch
    assert stored(tmp_path / "alone.db", results) == stored(tmp_path / "reference.db", reference)


@pytest.mark.anyio
async def test_small_batches_and_a_disabled_helper_plan_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(planner, "usable_cores", lambda: 2)
    memories = corpus()[:40]
    _, helper = await bulk_in_batches(tmp_path / "small.db", memories, [0, len(memories)])
    assert helper.answered == 0 and helper.broken is None  # below HELPER_MIN_BATCH: never started
    monkeypatch.setattr(planner, "HELPER_MIN_BATCH", 1)
    _, helper = await bulk_in_batches(tmp_path / "off.db", memories, [0, len(memories)], bulk_helper=False)
    assert helper.answered == 0 and helper.broken is None
    monkeypatch.setattr(planner, "usable_cores", lambda: 1)
    _, helper = await bulk_in_batches(tmp_path / "one-core.db", memories, [0, len(memories)])
    assert helper.answered == 0 and helper.broken is None


@pytest.mark.anyio
@pytest.mark.usefixtures("helper_planning")
async def test_a_reopened_backend_starts_a_helper_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    patient(monkeypatch)
    memories = corpus()[:120]
    backend = SqliteBackend(tmp_path / "store.db", clock=FixedClock(T0))
    for start, end in ((0, 60), (60, 120)):
        async with backend:  # closing stops the helper; its end is no answer for the next one
            await backend.remember_many(memories[start:end])
            assert backend._helper.process is not None
        assert backend._helper.process is None
    assert backend._helper.broken is None and backend._helper.answered == 2


@pytest.mark.anyio
@pytest.mark.usefixtures("helper_planning")
@pytest.mark.parametrize("shift_from", [None, 10], ids=["as assumed", "a rowid not as assumed"])
async def test_the_helper_looks_up_the_lexical_candidates_the_batch_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shift_from: int | None
) -> None:
    # The helper looks each memory's lexical candidates up ahead of the batch, in the store as the
    # batch found it plus the batch's earlier memories at the rowids it assumes they get. The batch
    # takes a lookup only while every earlier memory got the rowid assumed.
    memories = corpus()
    cuts = [0, 90, 180, len(memories)]
    reference, _ = await bulk_in_batches(tmp_path / "reference.db", memories, cuts, bulk_helper=False)
    patient(monkeypatch)
    if shift_from is not None:  # from the 11th memory of each batch on, rowids one too high
        rowids = BatchView.rowids

        def shifted(self: BatchView, *args: Any) -> list[int]:
            return [row + 1 if row and i >= shift_from else row for i, row in enumerate(rowids(self, *args))]

        monkeypatch.setattr(BatchView, "rowids", shifted)
    results, helper = await bulk_in_batches(tmp_path / "ahead.db", memories, cuts)
    assert stored(tmp_path / "ahead.db", results) == stored(tmp_path / "reference.db", reference)
    assert helper.broken is None and helper.answered == 6
    if shift_from is None:
        assert helper.looked_up > len(memories) // 2
    else:  # each batch's first memories only: the 11th got another rowid than assumed
        assert 0 < helper.looked_up <= 3 * (shift_from + 1)


@pytest.mark.anyio
@pytest.mark.usefixtures("helper_planning")
@pytest.mark.parametrize("store", ["missing", "another size"])
async def test_a_helper_that_cannot_read_the_batchs_store_leaves_its_lookups_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: str
) -> None:
    memories = corpus()
    cuts = [0, 90, 180, len(memories)]
    reference, _ = await bulk_in_batches(tmp_path / "reference.db", memories, cuts, bulk_helper=False)
    patient(monkeypatch)

    def elsewhere(path: str, size: int, rows: list[int]) -> Ahead:
        if store == "missing":
            return Ahead(str(tmp_path / "missing.db"), size, rows)
        return Ahead(path, size + 1, rows)  # not the store the batch began with

    monkeypatch.setattr(backend_module, "Ahead", elsewhere)
    results, helper = await bulk_in_batches(tmp_path / "alone.db", memories, cuts)
    assert stored(tmp_path / "alone.db", results) == stored(tmp_path / "reference.db", reference)
    # the helper still read every text and planned every chunk: only the lookups were the batch's
    assert helper.broken is None and helper.answered == 6 and helper.read_ahead > len(memories) // 2
    assert helper.looked_up == 0


async def single_then_bulk(
    path: Path, memories: list[NewMemory], cuts: list[int], *, bulk_helper: bool = True
) -> tuple[list[WriteResult], Helper]:
    """The memories before ``cuts[0]`` stored one write at a time (so no helper ever saw them), the
    rest in the batches between ``cuts``."""
    async with SqliteBackend(path, clock=FixedClock(T0), bulk_helper=bulk_helper) as backend:
        results = [await backend.remember(memory) for memory in memories[: cuts[0]]]
        for start, end in pairwise(cuts):
            results += await backend.remember_many(memories[start:end])
        return results, backend._helper


@pytest.mark.anyio
@pytest.mark.usefixtures("helper_planning")
async def test_the_helper_reads_the_stored_candidates_sketches_the_batch_sends_only_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memories = corpus()
    cuts = [90, 180, len(memories)]
    reference, _ = await single_then_bulk(tmp_path / "reference.db", memories, cuts, bulk_helper=False)
    sketched: list[str] = []
    candidates: set[str] = set()
    send = Helper.send

    def noted(self: Helper, message: Any) -> bool:
        if message[0] == "plan":
            sketched.extend(fields[0] for fields in message[3])
            candidates.update(memory_id for ids, _, _ in message[4] for memory_id in ids[1:])
        return send(self, message)

    monkeypatch.setattr(Helper, "send", noted)
    patient(monkeypatch)
    results, helper = await single_then_bulk(tmp_path / "helped.db", memories, cuts)
    assert stored(tmp_path / "helped.db", results) == stored(tmp_path / "reference.db", reference)
    assert helper.broken is None and helper.answered == 4 and helper.taken == 0
    # each memory a batch wrote went down once, with its write; none the batches found stored
    added = [result.id for result in results[cuts[0] :] if result.action is WriteAction.ADDED]
    assert sketched == added
    # the memories stored one at a time were candidates too: the helper read their sketches itself
    assert candidates & {result.id for result in results[: cuts[0]]}


@pytest.mark.anyio
@pytest.mark.usefixtures("helper_planning")
async def test_chunks_whose_stored_candidates_the_helper_cannot_read_are_planned_by_the_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memories = corpus()
    cuts = [90, 180, len(memories)]
    reference, _ = await single_then_bulk(tmp_path / "reference.db", memories, cuts, bulk_helper=False)
    make = Helper.planner

    def elsewhere(self: Helper, contents: list[str], load: Any, ahead: Any = None, store: Any = None) -> Any:
        return make(self, contents, load, ahead, str(tmp_path / "missing.db"))

    monkeypatch.setattr(Helper, "planner", elsewhere)
    results, helper = await single_then_bulk(tmp_path / "alone.db", memories, cuts)
    assert stored(tmp_path / "alone.db", results) == stored(tmp_path / "reference.db", reference)
    # the first batch's first chunk has stored candidates: the batch planned it, and so every chunk
    # from there on (the helper may have answered some of them meanwhile)
    assert helper.broken is None and helper.taken >= 2


@pytest.mark.anyio
async def test_the_helper_reads_what_its_small_sketch_cache_lacks_and_refuses_what_it_cannot_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    async with SqliteBackend(path, clock=FixedClock(T0), bulk_helper=False) as backend:
        ids = [(await backend.remember(memory)).id for memory in corpus()[:6]]
        reference = await writes.load_sketches(backend._db, set(ids))  # type: ignore[arg-type]
    expected = {item.id: item for item in reference}
    new = MemorySketch("mem-new", "a new memory", "user", T0, frozenset({"new", "memory"}))
    chunk = [([new.id, *ids[:4]], T0, {}), ([new.id, *ids[2:]], T0, {})]
    kept = writes.SketchCache(size=2)  # fills and drops its oldest half while the chunk is read
    stores: dict[str, sqlite3.Connection] = {}
    try:
        found = planner._chunk_sketches(stores, str(path), chunk, {new.id: new}, kept)
        assert found == {new.id: new, **expected}
        again = planner._chunk_sketches(stores, str(path), chunk, {new.id: new}, kept)
        assert again == found  # what the cache dropped is read again
        # a candidate the store does not hold, or no store to read: the batch plans the chunk
        unknown = [([new.id, "mem-unknown", *ids[:1]], T0, {})]
        assert planner._chunk_sketches(stores, str(path), unknown, {new.id: new}, kept) is None
        assert planner._chunk_sketches(stores, None, chunk, {new.id: new}, writes.SketchCache()) is None
        missing = str(tmp_path / "missing.db")
        assert planner._chunk_sketches(stores, missing, chunk, {new.id: new}, writes.SketchCache()) is None
        # a chunk whose candidates are all the batch's own needs no store
        assert planner._chunk_sketches({}, None, [([new.id], T0, {})], {new.id: new}, kept) == {new.id: new}
    finally:
        for connection in stores.values():
            connection.close()


#: A helper that plans each write in 20 ms and notes each chunk it plans: (batch, chunk) per line.
SLOW_HELPER = """#!/bin/sh
exec {python} -c 'import time
from memory_orchestrator.adapters.sqlite import planner
plan, put = planner.plan, planner.put
def slow(*args):
    time.sleep(0.02)
    return plan(*args)
def noted(sink, message):
    if message[0] == "planned":
        with open("{log}", "a") as log:
            log.write(f"{{message[1]}} {{message[2]}}\\n")
    put(sink, message)
planner.plan, planner.put = slow, noted
planner.main()'
"""


@pytest.mark.anyio
@pytest.mark.usefixtures("helper_planning")
async def test_a_batch_plans_the_chunks_a_slow_helper_has_not_reached_and_the_helper_skips_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memories = corpus()
    cuts = [0, 150, len(memories)]  # three chunks (64, 64, 22), then two
    reference, _ = await bulk_in_batches(tmp_path / "reference.db", memories, cuts, bulk_helper=False)
    log = tmp_path / "planned.txt"
    program = tmp_path / "slow"
    program.write_text(SLOW_HELPER.format(python=sys.executable, log=log))
    program.chmod(0o755)
    monkeypatch.setattr(planner.sys, "executable", str(program))
    from memory_orchestrator.adapters.sqlite import graph

    stores: list[int] = []
    insert_rows = graph.insert_rows

    async def inserted(db: Any, rows: list[Any], *, in_key_order: bool = False) -> None:
        stores.append(len(rows))
        await insert_rows(db, rows, in_key_order=in_key_order)

    monkeypatch.setattr(graph, "insert_rows", inserted)
    results, helper = await bulk_in_batches(tmp_path / "slow.db", memories, cuts)
    assert stored(tmp_path / "slow.db", results) == stored(tmp_path / "reference.db", reference)
    # a chunk takes the helper 1.3 s: the batches planned all five rather than wait for them, and
    # stored the edges of each as soon as it was planned (the helper could have answered meanwhile)
    assert helper.broken is None and helper.taken == 5 and helper.answered == 0
    assert len(stores) == 5 and sum(stores) == sum(sum(r.edges_created.values()) for r in results)
    planned = log.read_text().split("\n") if log.exists() else []
    # the first batch took its chunks while the helper planned the first: it skipped the other two
    assert not {"1 1", "1 2"} & set(planned)


def never_loaded(ids: Sequence[str]) -> list[Any]:
    raise AssertionError(f"no write was added, yet sketches were loaded: {ids}")


@pytest.mark.usefixtures("helper_planning")
def test_the_helper_reads_the_entities_of_a_batch_ahead_of_its_writes() -> None:
    texts = [memory.content for memory in corpus()[:150]]
    helper = Helper()
    try:
        batch = helper.planner(texts, never_loaded)
        deadline = time.monotonic() + 30
        while helper.read_ahead == 0 and time.monotonic() < deadline:  # until the last chunk is in
            batch.entity_inputs(len(texts) - 1, texts[-1])
            time.sleep(0.01)
        assert helper.read_ahead == 1
        assert [batch.entity_inputs(i, text) for i, text in enumerate(texts)] == [
            planner.entity_inputs(text) for text in texts
        ]
        assert helper.read_ahead == 1 + len(texts) and batch.results() == [] and helper.broken is None
    finally:
        helper.close()


#: Writes 400 messages of 100-150 KB (more than a pipe holds) as the helper writes its answers.
FRAME_WRITER = """import sys
from memory_orchestrator.adapters.sqlite.planner import put
for number in range(400):
    put(sys.stdout.buffer, (number, number.to_bytes(4, "little") * (25_000 + number * 97 % 12_500)))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="stopping a process with SIGSTOP is POSIX")
def test_messages_arrive_whole_from_a_process_stopped_and_continued_while_it_writes() -> None:
    # Ctrl-Z then fg, a debugger or a profiler stop the helper mid-write; Python's buffered writer
    # then garbled one frame in a few hundred (right length, wrong bytes).
    writer = subprocess.Popen([sys.executable, "-c", FRAME_WRITER], stdout=subprocess.PIPE)
    assert writer.stdout is not None
    try:
        for number in range(400):
            if number % 8 == 0 and writer.poll() is None:  # now and then, while it waits on the full pipe
                writer.send_signal(signal.SIGSTOP)
                time.sleep(0.01)
                writer.send_signal(signal.SIGCONT)
            sent = number.to_bytes(4, "little") * (25_000 + number * 97 % 12_500)
            assert planner.get(writer.stdout) == (number, sent)
    finally:
        writer.kill()
        writer.wait()
