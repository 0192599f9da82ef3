"""Where the pinned knowledge-graph server lives and how to start it for one memory file.

The server runs as ``node <dist/index.js>`` from a local install, never through ``npx`` (which
would fetch a package at run time). ``$MCP_KG_SERVER`` names the ``index.js`` explicitly; otherwise
the project-local install made by ``scripts/setup-npm`` is used.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from memory_orchestrator.adapters.mcp_kg.transport import McpStdioTransport
from memory_orchestrator.ports import PluginError

PACKAGE = "@modelcontextprotocol/server-memory"
PINNED_VERSION = "2026.8.31"
ENV_VARIABLE = "MCP_KG_SERVER"
INSTALL_HINT = (
    "bash scripts/setup-npm (installs the locked requirements/npm/package-lock.json into .cache/npm)"
)
_LOCAL = Path(".cache/npm/node_modules") / PACKAGE / "dist" / "index.js"


@dataclass(frozen=True, slots=True)
class ServerCommand:
    """``node`` and the server script to run with it."""

    node: str
    script: str

    def transport(self, memory_file: Path, *, timeout_s: float = 10.0) -> McpStdioTransport:
        """A transport to a server storing its graph in ``memory_file`` (one file per store)."""
        environment = {"MEMORY_FILE_PATH": str(memory_file.resolve())}
        return McpStdioTransport(
            self.node, [self.script], environment=environment, timeout_s=timeout_s, backend="mcp_kg"
        )


def locate(script: str | None = None, *, root: Path | None = None) -> ServerCommand:
    """The server command: ``script`` or ``$MCP_KG_SERVER`` or the local install under ``root``."""
    node = shutil.which("node")
    if node is None:
        raise PluginError("node is not on PATH; install Node.js 20+ to use the mcp_kg backend")
    chosen = script or os.environ.get(ENV_VARIABLE, "").strip()
    path = Path(chosen) if chosen else (root or Path.cwd()) / _LOCAL
    if not path.is_file():
        raise PluginError(f"no knowledge-graph server at {path}; install it with {INSTALL_HINT}")
    return ServerCommand(node, str(path.resolve()))
