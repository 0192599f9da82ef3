"""The MCP client transport against the real knowledge-graph server: calls, one file per store,
restart after the server dies, time-outs and refused calls."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from memory_orchestrator.adapters.mcp_kg import McpStdioTransport, ServerCommand
from memory_orchestrator.ports import BackendRejected, BackendUnavailable
from services.mcp_kg.fixture import server_pids

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ADA = {"name": "Ada", "entityType": "person", "observations": ["likes green tea"]}


async def test_calls_round_trip_into_the_stores_own_file(kg_server: ServerCommand, tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    async with asyncio.timeout(60):
        one, two = kg_server.transport(first), kg_server.transport(second)
        try:
            await one.call("create_entities", {"entities": [ADA]})
            found = await one.call("search_nodes", {"query": "tea"})
            other = await two.call("read_graph", {})
        finally:
            await one.aclose()
            await two.aclose()
    assert [e["name"] for e in found["entities"]] == ["Ada"]
    assert other["entities"] == []
    assert "Ada" in first.read_text() and not second.exists()


async def test_a_dead_server_is_restarted_and_keeps_its_graph(
    kg_server: ServerCommand, tmp_path: Path
) -> None:
    memory_file = tmp_path / "graph.jsonl"
    transport = kg_server.transport(memory_file)
    async with asyncio.timeout(60):
        try:
            await transport.call("create_entities", {"entities": [ADA]})
            pids = server_pids(memory_file)
            assert pids
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            failed = False
            try:
                graph = await transport.call("read_graph", {})
            except BackendUnavailable:
                failed = True  # the call in flight when it died may fail; the next one restarts
                graph = await transport.call("read_graph", {})
        finally:
            await transport.aclose()
    assert transport.starts == 2, failed
    assert [e["name"] for e in graph["entities"]] == ["Ada"]


async def test_a_server_that_never_answers_times_out(tmp_path: Path) -> None:
    silent = McpStdioTransport("node", ["-e", "setInterval(() => {}, 1000)"], timeout_s=1.5)
    async with asyncio.timeout(30):
        with pytest.raises(BackendUnavailable, match="did not start"):
            await silent.call("read_graph", {})
        await silent.aclose()
    assert not silent.alive


async def test_a_refused_call_is_rejected_and_the_session_survives(
    kg_server: ServerCommand, tmp_path: Path
) -> None:
    transport = kg_server.transport(tmp_path / "graph.jsonl")
    async with asyncio.timeout(60):
        try:
            with pytest.raises(BackendRejected):
                await transport.call(
                    "add_observations", {"observations": [{"entityName": "Nobody", "contents": ["x"]}]}
                )
            graph = await transport.call("read_graph", {})
        finally:
            await transport.aclose()
    assert graph["entities"] == [] and transport.starts == 1
