"""The HTTP server's own limits: body size and nesting, no event-stream GET, and a header timeout."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from memory_orchestrator.entrypoints.mcp.http_limits import (
    HttpLimits,
    RequestLimitsMiddleware,
    header_timeout_protocol,
    json_depth,
)
from memory_orchestrator.evaluation.startup import orchestrator_command, settings_free_environment
from services.processes import free_port

ORCHESTRATOR = orchestrator_command()


async def _echo(request: Request) -> JSONResponse:
    return JSONResponse({"size": len(await request.body())})


def _client(limits: HttpLimits) -> httpx.AsyncClient:
    inner = Starlette(routes=[Route("/mcp", _echo, methods=["POST", "GET"])])
    app = RequestLimitsMiddleware(inner, limits)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def test_json_depth_counts_nesting_outside_strings() -> None:
    assert json_depth(b'{"a": [1, {"b": "[[[[{{"}]}') == 3
    assert json_depth(b'"\\"[[["') == 0
    assert json_depth(b"[" * 1500 + b"]" * 1500) == 1500


@pytest.mark.anyio
async def test_oversized_deep_and_streaming_requests_are_refused_before_the_app() -> None:
    limits = HttpLimits(max_body_bytes=2048, max_json_depth=8)
    async with _client(limits) as client:
        fine = await client.post("/mcp", json={"jsonrpc": "2.0", "params": {"a": [1, 2]}})
        big = await client.post("/mcp", content=b"x" * 4096, headers={"content-type": "application/json"})
        deep = await client.post("/mcp", content=b"[" * 50 + b"]" * 50)
        stream = await client.get("/mcp")
    assert fine.status_code == 200 and fine.json()["size"] > 0
    assert big.status_code == 413 and "2048" in big.json()["error"]
    assert deep.status_code == 400 and "nested" in deep.json()["error"]
    assert stream.status_code == 405 and stream.headers["allow"] == "POST"


@pytest.mark.slow
def test_a_client_sending_headers_forever_is_disconnected(tmp_path: Path) -> None:
    config = tmp_path / "orchestrator.toml"
    config.write_text("[http]\nheader_timeout_s = 1.0\n")
    env = settings_free_environment()
    env.update(ORCHESTRATOR_DATA_DIR=str(tmp_path / "data"), ORCHESTRATOR_CONFIG=str(config))
    port = free_port()
    server = subprocess.Popen(
        [ORCHESTRATOR, "serve", "--http", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                connection = socket.create_connection(("127.0.0.1", port), timeout=1)
                break
            except OSError:
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.2)
        with connection:
            connection.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1")
            connection.settimeout(10)
            started = time.monotonic()
            assert connection.recv(1024) == b""  # closed by the server, not by our timeout
            assert time.monotonic() - started < 5
        health = httpx.post(
            f"http://127.0.0.1:{port}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Accept": "application/json, text/event-stream"},
            timeout=10,
        )
        assert health.status_code == 200, health.text
        assert json.loads(health.text)["id"] == 1
    finally:
        server.terminate()
        server.wait(timeout=10)


async def _answer_after(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A bare ASGI app: answers ``/sleep/<seconds>`` after that long, anything else at once."""
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path.startswith("/sleep/"):
        await asyncio.sleep(float(path.removeprefix("/sleep/")))
    body = path.encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]}
    )
    await send({"type": "http.response.body", "body": body})


@asynccontextmanager
async def _guarded_server(timeout_s: float) -> AsyncIterator[int]:
    """The server's own HTTP protocol (``header_timeout_protocol``) around ``_answer_after``."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # connections wait in the backlog until the server accepts them
    config = uvicorn.Config(
        _answer_after,
        http=header_timeout_protocol(timeout_s),
        lifespan="off",
        log_level="critical",
        timeout_keep_alive=60,  # so that only the header timeout closes idle connections
    )
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve(sockets=[listener]))
    try:
        yield listener.getsockname()[1]
    finally:
        server.should_exit = True
        await task
        listener.close()


async def _read_until_closed(reader: asyncio.StreamReader, limit_s: float) -> bytes:
    return await asyncio.wait_for(reader.read(), limit_s)


def _get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


@pytest.mark.anyio
async def test_partial_headers_are_cut_off_on_a_new_and_on_a_kept_alive_connection() -> None:
    async with _guarded_server(0.5) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1")
        started = time.monotonic()
        assert await _read_until_closed(reader, 5) == b""  # closed by the server
        assert 0.4 < time.monotonic() - started < 4
        writer.close()

        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_get("/first"))
        assert (await reader.readuntil(b"/first")).startswith(b"HTTP/1.1 200")
        writer.write(b"GET /second HTTP/1.1\r\nHost: 1")  # ... and the next request's never end
        started = time.monotonic()
        assert await _read_until_closed(reader, 5) == b""
        assert 0.4 < time.monotonic() - started < 4
        writer.close()


@pytest.mark.anyio
async def test_requests_answered_slower_than_the_header_timeout_are_not_cut_off() -> None:
    async with _guarded_server(0.3) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        # one slow request, and a second pipelined behind it: both in before the timeout, both answered
        writer.write(_get("/sleep/0.8") + _get("/sleep/0.7"))
        answers = await asyncio.wait_for(reader.readuntil(b"/sleep/0.7"), 5)
        assert answers.count(b"HTTP/1.1 200") == 2 and b"/sleep/0.8" in answers
        # then the connection, idle again, is kept until the header timeout and closed
        assert await _read_until_closed(reader, 5) == b""
        writer.close()
