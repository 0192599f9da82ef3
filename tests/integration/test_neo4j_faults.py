"""Neo4j stopped and restarted under a running MCP server (a real Neo4j from our launcher).

While it is down every tool answers within its deadline + 1 s with a clear error or a warning; once
a new, empty Neo4j answers at the same address, the first write works (the backend recreates the
indexes it finds missing) and the first search finds it (no stale pooled connection answers).
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from mcp import Client

from memory_orchestrator.adapters.neo4j import create_backend
from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.entrypoints.mcp.server import build_server
from memory_orchestrator.entrypoints.mcp.state import ServerOptions
from services.neo4j.fixture import (
    READY_TIMEOUT_S,
    LauncherProcess,
    LauncherUnavailable,
    Neo4jService,
    free_port,
    launcher_is_built,
    unavailable,
    wait_for_bolt,
)

pytestmark = pytest.mark.integration
READ_S, WRITE_S = 2.0, 10.0
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def start(port: int) -> LauncherProcess:
    java = shutil.which("java")
    if java is None or not launcher_is_built():
        unavailable("no java, or the launcher is not built (the session fixture builds it)")
    launcher = LauncherProcess(str(java), port)
    try:
        launcher.wait_ready(READY_TIMEOUT_S)
    except LauncherUnavailable as exc:
        unavailable(str(exc))
    wait_for_bolt(f"bolt://127.0.0.1:{port}", "neo4j", "", timeout_s=60)
    return launcher


async def write_answered(client: Client, content: str) -> Any:
    """``memory_write``, sent again (as its error says is safe) while a new Neo4j's cold JVM outlasts
    the write timeout: its first writes compile their queries (6 s for the first ``remember`` alone
    on this machine). Any other error is returned as it is."""
    for _ in range(5):
        result = await client.call_tool("memory_write", {"content": content})
        if not (result.is_error and "did not answer within" in str(result.content)):
            return result
    return result


@pytest.mark.anyio
async def test_neo4j_down_then_back(neo4j_service: Neo4jService) -> None:
    # neo4j_service: the session's Neo4j builds the launcher; this test runs its own on another port
    port = free_port()
    launcher = start(port)
    options = {**Neo4jService(uri=f"bolt://127.0.0.1:{port}").backend_options(f"f{uuid.uuid4().hex[:10]}")}
    config = PipelineConfig(stage_timeout_s=1.0)

    @asynccontextmanager
    async def opener(store: str) -> AsyncIterator[Any]:
        backend = create_backend(options)
        async with backend:

            class Handle:
                pass

            handle = Handle()
            handle.backend = backend  # type: ignore[attr-defined]
            handle.orchestrator = Orchestrator(backend, config=config)  # type: ignore[attr-defined]
            yield handle

    server_options = ServerOptions(read_timeout_s=READ_S, write_timeout_s=WRITE_S)
    try:
        async with Client(build_server(opener, server_options)) as client:
            written = await write_answered(client, "Kafka lag alert fired at 02:00")
            assert not written.is_error, written.content
            first = str((written.structured_content or {})["id"])
            launcher.stop()
            for tool, arguments, read in (
                ("memory_search", {"query": "Kafka lag"}, True),
                ("memory_context", {"query": "Kafka lag"}, True),
                ("memory_get", {"ids": [first]}, True),
                ("memory_changes", {"since": "1 day"}, True),
                ("memory_health", {}, True),
                ("memory_write", {"content": "Kafka lag alert moved to the pager"}, False),
            ):
                started = time.monotonic()
                result = await client.call_tool(tool, arguments)
                elapsed = time.monotonic() - started
                assert elapsed <= (READ_S if read else WRITE_S) + 1.0, (tool, elapsed)
                data = result.structured_content or {}
                assert result.is_error or data.get("warnings") or data.get("status") == "error", tool
            # A new, empty Neo4j on the same address: no data, no indexes. The server's backend was
            # opened before; its first calls must work (it recreates the schema it finds missing).
            launcher = start(port)
            rewritten = await write_answered(client, "Zookeeper quorum lost at 03:00")
            assert not rewritten.is_error, rewritten.content
            async with create_backend(options) as other:  # and another client sees the same store
                assert await other.search("Zookeeper quorum", limit=3)
            found = await client.call_tool("memory_search", {"query": "Zookeeper quorum"})
            assert not found.is_error
            assert (found.structured_content or {})["items"], "the first search after recovery finds it"
    finally:
        launcher.stop()
