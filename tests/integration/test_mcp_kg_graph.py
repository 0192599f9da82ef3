"""The typed knowledge-graph tools against the real server, and id stability across restarts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from memory_orchestrator.adapters.mcp_kg import ServerCommand
from memory_orchestrator.adapters.mcp_kg.graph import Entity, KnowledgeGraph, Relation, memory_id

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ENTITIES = [
    Entity("Ada", "person", ("leads the Atlas migration",)),
    Entity("Atlas", "project", ("moves hosting off Stratus",)),
    Entity("Stratus invoice", "document", ("billed twice in March",)),
]
RELATIONS = [Relation("Ada", "Atlas", "works_on"), Relation("Stratus invoice", "Atlas", "causes")]


def _ids(graph_entities: tuple[Entity, ...]) -> set[str]:
    return {memory_id(e.name, text) for e in graph_entities for text in e.observations}


async def test_graph_written_then_read_searched_and_opened(kg_server: ServerCommand, tmp_path: Path) -> None:
    transport = kg_server.transport(tmp_path / "graph.jsonl")
    graph = KnowledgeGraph(transport)
    async with asyncio.timeout(60):
        try:
            await graph.create_entities(ENTITIES)
            await graph.add_observations({"Ada": ["prefers green tea"]})
            await graph.create_relations(RELATIONS)
            whole = await graph.read_graph()
            found = await graph.search_nodes("stratus")
            opened = await graph.open_nodes(["Ada"])
        finally:
            await transport.aclose()
    ada = next(e for e in whole.entities if e.name == "Ada")
    assert ada.entity_type == "person"
    assert ada.observations == ("leads the Atlas migration", "prefers green tea")
    assert set(whole.relations) == set(RELATIONS)
    assert {e.name for e in found.entities} == {"Atlas", "Stratus invoice"}
    assert [e.name for e in opened.entities] == ["Ada"]
    assert opened.relations == (Relation("Ada", "Atlas", "works_on"),)


async def test_ids_are_the_same_after_the_server_restarts(kg_server: ServerCommand, tmp_path: Path) -> None:
    memory_file = tmp_path / "graph.jsonl"
    async with asyncio.timeout(60):
        first = kg_server.transport(memory_file)
        try:
            await KnowledgeGraph(first).create_entities(ENTITIES)
            before = _ids((await KnowledgeGraph(first).read_graph()).entities)
        finally:
            await first.aclose()
        second = kg_server.transport(memory_file)
        try:
            after = _ids((await KnowledgeGraph(second).read_graph()).entities)
        finally:
            await second.aclose()
    assert before == after and len(after) == 3
