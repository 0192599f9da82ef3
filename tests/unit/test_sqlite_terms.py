"""SQLite keyword search: which query terms reach FTS5 in a large store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_orchestrator.adapters.sqlite import create_backend
from memory_orchestrator.adapters.sqlite.terms import MIN_COMMON_DOCS, selective_terms
from memory_orchestrator.ports import NewMemory

T0 = datetime(2026, 1, 5, 8, 30, tzinfo=UTC)
#: Just past the common limit of a store this size (MIN_COMMON_DOCS: 10% would be less).
COMMON = MIN_COMMON_DOCS + 50


def _memory(text: str, minute: int) -> NewMemory:
    return NewMemory(text, source="user", created_at=T0 + timedelta(minutes=minute))


@pytest.mark.anyio
async def test_a_term_common_only_as_a_stem_is_left_out_when_rarer_terms_exist(tmp_path: Path) -> None:
    backend = create_backend({"path": str(tmp_path / "m.db")})
    async with backend:
        # "decide" is spelled by no memory, yet the stemming index matches it in every "decided" one
        await backend.remember_many([_memory(f"We decided on plan {n}", n) for n in range(COMMON)])
        zebra = await backend.remember(_memory("The zebra crossing was repainted", COMMON))
        assert await selective_terms(backend.db, ["decide", "zebra"], unseen=True) == ["zebra"]
        hits = await backend.search("decide zebra", limit=10)
        assert [hit.record.id for hit in hits] == [zebra.id]
        # with nothing rarer to match, the common term is still searched
        assert len(await backend.search("decide", limit=10)) == 10


@pytest.mark.anyio
async def test_a_stem_below_the_common_limit_is_kept(tmp_path: Path) -> None:
    backend = create_backend({"path": str(tmp_path / "m.db")})
    async with backend:
        memories = [_memory(f"Filler note number {n}", n) for n in range(COMMON)]
        memories += [_memory(f"We decided on plan {n}", COMMON + n) for n in range(5)]
        await backend.remember_many([*memories, _memory("The zebra crossing was repainted", 2 * COMMON)])
        assert sorted(await selective_terms(backend.db, ["decide", "zebra"], unseen=True)) == [
            "decide",
            "zebra",
        ]
        assert len(await backend.search("decide zebra", limit=10)) == 6
