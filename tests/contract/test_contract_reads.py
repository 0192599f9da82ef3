"""Contract: automatic edges, neighbours, keyword search, recall, recent and known entities."""

from __future__ import annotations

from itertools import pairwise

import pytest

from conftest import T0, at
from memory_orchestrator.ports import (
    Edge,
    EdgeType,
    Filters,
    InvalidRequest,
    MemoryBackend,
    NewMemory,
    RecallQuery,
    TimeRange,
)

pytestmark = pytest.mark.anyio


async def _remember(backend: MemoryBackend, content: str, **fields: object) -> str:
    return (await backend.remember(NewMemory(content, **fields))).id  # type: ignore[arg-type]


async def _chain(backend: MemoryBackend) -> list[str]:
    """Four memories with no automatic edges between them, linked a-b-c-d by hand."""
    words = ["apple orchard", "bridge engineering", "cello practice", "desert hiking"]
    ids = [
        await _remember(backend, text, source=f"s{i}", created_at=at(days=10 * i))
        for i, text in enumerate(words)
    ]
    for (left, right), weight in zip(pairwise(ids), (0.9, 0.8, 0.7), strict=True):
        await backend.link(Edge(left, right, EdgeType.ENTITY, weight))
    return ids


async def test_temporal_backbone_links_consecutive_memories_of_a_source(backend: MemoryBackend) -> None:
    first = await _remember(backend, "standup notes monday", source="team", created_at=T0)
    second = await _remember(backend, "retro notes tuesday", source="team", created_at=at(days=3))
    found = await backend.neighbors([second], edge_types=[EdgeType.TEMPORAL])
    assert [item.record.id for item in found] == [first]
    assert dict(found[0].edge.metadata)["sub_type"] == "backbone"


async def test_backdated_write_links_to_its_neighbours_in_time(backend: MemoryBackend) -> None:
    a = await _remember(backend, "week one kickoff", source="log", created_at=T0)
    c = await _remember(backend, "week three demo", source="log", created_at=at(days=14))
    d = await _remember(backend, "week five launch", source="log", created_at=at(days=28))
    b = await _remember(backend, "week two planning", source="log", created_at=at(days=7))
    linked = {item.record.id for item in await backend.neighbors([b], edge_types=[EdgeType.TEMPORAL])}
    assert linked == {a, c}
    assert d not in linked


async def test_entity_edge_joins_memories_sharing_a_name(backend: MemoryBackend) -> None:
    a = await _remember(
        backend, "Kafka retention set to 7 days", entities=("Kafka",), source="x", created_at=T0
    )
    b = await _remember(
        backend, "Consumer lag alerts fire often", entities=("kafka",), source="y", created_at=at(days=60)
    )
    found = await backend.neighbors([b], edge_types=[EdgeType.ENTITY])
    assert [item.record.id for item in found] == [a]


async def test_causal_edge_points_from_cause_to_effect(backend: MemoryBackend) -> None:
    cause = await _remember(backend, "The deploy pipeline disk filled up", source="ops", created_at=T0)
    effect = await _remember(
        backend,
        "We paused the deploy pipeline because the disk filled up",
        source="ops",
        created_at=at(hours=2),
    )
    [found] = await backend.neighbors([effect], edge_types=[EdgeType.CAUSAL])
    assert found.record.id == cause
    assert (found.edge.source, found.edge.target) == (cause, effect)
    assert dict(found.edge.metadata)["sub_type"] == "causes"


async def test_neighbors_by_hops_both_directions_and_excluding_start(backend: MemoryBackend) -> None:
    a, b, c, d = await _chain(backend)
    one = await backend.neighbors([b], edge_types=[EdgeType.ENTITY])
    assert [(item.record.id, item.from_id, item.hops) for item in one] == [(a, b, 1), (c, b, 1)]
    assert (one[0].edge.source, one[0].edge.target) == (a, b)
    two = await backend.neighbors([a], edge_types=[EdgeType.ENTITY], hops=2)
    assert [(item.record.id, item.hops) for item in two] == [(b, 1), (c, 2)]
    assert a not in [item.record.id for item in await backend.neighbors([a], hops=3)]
    assert d in [item.record.id for item in await backend.neighbors([a], hops=3)]


async def test_neighbors_edge_type_filter_limit_and_forgotten(backend: MemoryBackend) -> None:
    a, b, c, _ = await _chain(backend)
    assert await backend.neighbors([b], edge_types=[EdgeType.CAUSAL]) == []
    assert [item.record.id for item in await backend.neighbors([b], limit=1)] == [a]
    await backend.forget(c)
    assert [item.record.id for item in await backend.neighbors([b], hops=2)] == [a]
    assert await backend.neighbors([c]) == []


async def test_neighbors_rejects_bad_arguments(backend: MemoryBackend) -> None:
    with pytest.raises(InvalidRequest):
        await backend.neighbors(["x"], hops=0)
    with pytest.raises(InvalidRequest):
        await backend.neighbors(["x"], limit=0)


async def _library(backend: MemoryBackend) -> dict[str, str]:
    rows = {
        "pool": ("Postgres connection pool size is 20 per service", "fact", "ops", ("Postgres",), 0),
        "pool2": (
            "Raise the Postgres connection pool when traffic doubles",
            "decision",
            "alice",
            ("Postgres",),
            20,
        ),
        "redis": ("Redis cache eviction policy is allkeys-lru", "fact", "ops", ("Redis",), 40),
        "lunch": ("Team lunch is on Thursdays", "context", "bob", (), 60),
    }
    ids = {}
    for key, (text, category, source, entities, day) in rows.items():
        ids[key] = await _remember(
            backend, text, category=category, source=source, entities=entities, created_at=at(days=day)
        )
    return ids


async def test_search_finds_only_memories_sharing_a_term_best_first(backend: MemoryBackend) -> None:
    ids = await _library(backend)
    hits = await backend.search("postgres connection pool size")
    assert [hit.record.id for hit in hits] == [ids["pool"], ids["pool2"]]
    assert hits[0].score >= hits[1].score and hits[1].score > 0
    assert all(hit.via == "keyword" for hit in hits)
    assert await backend.search("zebra") == []
    assert await backend.search("the of and") == []
    assert [hit.record.id for hit in await backend.search("pool size", limit=1)] == [ids["pool"]]


async def test_search_survives_fts_syntax_in_user_text(backend: MemoryBackend) -> None:
    ids = await _library(backend)
    hits = await backend.search('redis" OR NEAR(cache* AND -lunch) ^eviction:')
    # Operators are plain words here: only the terms match, nothing is parsed as FTS syntax.
    assert {hit.record.id for hit in hits} == {ids["redis"], ids["lunch"]}


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (Filters(categories=("decision",)), ["pool2"]),
        (Filters(sources=("ops",)), ["pool", "redis"]),
        (Filters(entities=("redis",)), ["redis"]),
        (Filters(time_range=TimeRange(start=at(days=10), end=at(days=50))), ["pool2", "redis"]),
        (Filters(time_range=TimeRange(end=at(days=20))), ["pool"]),
    ],
    ids=["category", "source", "entity", "time-range", "open-start"],
)
async def test_every_filter_applies_to_search_recall_and_recent(
    backend: MemoryBackend, filters: Filters, expected: list[str]
) -> None:
    ids = await _library(backend)
    wanted = {ids[key] for key in expected}
    searched = await backend.search("postgres redis cache pool", filters=filters)
    assert {hit.record.id for hit in searched} == wanted
    recalled = await backend.recall(RecallQuery("postgres redis cache pool lunch", limit=10, filters=filters))
    assert {hit.record.id for hit in recalled} == wanted
    assert {record.id for record in await backend.recent(filters=filters)} == wanted


async def test_recall_puts_the_relevant_memory_first(backend: MemoryBackend) -> None:
    ids = await _library(backend)
    for day in range(5):
        await _remember(
            backend, f"unrelated chatter number {day}", source="noise", created_at=at(days=70 + day)
        )
    hits = await backend.recall(RecallQuery("what is the redis eviction policy?", limit=3, now=at(days=100)))
    assert hits[0].record.id == ids["redis"]
    # At most ``limit``: a backend may pad with recent memories (SQLite) or drop padding (Mnemon).
    assert 1 <= len(hits) <= 3
    assert hits == sorted(hits, key=lambda hit: -hit.score)


async def test_recall_anchors_on_known_entities(backend: MemoryBackend) -> None:
    ids = await _library(backend)
    hits = await backend.recall(RecallQuery("tell me about redis", limit=2, now=at(days=100)))
    assert hits[0].record.id == ids["redis"]


async def test_recall_and_search_as_of_now_hide_later_memories(backend: MemoryBackend) -> None:
    ids = await _library(backend)
    recalled = await backend.recall(RecallQuery("postgres connection pool", limit=10, now=at(days=10)))
    assert {hit.record.id for hit in recalled} == {ids["pool"]}
    searched = await backend.search("postgres connection pool", now=at(days=10))
    assert [hit.record.id for hit in searched] == [ids["pool"]]
    assert [record.id for record in await backend.recent(now=at(days=30))] == [ids["pool2"], ids["pool"]]


async def test_recent_is_newest_first_with_a_limit(backend: MemoryBackend) -> None:
    ids = await _library(backend)
    assert [record.id for record in await backend.recent(limit=2)] == [ids["lunch"], ids["redis"]]
    with pytest.raises(InvalidRequest):
        await backend.recent(limit=0)


async def test_known_entities_most_used_first(backend: MemoryBackend) -> None:
    await _library(backend)
    names = await backend.known_entities()
    assert [name.casefold() for name in names[:2]] == ["postgres", "redis"]
    assert len(await backend.known_entities(limit=1)) == 1


async def test_superseded_memory_is_marked_in_search_results(backend: MemoryBackend) -> None:
    ids = await _library(backend)
    await backend.link(Edge(ids["pool2"], ids["pool"], EdgeType.SUPERSEDES))
    hits = {hit.record.id: hit.record for hit in await backend.search("postgres pool")}
    assert hits[ids["pool"]].superseded_by == (ids["pool2"],)
    assert hits[ids["pool2"]].superseded_by == ()
