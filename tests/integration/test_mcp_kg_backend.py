"""The mcp_kg backend on graphs other agents wrote through the real server, and our MCP server on it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from memory_orchestrator.adapters.mcp_kg import ServerCommand, create_backend
from memory_orchestrator.adapters.mcp_kg.graph import Entity, KnowledgeGraph, Relation, memory_id
from memory_orchestrator.evaluation.startup import orchestrator_command, settings_free_environment
from memory_orchestrator.ports import BackendUnavailable, ChangeKind, Edge, EdgeType, NewMemory, RecallQuery
from services.mcp_kg.fixture import server_pids

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ORCHESTRATOR = orchestrator_command()
INVOICE = ("Stratus invoice", "Stratus Hosting billed the egress traffic twice in March")
DECISION = ("Leave Stratus", "Decided to move Atlas hosting off Stratus Hosting to our own cluster")
OUTCOME = ("Atlas cluster", "Atlas now runs on the internal Kubernetes cluster")
ENTITIES = [
    Entity("Ada", "person", ("Ada leads the Atlas migration", "Ada prefers green tea")),
    Entity(INVOICE[0], "document", (INVOICE[1],)),
    Entity(DECISION[0], "decision", (DECISION[1],)),
    Entity(OUTCOME[0], "project", (OUTCOME[1],)),
]
RELATIONS = [
    Relation("Ada", DECISION[0], "proposed"),
    Relation(DECISION[0], INVOICE[0], "caused_by"),
    Relation(DECISION[0], OUTCOME[0], "led_to"),
]


async def _seed(server: ServerCommand, memory_file: Path) -> None:
    """Write the graph as another agent would: through the server's own tools."""
    transport = server.transport(memory_file)
    try:
        graph = KnowledgeGraph(transport)
        await graph.create_entities(ENTITIES)
        await graph.create_relations(RELATIONS)
    finally:
        await transport.aclose()


def _options(server: ServerCommand, memory_file: Path) -> dict[str, Any]:
    return {"server": server.script, "memory_file": str(memory_file), "timeout_s": 30}


async def test_observations_of_another_agent_become_memories_with_stable_ids(
    kg_server: ServerCommand, tmp_path: Path
) -> None:
    memory_file = tmp_path / "graph.jsonl"
    async with asyncio.timeout(90):
        await _seed(kg_server, memory_file)
        async with create_backend(_options(kg_server, memory_file)) as backend:
            decision = memory_id(*DECISION)
            [record] = await backend.get([decision])
            causes = await backend.neighbors([decision], edge_types=[EdgeType.CAUSAL])
            siblings = await backend.neighbors([memory_id("Ada", "Ada prefers green tea")], hops=1)
            first_seen = record.created_at
        async with create_backend(_options(kg_server, memory_file)) as again:
            [reread] = await again.get([decision])
    assert (record.content, record.entities, record.tags) == (DECISION[1], (DECISION[0],), ("decision",))
    edges = {(item.record.id, item.edge.source, item.edge.target) for item in causes}
    # "Leave Stratus caused_by Stratus invoice": the edge runs from the cause to the effect
    assert (memory_id(*INVOICE), memory_id(*INVOICE), decision) in edges
    assert (memory_id(*OUTCOME), decision, memory_id(*OUTCOME)) in edges
    assert dict(causes[0].edge.metadata)["sub_type"] == "relation"
    assert memory_id("Ada", "Ada leads the Atlas migration") in {item.record.id for item in siblings}
    assert reread.created_at == first_seen


async def test_forget_deletes_the_observation_and_outside_deletes_are_forgotten(
    kg_server: ServerCommand, tmp_path: Path
) -> None:
    memory_file = tmp_path / "graph.jsonl"
    async with asyncio.timeout(90):
        await _seed(kg_server, memory_file)
        async with create_backend(_options(kg_server, memory_file)) as backend:
            tea = memory_id("Ada", "Ada prefers green tea")
            await backend.forget(tea)
            assert "green tea" not in memory_file.read_text()
            again = await backend.remember(NewMemory("Ada prefers green tea", entities=("Ada",)))
            assert again.id not in (tea, None) and "green tea" in memory_file.read_text()
            # another agent removes an observation behind our back
            outside = KnowledgeGraph(kg_server.transport(memory_file))
            try:
                await outside.delete_observations({OUTCOME[0]: [OUTCOME[1]]})
            finally:
                await outside.transport.aclose()  # type: ignore[attr-defined]
            assert await backend.get([memory_id(*OUTCOME)]) == []
            changes = await backend.changes(again.record.created_at)  # type: ignore[union-attr]
    assert (ChangeKind.FORGOTTEN, memory_id(*OUTCOME)) in [(c.kind, c.memory_id) for c in changes]


async def test_a_killed_server_is_restarted_by_the_backend(kg_server: ServerCommand, tmp_path: Path) -> None:
    memory_file = tmp_path / "graph.jsonl"
    async with asyncio.timeout(90), create_backend(_options(kg_server, memory_file)) as backend:
        written = await backend.remember(NewMemory("Kafka retention is seven days", entities=("Kafka",)))
        for pid in server_pids(memory_file):
            os.kill(pid, signal.SIGKILL)
        try:
            found = await backend.recall(RecallQuery("kafka retention"))
        except BackendUnavailable:  # the call in flight when the server died may fail; the next restarts
            found = await backend.recall(RecallQuery("kafka retention"))
    assert [hit.record.id for hit in found] == [written.id]
    assert backend.transport.starts == 2


async def test_our_mcp_server_answers_context_and_why_over_a_seeded_graph(
    kg_server: ServerCommand, tmp_path: Path
) -> None:
    memory_file = tmp_path / "graph.jsonl"
    env = settings_free_environment()
    env.update(
        {
            "ORCHESTRATOR_DATA_DIR": str(tmp_path / "orchestrator"),
            "ORCHESTRATOR_BACKEND__NAME": "mcp_kg",
            "ORCHESTRATOR_BACKEND__MCP_KG__SERVER": kg_server.script,
            "ORCHESTRATOR_BACKEND__MCP_KG__MEMORY_FILE": str(memory_file),
        }
    )
    params = StdioServerParameters(command=ORCHESTRATOR, args=["serve"], env=env)
    async with asyncio.timeout(120):
        await _seed(kg_server, memory_file)
        with (tmp_path / "stderr.log").open("w+") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                context = await client.call_tool(
                    "memory_context", {"query": "Who leads the Atlas migration?"}
                )
                why = await client.call_tool("memory_why", {"question": "why did we move Atlas off Stratus?"})
    assert not context.is_error and not why.is_error
    packed, answer = context.structured_content, why.structured_content
    assert packed is not None and answer is not None
    assert memory_id("Ada", "Ada leads the Atlas migration") in packed["context_block"]
    chain = [(link["role"], link["memory_id"]) for link in answer["chain"]]
    assert chain == [
        ("cause", memory_id(*INVOICE)),
        ("decision", memory_id(*DECISION)),
        ("consequence", memory_id(*OUTCOME)),
    ], json.dumps(answer)[:2000]
    assert "caused_by" in answer["chain"][0]["evidence"]


async def test_two_backends_on_one_memory_file_see_each_others_writes(
    kg_server: ServerCommand, tmp_path: Path
) -> None:
    memory_file = tmp_path / "graph.jsonl"
    async with (
        asyncio.timeout(90),
        create_backend(_options(kg_server, memory_file)) as one,
        create_backend(_options(kg_server, memory_file)) as two,
    ):
        first = await one.remember(
            NewMemory("Grafana alerts page the on-call engineer", entities=("Grafana",))
        )
        second = await two.remember(NewMemory("Kafka consumers lag on Mondays", entities=("Kafka",)))
        await two.link(Edge(first.id, second.id, EdgeType.CAUSAL, 0.7))
        seen_by_one = await one.neighbors([first.id], edge_types=[EdgeType.CAUSAL])
        await one.forget(second.id)
        assert await two.get([second.id]) == []
        assert [record.id for record in await two.get([first.id])] == [first.id]
    assert [(item.record.id, item.edge.weight) for item in seen_by_one] == [(second.id, 0.7)]
