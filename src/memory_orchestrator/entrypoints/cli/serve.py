"""``orchestrator serve``: run the MCP server over stdio (default) or streamable HTTP.

Stdio keeps stdout for the protocol: everything else, including errors at start-up, goes to stderr.
Over HTTP the server is stateless and fail-closed: tokens come from ``[auth] tokens`` (sha256 of
each bearer token), and binding beyond loopback without any token refuses to start.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from memory_orchestrator.entrypoints.cli.console import end_of_startup
from memory_orchestrator.entrypoints.cli.state import settings_of, state_of
from memory_orchestrator.ports import OrchestratorError


def serve(
    ctx: typer.Context,
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP instead of stdio.")] = False,
    host: Annotated[str, typer.Option("--host", help="HTTP interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="HTTP port.")] = 8765,
) -> None:
    """Run the MCP server (stdio by default; --http for streamable HTTP with bearer-token auth)."""
    try:
        settings = settings_of(ctx)
        from memory_orchestrator.entrypoints.mcp import launch  # the MCP SDK: only when serving

        launch.run(
            settings, store=state_of(ctx).store, http=http, host=host, port=port, started=end_of_startup
        )
    except (OrchestratorError, ValueError) as exc:
        print(f"orchestrator serve: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
