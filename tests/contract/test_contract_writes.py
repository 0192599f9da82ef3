"""Contract: writing, deduplicating, validating, linking and forgetting memories."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from conftest import T0, BackendMaker, at
from memory_orchestrator.ports import (
    BulkLinker,
    ChangeKind,
    Edge,
    EdgeType,
    InvalidRequest,
    MemoryBackend,
    NewMemory,
    NotFound,
    WriteAction,
)

pytestmark = pytest.mark.anyio


async def test_remember_then_get_returns_every_field(backend: MemoryBackend) -> None:
    memory = NewMemory(
        "Billing service moved to PostgreSQL 16",
        category="decision",
        importance=4,
        tags=("db", "billing"),
        entities=("PostgreSQL",),
        source="alice",
        created_at=at(days=1, hours=3),
        metadata={"ticket": "OPS-12"},
    )
    written = await backend.remember(memory)
    assert written.action is WriteAction.ADDED
    [record] = await backend.get([written.id])
    assert record.id == written.id
    assert record.content == memory.content
    assert (record.category, record.importance, record.source) == ("decision", 4, "alice")
    assert record.tags == ("db", "billing")
    assert record.entities[0] == "PostgreSQL"
    assert dict(record.metadata) == {"ticket": "OPS-12"}
    assert record.created_at == at(days=1, hours=3)
    assert record.created_at.tzinfo is not None
    assert record.superseded_by == ()


async def test_created_at_defaults_to_now_in_utc(backend: MemoryBackend) -> None:
    before = datetime.now(UTC) - timedelta(seconds=5)
    written = await backend.remember(NewMemory("a note without a date"))
    [record] = await backend.get([written.id])
    assert before <= record.created_at <= datetime.now(UTC) + timedelta(seconds=5)
    assert record.created_at.utcoffset() == timedelta(0)


async def test_exact_duplicate_is_skipped_with_the_existing_id(backend: MemoryBackend) -> None:
    first = await backend.remember(NewMemory("We deploy on Fridays", created_at=T0))
    again = await backend.remember(NewMemory("  we DEPLOY   on fridays ", created_at=at(days=1)))
    assert again.action is WriteAction.SKIPPED
    assert again.id == first.id
    assert again.duplicate_of == first.id
    assert [record.id for record in await backend.recent(limit=10)] == [first.id]


async def test_dedup_off_stores_a_second_copy(backend: MemoryBackend) -> None:
    first = await backend.remember(NewMemory("We deploy on Fridays", created_at=T0))
    second = await backend.remember(NewMemory("We deploy on Fridays", created_at=at(hours=1), dedup=False))
    assert second.action is WriteAction.ADDED
    assert second.id != first.id
    assert len(await backend.recent(limit=10)) == 2


async def test_forgotten_content_can_be_stored_again(backend: MemoryBackend) -> None:
    first = await backend.remember(NewMemory("Temporary note about lunch", created_at=T0))
    await backend.forget(first.id)
    again = await backend.remember(NewMemory("Temporary note about lunch", created_at=at(hours=1)))
    assert again.action is WriteAction.ADDED
    assert again.id != first.id


async def test_near_duplicate_is_reported_as_a_candidate(backend: MemoryBackend) -> None:
    first = await backend.remember(
        NewMemory("The staging cluster runs Kubernetes 1.29 on three nodes", created_at=T0)
    )
    second = await backend.remember(
        NewMemory("The staging cluster runs Kubernetes 1.29 on three nodes today", created_at=at(hours=2))
    )
    assert second.action is WriteAction.ADDED
    assert first.id in [candidate.id for candidate in second.candidates]
    candidate = next(item for item in second.candidates if item.id == first.id)
    assert candidate.similarity >= 0.8


@pytest.mark.parametrize(
    "memory",
    [
        NewMemory(""),
        NewMemory("x" * 8001),
        NewMemory("ok", category="nonsense"),
        NewMemory("ok", importance=9),
        NewMemory("ok", tags=("",)),
        NewMemory("ok", source=""),
    ],
    ids=["empty", "too-long", "category", "importance", "empty-tag", "empty-source"],
)
async def test_invalid_memory_is_rejected_and_nothing_changes(
    backend: MemoryBackend, memory: NewMemory
) -> None:
    with pytest.raises(InvalidRequest):
        await backend.remember(memory)
    assert await backend.recent(limit=10) == []
    assert await backend.changes(T0 - timedelta(days=3650)) == []


async def test_link_stores_and_returns_the_edge(backend: MemoryBackend) -> None:
    a = await backend.remember(NewMemory("alpha memory", source="s1", created_at=T0))
    b = await backend.remember(NewMemory("unrelated beta", source="s2", created_at=at(days=30)))
    edge = await backend.link(Edge(a.id, b.id, EdgeType.CAUSAL, 0.8, {"why": "test"}))
    assert (edge.source, edge.target, edge.type, edge.weight) == (a.id, b.id, EdgeType.CAUSAL, 0.8)
    assert edge.created_at is not None
    [neighbor] = await backend.neighbors([a.id], edge_types=[EdgeType.CAUSAL])
    assert neighbor.record.id == b.id
    assert neighbor.edge.weight == 0.8
    assert dict(neighbor.edge.metadata)["why"] == "test"


async def test_link_replaces_an_existing_edge_of_the_same_type(backend: MemoryBackend) -> None:
    a = await backend.remember(NewMemory("alpha memory", source="s1", created_at=T0))
    b = await backend.remember(NewMemory("unrelated beta", source="s2", created_at=at(days=30)))
    await backend.link(Edge(a.id, b.id, EdgeType.SEMANTIC, 0.3))
    await backend.link(Edge(b.id, a.id, EdgeType.SEMANTIC, 0.9))
    found = await backend.neighbors([a.id], edge_types=[EdgeType.SEMANTIC])
    assert [(item.record.id, item.edge.weight) for item in found] == [(b.id, 0.9)]


async def test_link_errors(backend: MemoryBackend) -> None:
    a = await backend.remember(NewMemory("alpha memory", created_at=T0))
    with pytest.raises(NotFound):
        await backend.link(Edge(a.id, "mem-does-not-exist", EdgeType.ENTITY))
    with pytest.raises(InvalidRequest):
        await backend.link(Edge(a.id, a.id, EdgeType.ENTITY))
    b = await backend.remember(NewMemory("unrelated beta", source="s2", created_at=at(days=30)))
    with pytest.raises(InvalidRequest):
        await backend.link(Edge(a.id, b.id, EdgeType.ENTITY, weight=1.5))
    await backend.forget(b.id)
    with pytest.raises(NotFound):
        await backend.link(Edge(a.id, b.id, EdgeType.ENTITY))


async def test_link_many_links_like_link_and_all_or_none(backend: MemoryBackend) -> None:
    if not isinstance(backend, BulkLinker):
        pytest.skip(f"{backend.name} has no bulk link path (link_all links one at a time)")
    a, b, c = [
        await backend.remember(NewMemory(text, source=f"s{i}", created_at=at(days=30 * i)))
        for i, text in enumerate(["alpha memory", "unrelated beta", "third gamma"])
    ]
    missing = Edge(a.id, "mem-does-not-exist", EdgeType.CAUSAL)
    with pytest.raises(NotFound):
        await backend.link_many([Edge(a.id, b.id, EdgeType.CAUSAL, 0.8), missing])
    with pytest.raises(InvalidRequest):
        await backend.link_many(
            [Edge(a.id, b.id, EdgeType.CAUSAL, 0.8), Edge(b.id, c.id, EdgeType.ENTITY, 1.5)]
        )
    assert await backend.neighbors([a.id, b.id], edge_types=[EdgeType.CAUSAL]) == []  # none of either
    edges = [
        Edge(a.id, b.id, EdgeType.CAUSAL, 0.8, {"why": "test"}),
        Edge(b.id, c.id, EdgeType.SEMANTIC, 0.3),
        Edge(c.id, b.id, EdgeType.SEMANTIC, 0.9),  # replaces the one before, as link would
        Edge(c.id, a.id, EdgeType.SUPERSEDES),
    ]
    stored = await backend.link_many(edges)
    assert [(e.source, e.target, e.type, e.weight) for e in stored] == [
        (e.source, e.target, e.type, e.weight) for e in edges
    ]
    assert all(edge.created_at is not None for edge in stored)
    [causal] = await backend.neighbors([a.id], edge_types=[EdgeType.CAUSAL])
    assert (causal.record.id, dict(causal.edge.metadata)["why"]) == (b.id, "test")
    semantic = await backend.neighbors([b.id], edge_types=[EdgeType.SEMANTIC])
    assert [(item.record.id, item.edge.weight) for item in semantic] == [(c.id, 0.9)]
    [old] = await backend.get([a.id])
    assert old.superseded_by == (c.id,)
    assert await backend.link_many([]) == []


async def test_supersedes_is_one_way_and_shows_in_superseded_by(backend: MemoryBackend) -> None:
    old = await backend.remember(NewMemory("We use MySQL for billing", created_at=T0))
    new = await backend.remember(NewMemory("We switched billing to PostgreSQL", created_at=at(days=40)))
    since = datetime.now(UTC) - timedelta(minutes=5)
    await backend.link(Edge(new.id, old.id, EdgeType.SUPERSEDES))
    old_record, new_record = await backend.get([old.id, new.id])
    assert old_record.superseded_by == (new.id,)
    assert new_record.superseded_by == ()
    kinds = [(change.kind, change.memory_id) for change in await backend.changes(since)]
    assert (ChangeKind.SUPERSEDED, old.id) in kinds


async def test_forget_hides_the_memory_and_twice_is_not_found(backend: MemoryBackend) -> None:
    keep = await backend.remember(NewMemory("kafka retention is seven days", created_at=T0))
    gone = await backend.remember(NewMemory("kafka partitions are twelve", created_at=at(hours=1)))
    await backend.forget(gone.id)
    assert await backend.get([gone.id, keep.id]) == [(await backend.get([keep.id]))[0]]
    assert gone.id not in [hit.record.id for hit in await backend.search("kafka")]
    assert gone.id not in [record.id for record in await backend.recent()]
    with pytest.raises(NotFound):
        await backend.forget(gone.id)
    with pytest.raises(NotFound):
        await backend.forget("mem-never-existed")


async def test_changes_lists_adds_and_forgets_oldest_first(backend: MemoryBackend) -> None:
    since = datetime.now(UTC) - timedelta(minutes=5)
    a = await backend.remember(NewMemory("first change", created_at=T0))
    b = await backend.remember(NewMemory("second change", created_at=at(days=1)))
    await backend.forget(a.id)
    changes = await backend.changes(since)
    assert [(change.kind, change.memory_id) for change in changes] == [
        (ChangeKind.ADDED, a.id),
        (ChangeKind.ADDED, b.id),
        (ChangeKind.FORGOTTEN, a.id),
    ]
    assert await backend.changes(since, limit=1) == changes[:1]
    assert await backend.changes(datetime.now(UTC) + timedelta(days=1)) == []


async def test_get_keeps_the_order_asked_and_skips_unknown(backend: MemoryBackend) -> None:
    ids = [
        (await backend.remember(NewMemory(f"note number {word}", created_at=at(days=i)))).id
        for i, word in enumerate(["one", "two", "three"])
    ]
    found = await backend.get([ids[2], "mem-unknown", ids[0], ids[1]])
    assert [record.id for record in found] == [ids[2], ids[0], ids[1]]
    assert await backend.get([]) == []


async def test_health_reports_ok_and_probe_leaves_no_trace(backend: MemoryBackend) -> None:
    await backend.remember(NewMemory("health note", created_at=T0))
    health = await backend.health()
    assert health.ok and health.status == "ok"
    assert health.backend == backend.name
    probed = await backend.health(probe=True)
    assert probed.status == "ok"
    assert all(check.status == "ok" for check in probed.checks)
    assert [record.content for record in await backend.recent()] == ["health note"]
    assert probed.memory_count in (None, 1)


async def test_aclose_is_idempotent_and_reopen_keeps_the_data(make_backend: BackendMaker) -> None:
    first = make_backend()
    await first.open()
    await first.open()
    a = await first.remember(NewMemory("durable memory about Redis", source="s1", created_at=T0))
    b = await first.remember(NewMemory("another durable memory", source="s1", created_at=at(hours=1)))
    await first.aclose()
    await first.aclose()
    second = make_backend()
    async with second:
        assert [record.id for record in await second.get([a.id, b.id])] == [a.id, b.id]
        assert b.id in [item.record.id for item in await second.neighbors([a.id])]
        again = await second.remember(NewMemory("durable memory about Redis"))
        assert again.action is WriteAction.SKIPPED and again.id == a.id
