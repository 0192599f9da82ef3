"""Bulk writes: ``remember_many`` stores exactly what ``remember`` one memory at a time stores (the same
actions, duplicates, link candidates and automatic edges: later memories of a batch see earlier ones),
on every backend that has a bulk path of its own."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from conftest import BackendMaker, at
from memory_orchestrator.ports import BulkWriter, MemoryBackend, NewMemory, WriteAction, WriteResult

pytestmark = pytest.mark.anyio

TOPICS = ("Atlas launch", "the Kafka cluster", "Vendor Stratus invoices", "the on-call rotation")
PEOPLE = ("Maya", "Jon", "Priya")


def conversation() -> list[NewMemory]:
    """Sixty memories of a team over a few days: shared names and topics (entity, similarity and
    temporal edges), two sources' chains (causal candidates), repeats inside and across batches and a
    back-dated memory that lands before earlier ones. (No identical text kept twice: its two copies
    tie everywhere, and ties break by id, which most backends draw at random.)"""
    memories = [
        NewMemory(
            f"{PEOPLE[i % 3]} noted that {TOPICS[i % 4]} needs review {('today', 'again', 'soon')[i % 3]}"
            f" because of item {i // 4}",
            entities=(PEOPLE[i % 3],),
            source=("team", "finance")[i % 2],
            created_at=at(days=i // 12, hours=i % 12),
        )
        for i in range(56)
    ]
    memories.insert(20, memories[5])  # a repeat inside the first batch
    memories.insert(45, memories[12])  # a repeat of the first batch in the second
    memories.insert(52, replace(memories[3], content=memories[3].content + " (late)", created_at=at(days=-3)))
    return memories


async def write(backend: MemoryBackend, memories: list[NewMemory], *, bulk: bool) -> list[WriteResult]:
    """The memories in two batches (or one at a time)."""
    results: list[WriteResult] = []
    for batch in (memories[:30], memories[30:]):
        if bulk:
            assert isinstance(backend, BulkWriter)
            results += await backend.remember_many(batch)
        else:
            results += [await backend.remember(memory) for memory in batch]
    return results


async def graph(backend: MemoryBackend, results: list[WriteResult]) -> set[tuple[int, int, str, float]]:
    """Every edge around the written memories, by write position (ids differ between stores)."""
    position = {result.id: i for i, result in enumerate(results) if result.action is WriteAction.ADDED}
    edges = set()
    for memory_id in position:
        for neighbor in await backend.neighbors([memory_id], hops=1, limit=500):
            edge = neighbor.edge
            edges.add((position[edge.source], position[edge.target], edge.type.value, round(edge.weight, 6)))
    return edges


async def test_a_batch_stores_what_one_write_at_a_time_stores(make_backend: BackendMaker) -> None:
    memories = conversation()
    async with make_backend() as probe:
        if not probe.capabilities.bulk_writes:
            pytest.skip(f"{probe.name} has no bulk path (remember_all writes one at a time)")
    run = uuid.uuid4().hex[:12]  # a server's database outlives the test: fresh stores each run
    async with make_backend(f"one{run}") as backend:
        singles = await write(backend, memories, bulk=False)
        edges_one = await graph(backend, singles)
    async with make_backend(f"many{run}") as backend:
        batched = await write(backend, memories, bulk=True)
        edges_many = await graph(backend, batched)
    assert [r.action for r in batched] == [r.action for r in singles]
    assert sum(r.action is WriteAction.SKIPPED for r in singles) == 2

    def duplicates(results: list[WriteResult]) -> list[int | None]:
        ids = [r.id for r in results]
        return [ids.index(r.duplicate_of) if r.duplicate_of else None for r in results]

    assert duplicates(batched) == duplicates(singles)
    assert [dict(r.edges_created) for r in batched] == [dict(r.edges_created) for r in singles]
    assert edges_many == edges_one and len(edges_one) > len(memories)
