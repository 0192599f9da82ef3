"""The in-memory reference and SQLite build the same graph and answer recall alike from the same writes."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_orchestrator.adapters.memory import create_backend as create_memory
from memory_orchestrator.adapters.sqlite import create_backend as create_sqlite
from memory_orchestrator.ports import MemoryBackend, NewMemory, RecallQuery

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
TOPICS = ["kafka", "postgres", "billing", "deploy", "cache", "search", "auth", "metrics"]
VERBS = ["tuned", "broke", "migrated", "reviewed", "paused", "scaled"]


def _memories(count: int) -> list[NewMemory]:
    rng = random.Random(11)
    hours = rng.sample(range(24 * 20), count)  # distinct times: ties in time would fall back to ids
    memories = []
    for index in range(count):
        topic, other = rng.sample(TOPICS, 2)
        reason = f" because the {other} load grew" if index % 4 == 0 else ""
        memories.append(
            NewMemory(
                f"Team {rng.choice(VERBS)} the {topic} service {other} settings{reason} (note {index})",
                source=f"s{index % 3}",
                entities=(topic.capitalize(),),
                created_at=T0 + timedelta(hours=hours[index]),
            )
        )
    return memories


async def _graph(backend: MemoryBackend, memories: list[NewMemory]) -> tuple[set[tuple], dict[str, str]]:
    contents: dict[str, str] = {}
    for memory in memories:
        contents[(await backend.remember(memory)).id] = memory.content
    edges: set[tuple] = set()
    for memory_id in contents:
        for item in await backend.neighbors([memory_id], limit=1000):
            edge = item.edge
            edges.add((contents[edge.source], contents[edge.target], edge.type.value, round(edge.weight, 4)))
    return edges, contents


async def test_same_writes_give_the_same_edges_and_recall(tmp_path: Path) -> None:
    memories = _memories(80)
    async with create_memory({}) as reference, create_sqlite({"path": str(tmp_path / "p.db")}) as sqlite:
        expected, reference_ids = await _graph(reference, memories)
        actual, sqlite_ids = await _graph(sqlite, memories)
        assert len(expected) > 200
        assert actual == expected
        now = T0 + timedelta(days=30)
        for text in ("why was the kafka service paused", "billing settings", "Postgres"):
            query = RecallQuery(text, limit=8, now=now)
            in_memory = [reference_ids[hit.record.id] for hit in await reference.recall(query)]
            in_sqlite = [sqlite_ids[hit.record.id] for hit in await sqlite.recall(query)]
            assert in_sqlite == in_memory
            searched = [reference_ids[hit.record.id] for hit in await reference.search(text, now=now)]
            assert [sqlite_ids[hit.record.id] for hit in await sqlite.search(text, now=now)] == searched


async def test_context_at_index_time_ranks_alike(tmp_path: Path) -> None:
    """Memories minutes apart are matched on another speaker's previous words too, identically in both."""
    rng = random.Random(5)
    minutes = rng.sample(range(60 * 8), 60)  # within the context window of each other, often
    memories = [
        NewMemory(
            f"{rng.choice(VERBS)} {rng.choice(TOPICS)} then {rng.choice(TOPICS)} (turn {index})",
            source=rng.choice(["ana", "ben"]),
            created_at=T0 + timedelta(minutes=minutes[index]),
        )
        for index in range(60)
    ]
    async with create_memory({}) as reference, create_sqlite({"path": str(tmp_path / "c.db")}) as sqlite:
        _, reference_ids = await _graph(reference, memories)
        _, sqlite_ids = await _graph(sqlite, memories)
        forgotten = sorted(reference_ids)[:5]
        for memory_id in forgotten:  # forgetting re-derives the successors' context in both
            await reference.forget(memory_id)
        for memory_id, content in sqlite_ids.items():
            if content in {reference_ids[i] for i in forgotten}:
                await sqlite.forget(memory_id)
        now = T0 + timedelta(days=1)
        for text in ("kafka", "scaled billing", "paused auth metrics", "cache"):
            expected = [
                (reference_ids[hit.record.id], round(hit.score, 4))
                for hit in await reference.search(text, limit=20, now=now)
            ]
            found = [
                (sqlite_ids[hit.record.id], round(hit.score, 4))
                for hit in await sqlite.search(text, limit=20, now=now)
            ]
            assert found == expected
            # some results are found through their context only
            assert any(text.split()[0] not in content for content, _ in found)
