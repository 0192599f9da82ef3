"""The MCP transports in the benchmark: the same calls over stdio and streamable HTTP, and HTTP load.

Real ``orchestrator serve`` processes (the console script beside this interpreter) serve the store
the in-process measurement uses, and ``interleave.interleaved`` makes each call on every path in
turn, so the difference between a path and the call in process is what the transport and the server
add, measured at the same moments. Load: ``clients`` concurrent loops posting ``memory_search`` for a
fixed time each (stateless JSON-RPC over HTTP, loopback only); calls/s, p50/p95 and errors per level.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from memory_orchestrator.evaluation.interleave import Caller
from memory_orchestrator.evaluation.startup import (
    INITIALIZE,
    INITIALIZED,
    orchestrator_command,
    settings_free_environment,
)
from memory_orchestrator.ports import BackendUnavailable

READY_TIMEOUT_S = 30.0
ACCEPT = "application/json, text/event-stream"
#: Seconds one call of the load may take (then it counts as an error and its connection is dropped).
CALL_TIMEOUT_S = 30.0


def server_environment(store_file: Path) -> dict[str, str]:
    """A server on exactly this SQLite file (traces beside it), nothing from the caller's settings."""
    env = settings_free_environment()
    env["ORCHESTRATOR_DATA_DIR"] = str(store_file.parent)
    env["ORCHESTRATOR_BACKEND__NAME"] = "sqlite"
    env["ORCHESTRATOR_BACKEND__SQLITE__PATH"] = str(store_file)
    return env


def _sdk_caller(client: Client) -> Caller:
    async def call(_position: int, arguments: dict[str, Any]) -> None:
        result = await client.call_tool("memory_search", arguments)
        if result.is_error:
            raise BackendUnavailable(f"memory_search over MCP failed: {result.content}", backend="mcp")

    return call


@asynccontextmanager
async def sdk_stdio(store_file: Path) -> AsyncIterator[Caller]:
    """Calls through a stdio server process (the MCP SDK's client)."""
    params = StdioServerParameters(
        command=orchestrator_command(), args=["serve"], env=server_environment(store_file)
    )
    errlog = await asyncio.to_thread(open, os.devnull, "w")
    try:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            yield _sdk_caller(client)
    finally:
        errlog.close()


def _search_call(position: int, arguments: dict[str, Any]) -> bytes:
    body = {
        "jsonrpc": "2.0",
        "id": position,
        "method": "tools/call",
        "params": {"name": "memory_search", "arguments": arguments},
    }
    return json.dumps(body).encode()


def _answered(data: bytes) -> bool:
    """A JSON-RPC answer with a result that is not a failed tool call."""
    return b'"result"' in data and b'"isError":true' not in data


@asynccontextmanager
async def bare_stdio(store_file: Path) -> AsyncIterator[Caller]:
    """Calls through a stdio server process, as JSON lines this process writes and reads without
    parsing them: what the transport and the server add to a call, without the SDK client's own work
    (its HTTP or stream plumbing, result models and output-schema validation of every answer, ~6 ms
    of a call over HTTP on the slow machine of the README's performance notes)."""
    process = await asyncio.create_subprocess_exec(
        orchestrator_command(),
        "serve",
        env=server_environment(store_file),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        limit=64 * 1024 * 1024,
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    async def exchange(message: bytes, request_id: bytes) -> bytes:
        stdin.write(message + b"\n")
        await stdin.drain()
        while True:  # skip the server's notifications, if any, up to the answer
            line = await stdout.readline()
            if not line:
                raise BackendUnavailable("the stdio server closed its output", backend="mcp")
            head = line[:96].replace(b'"id": ', b'"id":')  # the SDK writes the id before the result
            if b'"id":' + request_id + b"," in head or b'"id":' + request_id + b"}" in head:
                return line

    async def call(position: int, arguments: dict[str, Any]) -> None:
        async with asyncio.timeout(CALL_TIMEOUT_S):
            answer = await exchange(_search_call(position, arguments), str(position).encode())
        if not _answered(answer):
            raise BackendUnavailable(f"memory_search over stdio failed: {answer[:300]!r}", backend="mcp")

    try:
        async with asyncio.timeout(READY_TIMEOUT_S):
            await exchange(json.dumps(INITIALIZE).encode(), b'"init"')
        stdin.write(json.dumps(INITIALIZED).encode() + b"\n")
        yield call
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()


@asynccontextmanager
async def bare_http(base: str) -> AsyncIterator[Caller]:
    """Calls posted one after another on one keep-alive connection, answers read as bytes (see
    :func:`bare_stdio` for why)."""
    host, port = _address(base)
    connection = await _Connection.open(host, port)

    async def call(position: int, arguments: dict[str, Any]) -> None:
        async with asyncio.timeout(CALL_TIMEOUT_S):
            status, data, _ = await connection.post("/mcp", _search_call(position, arguments))
        if status != 200 or not _answered(data):
            raise BackendUnavailable(f"memory_search over HTTP failed: {data[:300]!r}", backend="mcp")

    try:
        yield call
    finally:
        connection.close()


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


@asynccontextmanager
async def sdk_http(base: str) -> AsyncIterator[Caller]:
    """Calls through the streamable HTTP server at ``base`` (the MCP SDK's client)."""
    async with httpx2.AsyncClient(timeout=30.0) as http:  # the MCP SDK's own HTTP client
        transport = streamable_http_client(f"{base}/mcp", http_client=http, terminate_on_close=False)
        async with Client(transport) as client:
            yield _sdk_caller(client)


async def load(base: str, calls: Sequence[dict[str, Any]], *, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` concurrent loops of ``memory_search`` for ``seconds``: rate, latency, errors.

    Each loop keeps one HTTP/1.1 connection and posts on it, as ``wrk`` does, through
    :class:`_Connection` rather than an HTTP client library: httpx spent 3.5 ms of this process's
    CPU on a call with one connection and 11 ms with 50 (its pool's bookkeeping grows with the
    connections), so on two cores the load generator, not the server, set the rate it measured.
    """
    host, port = _address(base)
    latencies: list[float] = []
    errors = 0
    stop = time.monotonic() + seconds

    async def loop(offset: int) -> None:
        nonlocal errors
        connection: _Connection | None = None
        position = offset
        while time.monotonic() < stop:
            body = _search_call(position, calls[position % len(calls)])
            position += clients
            started = time.perf_counter()
            try:
                async with asyncio.timeout(CALL_TIMEOUT_S):
                    if connection is None:
                        connection = await _Connection.open(host, port)
                    status, data, keep = await connection.post("/mcp", body)
                # a JSON-RPC error has no "result"; a failed tool call says "isError" in its result
                failed = status != 200 or not _answered(data)
                if not keep:
                    connection.close()
                    connection = None
            except (OSError, EOFError, TimeoutError, ValueError, asyncio.LimitOverrunError):
                failed = True
                if connection is not None:
                    connection.close()  # a broken or timed-out exchange: the next call reconnects
                    connection = None
            latencies.append((time.perf_counter() - started) * 1000.0)
            errors += int(failed)
        if connection is not None:
            connection.close()

    started = time.monotonic()
    await asyncio.gather(*(loop(offset) for offset in range(clients)))
    elapsed = time.monotonic() - started
    return {
        "clients": clients,
        "seconds": round(elapsed, 2),
        "calls": len(latencies),
        "calls_per_s": round(len(latencies) / elapsed, 1) if elapsed > 0 else 0.0,
        "latencies": latencies,
        "errors": errors,
    }


def _address(base: str) -> tuple[str, int]:
    parsed = urlsplit(base)
    if parsed.scheme != "http" or parsed.hostname is None or parsed.port is None:
        raise ValueError(f"the load needs an http://host:port address, not {base!r}")
    return parsed.hostname, parsed.port


class _Connection:
    """One keep-alive HTTP/1.1 connection that posts JSON and reads whole answers (a body of
    ``Content-Length`` bytes, or chunked): the little of HTTP the server's answers use."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self.reader, self.writer = reader, writer
        self.head = f"Host: {host}\r\nContent-Type: application/json\r\nAccept: {ACCEPT}\r\n".encode("ascii")

    @classmethod
    async def open(cls, host: str, port: int) -> _Connection:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, f"{host}:{port}")

    async def post(self, path: str, body: bytes) -> tuple[int, bytes, bool]:
        """``(status, body, whether the connection stays open)`` of one POST. Raises ``EOFError``
        when the server closes the connection first (``IncompleteReadError`` is one), ``ValueError``
        on an answer that is not HTTP/1.1 and ``LimitOverrunError`` on a head over 64 KiB."""
        start = f"POST {path} HTTP/1.1\r\n".encode("ascii")
        length = f"Content-Length: {len(body)}\r\n\r\n".encode("ascii")
        self.writer.write(start + self.head + length + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *lines = head[:-4].decode("latin-1").split("\r\n")
        version, _, rest = status_line.partition(" ")
        if version != "HTTP/1.1" or not rest[:3].isdigit():
            raise ValueError(f"not an HTTP/1.1 answer: {status_line[:80]!r}")
        headers: dict[str, str] = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip().lower()
        if headers.get("transfer-encoding") == "chunked":
            data = await self._chunks()
        else:
            data = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return int(rest[:3]), data, headers.get("connection") != "close"

    async def _chunks(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")  # the end (the server sends no trailers)
                return b"".join(parts)
            parts.append((await self.reader.readexactly(size + 2))[:-2])  # the chunk, less its CRLF

    def close(self) -> None:
        self.writer.close()
