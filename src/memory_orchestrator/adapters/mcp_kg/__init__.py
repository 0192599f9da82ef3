"""The official MCP knowledge-graph memory server (npm ``@modelcontextprotocol/server-memory``).

``create_backend(options)`` builds the backend. Options: ``memory_file`` (the server's JSONL file for
this store; default ``<data_dir>/mcp_kg/<store>.jsonl``; with ``memory_file_store`` set, the file is
that store's and any other store uses ``<stem>.<store>.jsonl`` beside it), ``data_dir``, ``store``,
``server`` (the server's ``dist/index.js``; ``$MCP_KG_SERVER`` or the project-local install
otherwise), ``timeout_s`` (every MCP call and the server start), ``lock_timeout_s`` (waiting for
another writer), ``recall`` (``terms``: ``search_nodes`` once per query word, the default;
``literal``: once with the whole text) and ``entity_type`` (the type given to entities our writes create).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memory_orchestrator.adapters.mcp_kg.backend import McpKgBackend
from memory_orchestrator.adapters.mcp_kg.recall import RECALL_MODES
from memory_orchestrator.adapters.mcp_kg.server import (
    ENV_VARIABLE,
    INSTALL_HINT,
    PINNED_VERSION,
    ServerCommand,
    locate,
)
from memory_orchestrator.adapters.mcp_kg.transport import McpStdioTransport
from memory_orchestrator.ports import InvalidRequest

__all__ = [
    "ENV_VARIABLE",
    "INSTALL_HINT",
    "PINNED_VERSION",
    "McpKgBackend",
    "McpStdioTransport",
    "ServerCommand",
    "create_backend",
    "locate",
]

DEFAULT_STORE = "default"
_STORE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _memory_file(options: Mapping[str, Any]) -> Path:
    store = str(options.get("store") or DEFAULT_STORE)
    if not _STORE_NAME.match(store):
        raise InvalidRequest(f"knowledge-graph store name {store!r} must match [A-Za-z0-9][A-Za-z0-9_.-]*")
    if options.get("memory_file"):
        explicit = Path(str(options["memory_file"])).expanduser().resolve()
        owner = options.get("memory_file_store")
        # An explicit file belongs to the configured store; another store (a client naming one)
        # gets a file of its own beside it, never the same graph.
        if owner is None or str(owner) == store:
            return explicit
        return explicit.with_name(f"{explicit.stem}.{store}{explicit.suffix or '.jsonl'}")
    data_dir = Path(str(options.get("data_dir") or Path.home() / ".local/share/memory-orchestrator"))
    return (data_dir.expanduser() / "mcp_kg" / f"{store}.jsonl").resolve()


def create_backend(options: Mapping[str, Any]) -> McpKgBackend:
    """An unopened backend (locates node and the server; starts nothing)."""
    recall = str(options.get("recall", "terms"))
    if recall not in RECALL_MODES:
        raise InvalidRequest(f"mcp_kg recall must be one of {', '.join(RECALL_MODES)}, got {recall!r}")
    server = options.get("server")
    command = locate(str(server) if server else None)
    memory_file = _memory_file(options)
    timeout_s = float(options.get("timeout_s", 10.0))
    return McpKgBackend(
        command.transport(memory_file, timeout_s=timeout_s),
        memory_file,
        recall_mode=recall,
        entity_type=str(options.get("entity_type") or "entity"),
        lock_timeout_s=float(options.get("lock_timeout_s", 30.0)),
    )
