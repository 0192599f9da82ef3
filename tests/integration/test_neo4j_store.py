"""The Neo4j backend against a real Neo4j 5.26: store isolation, concurrent writes, schema idempotence
and repair, query safety, and the same write-time graph as the in-memory and SQLite backends."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from neo4j import AsyncGraphDatabase

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.adapters.neo4j import Neo4jBackend, create_backend
from memory_orchestrator.adapters.neo4j.schema import SCHEMA_NAMES, SCHEMA_STATEMENTS, ensure_schema
from memory_orchestrator.adapters.sqlite import create_backend as create_sqlite
from memory_orchestrator.ports import (
    Edge,
    EdgeType,
    Filters,
    MemoryBackend,
    NewMemory,
    NotFound,
    RecallQuery,
    TimeRange,
    WriteAction,
)
from services.neo4j.fixture import Neo4jService

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

T0 = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
BackendFactory = Callable[..., Neo4jBackend]


@pytest.fixture
async def open_backend(neo4j_service: Neo4jService) -> AsyncIterator[BackendFactory]:
    """Opens Neo4j backends on fresh stores (or a named one) and closes them after the test."""
    opened: list[Neo4jBackend] = []

    async def factory(store: str | None = None, **extra: Any) -> Neo4jBackend:
        options = neo4j_service.backend_options(store or f"t{uuid.uuid4().hex[:12]}")
        backend = create_backend({**options, **extra})
        await backend.open()
        opened.append(backend)
        return backend

    yield factory  # type: ignore[misc]
    for backend in opened:
        await backend.aclose()


async def test_two_stores_in_one_database_never_see_each_other(open_backend: BackendFactory) -> None:
    left, right = await open_backend(), await open_backend()
    text = "Alice chose PostgreSQL for the Billing service"
    in_left = await left.remember(NewMemory(text, created_at=T0, entities=("Alice",)))
    in_right = await right.remember(NewMemory(text, created_at=T0, entities=("Alice",)))
    extra = await left.remember(
        NewMemory("Alice moved Billing to PostgreSQL 16", created_at=T0, entities=("Billing",))
    )

    assert in_left.action is in_right.action is WriteAction.ADDED  # dedup is per store
    assert [hit.record.id for hit in await right.search("PostgreSQL billing")] == [in_right.id]
    assert {hit.record.id for hit in await right.recall(RecallQuery("Alice PostgreSQL"))} == {in_right.id}
    assert [record.id for record in await right.recent()] == [in_right.id]
    assert await right.get([in_left.id, extra.id]) == []
    assert await right.neighbors([in_right.id]) == []
    assert {change.memory_id for change in await right.changes(T0 - timedelta(days=1))} == {in_right.id}
    with pytest.raises(NotFound):
        await right.forget(in_left.id)
    with pytest.raises(NotFound):
        await right.link(Edge(in_right.id, in_left.id, EdgeType.CAUSAL))

    await left.forget(in_left.id)
    assert (await right.health()).memory_count == 1
    assert await right.known_entities() == ["Alice", "PostgreSQL"]  # left's "Billing" is not here
    assert [record.id for record in await right.get([in_right.id])] == [in_right.id]


async def test_concurrent_identical_writes_store_one_memory(open_backend: BackendFactory) -> None:
    backend = await open_backend(max_connection_pool_size=16)
    results: list[Any] = []

    async def write() -> None:
        results.append(await backend.remember(NewMemory("The deploy key rotates every Monday")))

    async with anyio.create_task_group() as group:
        for _ in range(12):
            group.start_soon(write)

    added = [result for result in results if result.action is WriteAction.ADDED]
    skipped = [result for result in results if result.action is WriteAction.SKIPPED]
    assert len(added) == 1
    assert len(skipped) == 11
    assert {result.duplicate_of for result in skipped} == {added[0].id}
    assert (await backend.health()).memory_count == 1


async def test_concurrent_identical_writes_from_two_backends_on_one_store(
    open_backend: BackendFactory,
) -> None:
    first = await open_backend()
    second = await open_backend(first.store)
    results: list[Any] = []

    async def write(backend: Neo4jBackend) -> None:
        results.append(await backend.remember(NewMemory("Staging runs on Kubernetes 1.30")))

    async with anyio.create_task_group() as group:
        for index in range(10):
            group.start_soon(write, first if index % 2 else second)

    assert sum(result.action is WriteAction.ADDED for result in results) == 1
    assert len({result.id for result in results}) == 1


async def test_opening_again_keeps_the_schema_and_the_data(
    open_backend: BackendFactory, neo4j_service: Neo4jService
) -> None:
    backend = await open_backend()
    stored = await backend.remember(NewMemory("Schema creation is idempotent", created_at=T0))
    auth = (neo4j_service.user, neo4j_service.password) if neo4j_service.password else None
    driver = AsyncGraphDatabase.driver(neo4j_service.uri, auth=auth)
    async with driver, driver.session(database=neo4j_service.database) as session:
        before = await _index_names(session)
        await ensure_schema(session)
        await ensure_schema(session)
        after = await _index_names(session)
    again = await open_backend(backend.store)

    assert before == after
    assert set(SCHEMA_NAMES) <= after
    assert [record.id for record in await again.get([stored.id])] == [stored.id]
    health = await again.health(probe=True)
    assert health.status == "ok"
    assert {check.name: check.status for check in health.checks}["schema"] == "ok"
    assert health.memory_count == 1  # the probe left nothing behind


async def _index_names(session: Any) -> set[str]:
    result = await session.run("SHOW INDEXES YIELD name RETURN name")
    return {record["name"] async for record in result}


#: The constraints of the schema, by name.
CONSTRAINTS = [
    name for name, statement in zip(SCHEMA_NAMES, SCHEMA_STATEMENTS, strict=True) if "CONSTRAINT" in statement
]


async def _owners(session: Any) -> dict[str, str | None]:
    """Our constraints' names -> the constraint owning the index of that name (None: no owner)."""
    result = await session.run(
        "SHOW INDEXES YIELD name, owningConstraint WHERE name IN $names RETURN name, owningConstraint",
        names=CONSTRAINTS,
    )
    return {record["name"]: record["owningConstraint"] async for record in result}


def _driver(neo4j_service: Neo4jService) -> Any:
    auth = (neo4j_service.user, neo4j_service.password) if neo4j_service.password else None
    return AsyncGraphDatabase.driver(neo4j_service.uri, auth=auth)


async def test_an_index_holding_a_constraints_name_is_replaced_by_the_constraint(
    open_backend: BackendFactory, neo4j_service: Neo4jService
) -> None:
    # What a CREATE CONSTRAINT cut short leaves: an index of the constraint's name, owned by nothing.
    # IF NOT EXISTS then fails on the name, and the store had no dedup constraint from then on.
    backend = await open_backend()
    memory = NewMemory("The dedup constraint survives a cut-short creation", created_at=T0)
    stored = await backend.remember(memory)
    dedup = "memory_orchestrator_memory_dedup"
    async with _driver(neo4j_service) as driver, driver.session(database=neo4j_service.database) as session:
        await (await session.run(f"DROP CONSTRAINT {dedup}")).consume()
        await (await session.run(f"CREATE INDEX {dedup} FOR (m:Memory) ON (m.dedup_key)")).consume()
        assert (await _owners(session))[dedup] is None
        await ensure_schema(session, wait_seconds=60, orphan_wait_s=0.5)
        owners = await _owners(session)

    assert owners == {name: name for name in CONSTRAINTS}
    again = await backend.remember(memory)
    assert again.action is WriteAction.SKIPPED and again.duplicate_of == stored.id


async def test_a_schema_creation_cancelled_at_any_point_is_completed_by_the_next(
    neo4j_service: Neo4jService,
) -> None:
    # A store is opened inside a call's deadline, which can cancel its schema creation anywhere (on a
    # cold server above all). Cancelled inside a CREATE CONSTRAINT, Neo4j kept the constraint's index
    # without the constraint, and every later open waited for that index until db.awaitIndexes gave
    # up (300 s), for ever. Each round drops our constraints, cancels a creation after a few ms
    # (the first statements make them; about one round in four leaves an index behind here), and
    # opens again.
    async with _driver(neo4j_service) as driver:
        for delay_ms in range(2, 62, 4):
            async with driver.session(database=neo4j_service.database) as session:
                for name in CONSTRAINTS:
                    await (await session.run(f"DROP CONSTRAINT {name} IF EXISTS")).consume()

            async def create() -> None:
                async with driver.session(database=neo4j_service.database) as session:
                    await ensure_schema(session, wait_seconds=20)

            task = asyncio.create_task(create())
            await asyncio.sleep(delay_ms / 1000)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            async with driver.session(database=neo4j_service.database) as session:
                await ensure_schema(session, wait_seconds=20, orphan_wait_s=0.5)
                owners = await _owners(session)
            assert owners == {name: name for name in CONSTRAINTS}, (delay_ms, owners)


@pytest.mark.parametrize(
    "text",
    [
        'title:(foo) AND bar* "unbalanced',
        "foo~2 OR bar^10 \\ / && || ! { } [ ]",
        "MATCH (n) DETACH DELETE n //",
        "   ",
    ],
)
async def test_lucene_and_cypher_syntax_in_queries_is_just_text(
    open_backend: BackendFactory, text: str
) -> None:
    backend = await open_backend()
    stored = await backend.remember(NewMemory("foo bar match title", created_at=T0))

    hits = await backend.search(text)
    recalled = await backend.recall(RecallQuery(text))

    expected = [] if not text.strip() else [stored.id]
    assert [hit.record.id for hit in hits] == expected
    assert stored.id in {hit.record.id for hit in recalled}  # recency still finds it
    assert [record.id for record in await backend.get([stored.id])] == [stored.id]


async def test_filters_and_as_of_are_applied_in_the_database(open_backend: BackendFactory) -> None:
    backend = await open_backend()
    old = await backend.remember(
        NewMemory("Redis cache sizing decision", category="decision", source="chat", created_at=T0)
    )
    new = await backend.remember(
        NewMemory(
            "Redis cache eviction fact", category="fact", source="docs", created_at=T0 + timedelta(days=10)
        )
    )
    narrow = Filters(categories=("decision",))
    window = Filters(time_range=TimeRange(T0 + timedelta(days=1), T0 + timedelta(days=20)))

    assert [hit.record.id for hit in await backend.search("redis", filters=narrow)] == [old.id]
    assert [hit.record.id for hit in await backend.search("redis", filters=window)] == [new.id]
    assert [hit.record.id for hit in await backend.search("redis", filters=Filters(sources=("docs",)))] == [
        new.id
    ]
    as_of = await backend.recall(RecallQuery("redis cache", now=T0 + timedelta(days=1)))
    assert [hit.record.id for hit in as_of] == [old.id]
    assert [record.id for record in await backend.recent(now=T0 + timedelta(hours=1))] == [old.id]


WRITES = [
    ("Alice leads the Atlas project", "chat", 0),
    ("Atlas uses PostgreSQL because Alice wanted strong consistency", "chat", 1),
    ("Bob joined the Atlas project as reviewer", "chat", 3),
    ("The Atlas deploy failed because PostgreSQL ran out of disk", "ops", 5),
    ("Alice leads the Atlas project and the Orion project", "chat", 30),
    ("Orion migrated to PostgreSQL 16 last week", "ops", 50),
]


async def _graph_by_content(backend: MemoryBackend) -> set[tuple[str, str, str, float]]:
    ids: dict[str, str] = {}
    for content, source, hours in WRITES:
        result = await backend.remember(
            NewMemory(content, source=source, created_at=T0 + timedelta(hours=hours))
        )
        ids[result.id] = content
    edges: set[tuple[str, str, str, float]] = set()
    for neighbor in await backend.neighbors(list(ids), limit=1000):
        edge = neighbor.edge
        edges.add((ids[edge.source], ids[edge.target], edge.type.value, round(edge.weight, 4)))
    for memory_id in ids:
        for neighbor in await backend.neighbors([memory_id], limit=1000):
            edge = neighbor.edge
            edges.add((ids[edge.source], ids[edge.target], edge.type.value, round(edge.weight, 4)))
    return edges


async def test_the_same_writes_build_the_same_graph_as_the_other_backends(
    open_backend: BackendFactory, tmp_path: Path
) -> None:
    reference = InMemoryBackend()
    await reference.open()
    expected = await _graph_by_content(reference)
    async with create_sqlite({"path": str(tmp_path / "parity.db"), "store": "parity"}) as sqlite:
        from_sqlite = await _graph_by_content(sqlite)

    actual = await _graph_by_content(await open_backend())

    assert expected  # the example really produces edges
    assert from_sqlite == expected
    assert actual == expected
