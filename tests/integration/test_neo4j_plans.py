"""The hot Neo4j statements keep to their indexes (a planner regression here turned 30 ms into 2 s)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from neo4j import AsyncGraphDatabase

from memory_orchestrator.adapters.neo4j import cypher
from memory_orchestrator.adapters.neo4j.rows import filter_params, lucene_query, micros
from memory_orchestrator.ports import Filters
from services.neo4j.fixture import Neo4jService

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

STORE = "plans"
NOW = datetime(2025, 5, 1, tzinfo=UTC)


def operators(plan: Any) -> Iterator[tuple[str, str]]:
    """(operator, details) of every node of a plan tree."""
    yield plan.get("operatorType", "").split("@")[0], str(plan.get("args", {}).get("Details", ""))
    for child in plan.get("children", []):
        yield from operators(child)


async def explain(service: Neo4jService, query: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    auth = (service.user, service.password) if service.password else None
    driver = AsyncGraphDatabase.driver(service.uri, auth=auth)
    async with driver, driver.session(database=service.database) as session:
        result = await session.run("EXPLAIN " + query, params)
        summary = await result.consume()
    assert summary.plan is not None
    return list(operators(summary.plan))


async def test_neighbours_walk_out_from_the_frontier(neo4j_service: Neo4jService) -> None:
    params = {
        **filter_params(STORE, Filters(), None, as_of=False),
        "frontier": [f"{STORE}:mem-1"],
        "types": ["CAUSAL", "ENTITY"],
        "visited": ["mem-1"],
        "limit": 10,
    }
    plan = await explain(neo4j_service, cypher.NEIGHBORS_HOP, params)

    assert "NodeUniqueIndexSeek" in {name for name, _ in plan}
    assert not [details for name, details in plan if name == "NodeIndexSeek" and "created_at" in details]


async def test_recall_reads_anchors_through_the_mentions_index(neo4j_service: Neo4jService) -> None:
    params = {
        **filter_params(STORE, Filters(), NOW),
        "lucene": lucene_query("atlas outage", store=STORE),
        "fulltext_limit": 1000,
        "depth": 50,
        "recency_depth": 10,
        "tie_slack": 16,
        "anchor_uids": [f"{STORE}:atlas"],
    }
    plan = await explain(neo4j_service, cypher.RECALL, params)
    names = [name for name, _ in plan]

    assert "DirectedRelationshipIndexSeek" in names
    assert any("limit: $fulltext_limit" in details for _, details in plan)


async def test_link_candidates_are_index_seeks_without_sorting_the_store(neo4j_service: Neo4jService) -> None:
    at = micros(NOW)
    params = {
        "store": STORE,
        "dedup": True,
        "hash": "0" * 64,
        "source": "chat",
        "id": "mem-new",
        "at": at,
        "window_start": at - 86_400_000_000,
        "window_end": at + 86_400_000_000,
        "causal_window": 11,
        "proximity_max": 11,
        "entity_uids": [f"{STORE}:atlas"],
        "entity_per_name": 6,
        "lucene": lucene_query("atlas outage", store=STORE),
        "similar_max": 20,
    }
    plan = await explain(neo4j_service, cypher.LINK_CANDIDATES, params)
    names = [name for name, _ in plan]

    assert names.count("DirectedRelationshipIndexSeek") == 2
    assert "NodeByLabelScan" not in names and "AllNodesScan" not in names
    # Only the two tiny per-write sorts remain (duplicate lookup, Lucene top-k tie-break).
    assert names.count("Top") <= 2
