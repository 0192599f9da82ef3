"""The official MCP knowledge-graph memory server (npm ``@modelcontextprotocol/server-memory``).

This package so far holds the MCP client transport (:mod:`.transport`) and the locator of the pinned
server (:mod:`.server`); the backend mapping observations to memories is not written yet.
"""

from __future__ import annotations

from memory_orchestrator.adapters.mcp_kg.server import (
    ENV_VARIABLE,
    INSTALL_HINT,
    PINNED_VERSION,
    ServerCommand,
    locate,
)
from memory_orchestrator.adapters.mcp_kg.transport import McpStdioTransport

__all__ = [
    "ENV_VARIABLE",
    "INSTALL_HINT",
    "PINNED_VERSION",
    "McpStdioTransport",
    "ServerCommand",
    "locate",
]
