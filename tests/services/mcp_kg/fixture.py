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


def server_pids(memory_file: Path) -> list[int]:
    """Our own child processes serving ``memory_file`` (found through /proc, Linux only)."""
    marker = f"MEMORY_FILE_PATH={memory_file.resolve()}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids
