"""The HTTP server's own limits: body size and nesting, no event-stream GET, and a header timeout."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from memory_orchestrator.entrypoints.mcp.http_limits import HttpLimits, RequestLimitsMiddleware, json_depth
from services.processes import free_port

ORCHESTRATOR = str(Path(sys.executable).parent / "orchestrator")


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
    env = {key: value for key, value in os.environ.items() if not key.startswith("ORCHESTRATOR_")}
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
