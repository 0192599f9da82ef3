"""The ``backend`` fixture: every contract test runs against each backend (memory, sqlite, neo4j, mnemon,
mcp_kg: the real knowledge-graph MCP server)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_orchestrator.ports import MemoryBackend

#: A moment safely in the past, so wall-clock "now" sees every back-dated memory of the tests.
T0 = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)

BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("neo4j", id="neo4j", marks=pytest.mark.integration),
    pytest.param("mnemon", id="mnemon", marks=pytest.mark.integration),
    pytest.param("mcp_kg", id="mcp_kg", marks=pytest.mark.integration),
]

BackendMaker = Callable[[], MemoryBackend]


def at(days: float = 0, hours: float = 0) -> datetime:
    """``T0`` shifted by the given days and hours."""
    return T0 + timedelta(days=days, hours=hours)


@pytest.fixture(params=BACKENDS)
def make_backend(request: pytest.FixtureRequest, tmp_path: Path) -> BackendMaker:
    """A factory of unopened backends of one kind, all on the same store (to test reopening)."""
    kind: str = request.param
    store = f"t{uuid.uuid4().hex[:12]}"
    options: dict[str, Any]
    if kind == "memory":
        from memory_orchestrator.adapters.memory import create_backend as create_memory

        shared = create_memory({})
        return lambda: shared
    if kind == "sqlite":
        from memory_orchestrator.adapters.sqlite import create_backend as create_sqlite

        options = {"path": str(tmp_path / "memories.db"), "store": store}
        return lambda: create_sqlite(options)
    if kind == "mnemon":
        from memory_orchestrator.adapters.mnemon import create_backend as create_mnemon
        from services.mnemon.fixture import mnemon_options

        env = request.getfixturevalue("mnemon_env")
        options = mnemon_options(env, store)
        return lambda: create_mnemon(options)
    if kind == "mcp_kg":
        from memory_orchestrator.adapters.mcp_kg import create_backend as create_kg

        server = request.getfixturevalue("kg_server")
        options = {"server": server.script, "memory_file": str(tmp_path / f"{store}.jsonl"), "timeout_s": 30}
        return lambda: create_kg(options)
    service = request.getfixturevalue("neo4j_service")
    from memory_orchestrator.adapters.neo4j import create_backend as create_neo4j

    options = {
        "uri": service.uri,
        "user": service.user,
        "password": service.password,
        "database": service.database,
        "store": store,
    }
    return lambda: create_neo4j(options)


@pytest.fixture
async def backend(make_backend: BackendMaker, anyio_backend: str) -> AsyncIterator[MemoryBackend]:
    """An open backend with an empty store, closed after the test."""
    opened = make_backend()
    await opened.open()
    try:
        yield opened
    finally:
        await opened.aclose()
