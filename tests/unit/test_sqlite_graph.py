"""SQLite graph hops: forgotten memories are left out whether a hop lists them or joins each reached
memory to check it; the read connection recovers from a failed read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory_orchestrator.adapters.sqlite import SqliteBackend, graph
from memory_orchestrator.evaluation.datasets import ingest
from memory_orchestrator.evaluation.synthetic import synthetic_dataset
from memory_orchestrator.ports import BackendUnavailable, EdgeType, Filters

pytestmark = pytest.mark.anyio

WEIGHTS = {EdgeType.ENTITY: 1.0, EdgeType.TEMPORAL: 0.6, EdgeType.SEMANTIC: 0.8, EdgeType.CAUSAL: 1.0}


async def _hops(backend: SqliteBackend, frontier: list[str], filters: Filters) -> list[Any]:
    plain = await backend.neighbors(frontier, hops=2, limit=500, filters=filters)
    ranked = await backend.strongest_neighbors(
        frontier, weights=WEIGHTS, per_source=6, min_strength=0.05, limit=200, filters=filters
    )
    return [
        [(n.record.id, n.from_id, n.edge.type.value, n.edge.weight, n.hops) for n in found]
        for found in (plain, ranked)
    ]


async def test_hops_leave_out_forgotten_memories_whether_listed_or_joined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = SqliteBackend(tmp_path / "m.db")
    await backend.open()
    try:
        await ingest(backend, synthetic_dataset(300, queries=3, seed=5))
        records = await backend.all_records()
        forgotten = {record.id for record in records[::7]}
        for memory_id in forgotten:
            await backend.forget(memory_id)
        frontiers = [[record.id for record in records[start : start + 6]] for start in range(0, 280, 40)]
        categories = Filters(categories=("decision", "fact"))
        answers = {}
        for listed in (graph.FORGOTTEN_LISTED, len(forgotten), len(forgotten) - 1, 0):
            monkeypatch.setattr(graph, "FORGOTTEN_LISTED", listed)
            answers[listed] = [
                await _hops(backend, frontier, filters)
                for frontier in frontiers
                for filters in (Filters(), categories)
            ]
        first, *others = answers.values()
        assert all(answer == first for answer in others)  # listed (first two) and joined agree
        reached = {row[0] for answer in first for found in answer for row in found}
        assert reached and not reached & forgotten
        assert {row[1] for answer in first for found in answer for row in found if row[4] == 1} - forgotten
        gone = sorted(forgotten)[:5]
        assert await backend.neighbors(gone, hops=2) == []  # a forgotten memory reaches nothing
    finally:
        await backend.aclose()


async def test_the_read_connection_recovers_from_a_failed_read(tmp_path: Path) -> None:
    backend = SqliteBackend(tmp_path / "m.db")
    await backend.open()
    try:
        await ingest(backend, synthetic_dataset(20, queries=1, seed=5))
        with pytest.raises(BackendUnavailable, match="no such table"):
            await backend._read("a broken read", lambda db: db.execute_fetchall("SELECT * FROM missing"))
        assert await backend.count() == 20  # a fresh connection answers
    finally:
        await backend.aclose()
    with pytest.raises(BackendUnavailable, match="not open"):
        await backend.count()
