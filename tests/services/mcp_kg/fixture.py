"""The real knowledge-graph MCP server for the tests, from the locked local install (never npx).

Missing node or install: the tests skip with instructions locally and fail under ``CI=true``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memory_orchestrator.adapters.mcp_kg import INSTALL_HINT, ServerCommand, locate
from memory_orchestrator.ports import PluginError

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def kg_server() -> ServerCommand:
    """The located server command (session-wide)."""
    try:
        return locate(root=ROOT)
    except PluginError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the knowledge-graph server is required under CI: {exc}", pytrace=False)
        pytest.skip(f"{exc}; run `{INSTALL_HINT}`")
