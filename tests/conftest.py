"""Shared test configuration: async tests run on asyncio through anyio's pytest plugin."""

from __future__ import annotations

import pytest

pytest_plugins = ["services.neo4j.fixture", "services.mnemon.fixture", "services.mcp_kg.fixture"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
