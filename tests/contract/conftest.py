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

#: Makes an unopened backend on the test's store, or on another store when given its name.
BackendMaker = Callable[..., MemoryBackend]


def at(days: float = 0, hours: float = 0) -> datetime:
    """``T0`` shifted by the given days and hours."""
    return T0 + timedelta(days=days, hours=hours)


@pytest.fixture(params=BACKENDS)
def make_backend(request: pytest.FixtureRequest, tmp_path: Path) -> BackendMaker:
    """A factory of unopened backends of one kind, all on the same store (to test reopening) unless
    the call names another store."""
    kind: str = request.param
    test_store = f"t{uuid.uuid4().hex[:12]}"
    if kind == "memory":
        from memory_orchestrator.adapters.memory import create_backend as create_memory

        stores: dict[str, MemoryBackend] = {}

        def memory_backend(store: str = test_store) -> MemoryBackend:
            if store not in stores:  # one in-memory backend per store, shared by every call
                stores[store] = create_memory({})
            return stores[store]

        return memory_backend
    if kind == "sqlite":
        from memory_orchestrator.adapters.sqlite import create_backend as create_sqlite

        path = str(tmp_path / "memories.db")
        return lambda store=test_store: create_sqlite({"path": path, "store": store})
    if kind == "mnemon":
        from memory_orchestrator.adapters.mnemon import create_backend as create_mnemon
        from services.mnemon.fixture import mnemon_options

        env = request.getfixturevalue("mnemon_env")
        return lambda store=test_store: create_mnemon(mnemon_options(env, store))
    if kind == "mcp_kg":
        from memory_orchestrator.adapters.mcp_kg import create_backend as create_kg

        server = request.getfixturevalue("kg_server")

        def kg_options(store: str) -> dict[str, Any]:
            return {"server": server.script, "memory_file": str(tmp_path / f"{store}.jsonl"), "timeout_s": 30}

        return lambda store=test_store: create_kg(kg_options(store))
    service = request.getfixturevalue("neo4j_service")
    from memory_orchestrator.adapters.neo4j import create_backend as create_neo4j

    def neo4j_options(store: str) -> dict[str, Any]:
        return {
            "uri": service.uri,
            "user": service.user,
            "password": service.password,
            "database": service.database,
            "store": store,
        }

    return lambda store=test_store: create_neo4j(neo4j_options(store))


@pytest.fixture
async def backend(make_backend: BackendMaker, anyio_backend: str) -> AsyncIterator[MemoryBackend]:
    """An open backend with an empty store, closed after the test."""
    opened = make_backend()
    await opened.open()
    try:
        yield opened
    finally:
        await opened.aclose()
