"""Session fixture ``neo4j_service`` (placeholder until the Neo4j launcher lands)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def neo4j_service() -> object:
    pytest.skip("Neo4j launcher not written yet")
