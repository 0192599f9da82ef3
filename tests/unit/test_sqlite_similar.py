"""SQLite's similar memories for the write path: bounded postings, near-duplicates found however old."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_orchestrator.adapters.sqlite import create_backend
from memory_orchestrator.adapters.sqlite.similar import RECENT_POSTINGS
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.domain.requests import WriteRequest
from memory_orchestrator.ports import NewMemory, WriteAction
from memory_orchestrator.ports.similar import SimilarMemories

T0 = datetime(2026, 1, 5, 9, tzinfo=UTC)
TARGET = "Zanzibar launch review moved the budget deadline of the harbour crane project"
#: More memories sharing six of its words than the newest postings a term is scored on.
SIBLINGS = RECENT_POSTINGS + 50


def _memory(text: str, minute: int) -> NewMemory:
    return NewMemory(text, source="user", dedup=False, created_at=T0 + timedelta(minutes=minute))


def _store() -> list[NewMemory]:
    memories = [_memory(TARGET, 0)]
    memories += [
        _memory(f"Launch review moved the budget deadline of the harbour crane project {n}", 1 + n)
        for n in range(SIBLINGS)
    ]
    # unrelated memories make the siblings' shared words rare enough to outscore the target's name
    memories += [_memory(f"Canteen menu for day {n} lists soup", 1 + SIBLINGS + n) for n in range(2500)]
    return memories


@pytest.mark.anyio
async def test_an_old_near_duplicate_is_found_past_the_newest_postings(tmp_path: Path) -> None:
    backend = create_backend({"path": str(tmp_path / "m.db")})
    async with backend:
        assert isinstance(backend, SimilarMemories)
        stored = await backend.remember_many(_store())
        target = stored[0].id
        # the target is older than the newest postings of every word it shares with the siblings
        found = await backend.similar_memories(TARGET + " again", limit=20)
        assert found[0].id == target
        assert len(found) == 20
        result = await Orchestrator(backend).write(WriteRequest(NewMemory(TARGET + " again", source="user")))
        assert (result.action, result.duplicate_of) == (WriteAction.SKIPPED, target)


@pytest.mark.anyio
async def test_similar_memories_rank_shared_words_and_leave_out_forgotten_ones(tmp_path: Path) -> None:
    backend = create_backend({"path": str(tmp_path / "m.db")})
    async with backend:
        close = await backend.remember(_memory("Harbour crane inspection found rust on the boom", 0))
        partial = await backend.remember(_memory("Harbour lunch was fish", 1))
        gone = await backend.remember(_memory("Crane inspection found rust on the boom again", 2))
        await backend.remember(_memory("Canteen menu lists soup", 3))
        await backend.forget(gone.id)
        found = await backend.similar_memories("Crane inspection found rust on the harbour boom", limit=5)
        assert [record.id for record in found] == [close.id, partial.id]
        assert await backend.similar_memories("nothing shared here", limit=5) == []
