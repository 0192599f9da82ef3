"""SQLite (in SQL) and Neo4j (in Cypher) rank, cap and floor a hop in the store: the graph walk reaches
exactly what it reaches when it loads every neighbour and ranks them itself."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memory_orchestrator.domain.candidates import Candidate
from memory_orchestrator.domain.config import DEFAULT_EDGE_WEIGHTS, ExpansionLimits, PipelineConfig
from memory_orchestrator.domain.traversal import expand, relative_edge_weights
from memory_orchestrator.evaluation.datasets import ingest
from memory_orchestrator.evaluation.synthetic import synthetic_dataset
from memory_orchestrator.ports import Capabilities, Filters, Intent, MemoryBackend

NOW = datetime(2100, 1, 1, tzinfo=UTC)


class PlainNeighbors:
    """The same store without the ranked hop: the walk gets every neighbour (no limit) and ranks,
    caps and floors them itself, which is what the ranked hop must reproduce."""

    def __init__(self, backend: MemoryBackend) -> None:
        self._backend = backend

    async def neighbors(self, ids: Any, **options: Any) -> Any:
        return await self._backend.neighbors(ids, **{**options, "limit": 10_000})

    def __getattr__(self, name: str) -> Any:
        if name == "strongest_neighbors":
            raise AttributeError(name)
        return getattr(self._backend, name)

    @property
    def capabilities(self) -> Capabilities:
        return replace(self._backend.capabilities, ranked_neighbors=False)


async def walk(backend: Any, seeds: list[Candidate], intent: Intent, config: PipelineConfig) -> list[Any]:
    pool = {seed.memory_id: seed for seed in seeds}
    weights = relative_edge_weights(DEFAULT_EDGE_WEIGHTS, intent, config.allowed_edge_types)
    outcome = await expand(
        backend,
        seeds,
        pool,
        weights=weights,
        hops=2,
        filters=Filters(),
        now=NOW,
        config=config,
        intent=intent,
    )
    return sorted(
        (c.memory_id, round(c.inherited, 9), c.seed_id, tuple((s.from_id, s.to_id) for s in c.path))
        for c in outcome.added
    )


def walks(*intents: Intent) -> Iterator[tuple[Intent, int, PipelineConfig]]:
    """Each intent with a narrow and a wide hub guard."""
    for intent in intents:
        for fanout in (3, 12):
            yield (
                intent,
                fanout,
                PipelineConfig(expansion=ExpansionLimits(max_fanout=fanout), stage_timeout_s=30.0),
            )


RANKED = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("neo4j", id="neo4j", marks=pytest.mark.integration),
]


@pytest.fixture(params=RANKED)
async def ranked_backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryBackend]:
    """An open, empty store of a backend that ranks hops in the store."""
    backend: MemoryBackend
    if request.param == "sqlite":
        from memory_orchestrator.adapters.sqlite import create_backend as create_sqlite

        backend = create_sqlite({"path": str(tmp_path / "m.db")})
    else:
        from memory_orchestrator.adapters.neo4j import create_backend as create_neo4j

        service = request.getfixturevalue("neo4j_service")
        backend = create_neo4j(service.backend_options(f"t{uuid.uuid4().hex[:12]}"))
    await backend.open()
    try:
        yield backend
    finally:
        await backend.aclose()


@pytest.mark.anyio
async def test_the_ranked_hop_reaches_what_the_plain_hop_reaches(ranked_backend: MemoryBackend) -> None:
    backend = ranked_backend
    dataset = synthetic_dataset(400, queries=5, seed=3)
    await ingest(backend, dataset)
    assert backend.capabilities.ranked_neighbors
    for intent, fanout, config in walks(Intent.GENERAL, Intent.WHY, Intent.ENTITY):
        for query in dataset.queries:
            hits = await backend.search(query.query, limit=8, now=NOW)
            seeds = [Candidate(hit.record, relevance=1.0 / (rank + 1)) for rank, hit in enumerate(hits)]
            ranked = await walk(
                backend, [Candidate(s.record, relevance=s.relevance) for s in seeds], intent, config
            )
            plain = await walk(PlainNeighbors(backend), seeds, intent, config)
            assert ranked == plain, (intent, fanout, query.query)
            assert ranked  # the walk reached something, so the comparison says something


class Counted:
    """The same store counting the neighbours its ranked hops return; ``floors=False`` hides its
    ``neighbor_floors`` (the walk then passes none)."""

    def __init__(self, backend: MemoryBackend, *, floors: bool) -> None:
        self._backend, self._floors, self.returned = backend, floors, 0

    async def strongest_neighbors(self, ids: Any, **options: Any) -> Any:
        assert ("floors" in options) == self._floors
        found = await self._backend.strongest_neighbors(ids, **options)  # type: ignore[attr-defined]
        self.returned += len(found)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    @property
    def capabilities(self) -> Capabilities:
        return replace(self._backend.capabilities, neighbor_floors=self._floors)


def outcome_of(outcome: Any) -> tuple[Any, ...]:
    """Everything a walk decided but the drops it recorded (in order: the trace keeps it)."""
    added = [
        (c.memory_id, c.inherited, c.proximity, c.seed_id, tuple((s.from_id, s.to_id) for s in c.path))
        for c in outcome.added
    ]
    reached = [(d["hop"], d["frontier"], d["reached"]) for d in outcome.decisions]
    return added, reached, outcome.warnings


@pytest.mark.anyio
async def test_floors_leave_out_only_what_the_walk_cannot_use(ranked_backend: MemoryBackend) -> None:
    backend = ranked_backend
    dataset = synthetic_dataset(400, queries=8, seed=5)
    await ingest(backend, dataset)
    assert backend.capabilities.neighbor_floors
    fewer = 0
    for intent, fanout, config in walks(Intent.GENERAL, Intent.ENTITY, Intent.WHEN):
        weights = relative_edge_weights(DEFAULT_EDGE_WEIGHTS, intent, config.allowed_edge_types)
        for query in dataset.queries:
            hits = await backend.search(query.query, limit=8, now=NOW)
            decided = []
            for floors in (True, False):
                seeds = [Candidate(hit.record, relevance=1.0 / (rank + 1)) for rank, hit in enumerate(hits)]
                counted = Counted(backend, floors=floors)
                outcome = await expand(
                    counted,  # type: ignore[arg-type]
                    seeds,
                    {seed.memory_id: seed for seed in seeds},
                    weights=weights,
                    hops=2,
                    filters=Filters(),
                    now=NOW,
                    config=config,
                    intent=intent,
                )
                decided.append((outcome_of(outcome), counted.returned))
            (floored, loaded), (plain, everything) = decided
            assert floored == plain, (intent, fanout, query.query)
            assert floored[0]  # the walk reached something
            assert loaded <= everything
            fewer += loaded < everything
    assert fewer  # the floors left something out
