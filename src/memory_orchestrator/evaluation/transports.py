"""The MCP transports in the benchmark: the same calls over stdio and streamable HTTP, and HTTP load.

A real ``orchestrator serve`` process (the console script beside this interpreter) serves the store
the in-process measurement just used, so the difference between the two is what the transport and
the server add. Load: ``clients`` concurrent loops posting ``memory_search`` for a fixed time each
(stateless JSON-RPC over HTTP, loopback only); calls/s, p50/p95 and errors per level.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from memory_orchestrator.ports import BackendUnavailable

READY_TIMEOUT_S = 30.0
ACCEPT = "application/json, text/event-stream"


def orchestrator_command() -> str:
    """The ``orchestrator`` console script of this environment."""
    candidate = Path(sys.executable).parent / "orchestrator"
    if not candidate.exists():
        raise BackendUnavailable(
            "the orchestrator console script is not installed beside Python", backend="mcp"
        )
    return str(candidate)


def server_environment(store_file: Path) -> dict[str, str]:
    """A server on exactly this SQLite file (traces beside it), nothing from the caller's settings."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("ORCHESTRATOR_")}
    env["ORCHESTRATOR_DATA_DIR"] = str(store_file.parent)
    env["ORCHESTRATOR_BACKEND__NAME"] = "sqlite"
    env["ORCHESTRATOR_BACKEND__SQLITE__PATH"] = str(store_file)
    return env


async def time_calls(client: Client, calls: Sequence[dict[str, Any]], warmup: int) -> list[float]:
    """Milliseconds of each ``memory_search`` call after the first ``warmup`` ones."""
    times: list[float] = []
    for position, arguments in enumerate(calls):
        started = time.perf_counter()
        result = await client.call_tool("memory_search", arguments)
        elapsed = (time.perf_counter() - started) * 1000.0
        if result.is_error:
            raise BackendUnavailable(f"memory_search over MCP failed: {result.content}", backend="mcp")
        if position >= warmup:
            times.append(elapsed)
    return times


async def over_stdio(store_file: Path, calls: Sequence[dict[str, Any]], warmup: int) -> list[float]:
    """The calls through a stdio server process."""
    params = StdioServerParameters(
        command=orchestrator_command(), args=["serve"], env=server_environment(store_file)
    )
    errlog = await asyncio.to_thread(open, os.devnull, "w")
    try:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            return await time_calls(client, calls, warmup)
    finally:
        errlog.close()


@asynccontextmanager
async def http_server(store_file: Path, *, workers: int = 1) -> AsyncIterator[str]:
    """A streamable HTTP server (``workers`` processes) on a free loopback port; yields its base URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    process = await asyncio.to_thread(
        subprocess.Popen,
        [orchestrator_command(), "serve", "--http", "--host", "127.0.0.1", "--port", str(port)],
        env={**server_environment(store_file), "ORCHESTRATOR_HTTP__WORKERS": str(workers)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        await _wait_ready(process, f"{base}/health")
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


async def _wait_ready(process: subprocess.Popen[bytes], url: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    async with httpx.AsyncClient(timeout=1.0) as http:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise BackendUnavailable("the benchmark's HTTP server exited at start", backend="mcp")
            try:
                if (await http.get(url)).status_code == 200:
                    return
            except httpx.TransportError:
                await asyncio.sleep(0.1)
    raise BackendUnavailable("the benchmark's HTTP server did not become ready", backend="mcp")


async def over_http(base: str, calls: Sequence[dict[str, Any]], warmup: int) -> list[float]:
    """The calls through the streamable HTTP server (the MCP SDK's client)."""
    async with httpx2.AsyncClient(timeout=30.0) as http:  # the MCP SDK's own HTTP client
        transport = streamable_http_client(f"{base}/mcp", http_client=http, terminate_on_close=False)
        async with Client(transport) as client:
            return await time_calls(client, calls, warmup)


async def load(base: str, calls: Sequence[dict[str, Any]], *, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` concurrent loops of ``memory_search`` for ``seconds``: rate, latency, errors."""
    latencies: list[float] = []
    errors = 0
    stop = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Accept": ACCEPT, "Content-Type": "application/json"}

    async def loop(offset: int, http: httpx.AsyncClient) -> None:
        nonlocal errors
        position = offset
        while time.monotonic() < stop:
            body = {
                "jsonrpc": "2.0",
                "id": position,
                "method": "tools/call",
                "params": {"name": "memory_search", "arguments": calls[position % len(calls)]},
            }
            position += clients
            started = time.perf_counter()
            try:
                response = await http.post(f"{base}/mcp", json=body, headers=headers)
                failed = response.status_code != 200 or '"isError":true' in response.text
            except httpx.HTTPError:
                failed = True
            latencies.append((time.perf_counter() - started) * 1000.0)
            errors += int(failed)

    started = time.monotonic()
    async with httpx.AsyncClient(timeout=30.0, limits=limits) as http:
        await asyncio.gather(*(loop(offset, http) for offset in range(clients)))
    elapsed = time.monotonic() - started
    return {
        "clients": clients,
        "seconds": round(elapsed, 2),
        "calls": len(latencies),
        "calls_per_s": round(len(latencies) / elapsed, 1) if elapsed > 0 else 0.0,
        "latencies": latencies,
        "errors": errors,
    }
