"""``orchestrator serve``: run the MCP server over stdio (default) or streamable HTTP.

Stdio keeps stdout for the protocol: everything else, including errors at start-up, goes to stderr.
Over HTTP the server is stateless and fail-closed: tokens come from ``[auth] tokens`` (sha256 of
each bearer token), and binding beyond loopback without any token refuses to start. The console
script reads the usual ``serve`` command lines itself (:mod:`serving`); this command answers the
others (help, mistakes) and embedders of the CLI.
"""

from __future__ import annotations

from typing import Annotated

import typer

from memory_orchestrator.entrypoints.cli.console import end_of_startup
from memory_orchestrator.entrypoints.cli.serving import DEFAULT_HOST, DEFAULT_PORT, MAX_PORT, ServeCall
from memory_orchestrator.entrypoints.cli.serving import serve as run_server
from memory_orchestrator.entrypoints.cli.state import state_of


def serve(
    ctx: typer.Context,
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP instead of stdio.")] = False,
    host: Annotated[str, typer.Option("--host", help="HTTP interface to bind.")] = DEFAULT_HOST,
    port: Annotated[int, typer.Option("--port", min=1, max=MAX_PORT, help="HTTP port.")] = DEFAULT_PORT,
) -> None:
    """Run the MCP server (stdio by default; --http for streamable HTTP with bearer-token auth)."""
    code = run_server(ServeCall(state_of(ctx), http=http, host=host, port=port), started=end_of_startup)
    if code:
        raise typer.Exit(code)
