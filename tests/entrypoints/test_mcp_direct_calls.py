"""HTTP requests answered in their own task (``DirectCalls``) get the SDK's answers: the same requests
sent to a server with the direct path and to one without it answer with the same status, headers and
body (trace ids aside, which are random), and only single non-``initialize`` requests take it."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from mcp.server import MCPServer

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.entrypoints.mcp import direct_calls
from memory_orchestrator.entrypoints.mcp.auth import TokenRegistry
from memory_orchestrator.entrypoints.mcp.server import build_server, http_app
from memory_orchestrator.entrypoints.mcp.state import ServerOptions
from memory_orchestrator.ports import FixedClock

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
pytestmark = pytest.mark.anyio

BASE = "http://127.0.0.1:8765"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
TRACE_ID = re.compile(rb"tr-[0-9a-f]{16}")


def _call(number: int | str, tool: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": number,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, **params},
    }


#: (body, extra headers): writes first, so both servers' stores go through the same states.
EXCHANGES: list[tuple[Any, dict[str, str]]] = [
    (_call(1, "memory_write", {"content": "We chose Postgres for Atlas because of its JSON support."}), {}),
    (
        _call(
            2, "memory_write", {"content": "Atlas billing moves to Stripe next quarter.", "tags": ["billing"]}
        ),
        {},
    ),
    (_call("three", "memory_search", {"query": "why Postgres for Atlas?"}), {}),
    (_call(4, "memory_search", {"query": "Atlas", "top_k": 1, "expand": False}), {}),
    (_call(5, "memory_context", {"query": "Atlas billing"}), {}),
    (_call(6, "memory_search", {"query": "Atlas"}, _meta={"progressToken": "p1"}), {}),
    (_call(7, "memory_search", {"query": ""}), {}),  # refused by the tool: a tool error
    (_call(8, "memory_search", {"query": "x", "surprise": 1}), {}),
    (_call(9, "no_such_tool", {}), {}),
    ({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"arguments": {}}}, {}),
    ({"jsonrpc": "2.0", "id": 11, "method": "tools/list"}, {}),
    ({"jsonrpc": "2.0", "id": 12, "method": "ping"}, {}),
    ({"jsonrpc": "2.0", "id": 13, "method": "no/such_method", "params": {}}, {}),
    (_call(14, "memory_search", {"query": "Atlas"}), {"mcp-protocol-version": "2025-06-18"}),
    (_call(15, "memory_search", {"query": "Atlas"}), {"mcp-protocol-version": "1999-01-01"}),
    (_call(16, "memory_search", {"query": "Atlas"}), {"mcp-session-id": "abc"}),
    (_call(17, "memory_search", {"query": "Atlas"}), {"accept": "text/html"}),
    (_call(18, "memory_search", {"query": "Atlas"}), {"content-type": "text/plain"}),
    (_call(19, "memory_search", {"query": "Atlas"}), {"host": "evil.example:8765"}),
    (_call(20, "memory_search", {"query": "Atlas"}), {"origin": "http://evil.example"}),
    ({"jsonrpc": "2.0", "method": "notifications/initialized"}, {}),
    (
        {
            "jsonrpc": "2.0",
            "id": 21,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {},
    ),
    ([_call(22, "memory_search", {"query": "Atlas"}), _call(23, "memory_search", {"query": "Atlas"})], {}),
    ({"jsonrpc": "2.0", "id": 24, "result": {}}, {}),
    ({"jsonrpc": "1.0", "id": 25, "method": "ping"}, {}),
    ("not json", {}),
]


@dataclass
class _Handle:
    backend: InMemoryBackend
    orchestrator: Orchestrator


@asynccontextmanager
async def _open(store: str) -> AsyncIterator[_Handle]:
    clock = FixedClock(START)
    async with InMemoryBackend(clock=clock) as backend:
        yield _Handle(backend, Orchestrator(backend, config=PipelineConfig(), clock=clock))


@asynccontextmanager
async def _serving(direct: bool) -> AsyncIterator[tuple[httpx.AsyncClient, MCPServer[Any]]]:
    clock = FixedClock(START)
    server = build_server(_open, ServerOptions(require_http_caller=True), clock=clock)
    app = http_app(server, TokenRegistry([]), host="127.0.0.1", direct=direct)
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(server.session_manager.run())
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)
        yield await stack.enter_async_context(client), server


async def _send(client: httpx.AsyncClient, body: Any, headers: dict[str, str]) -> httpx.Response:
    content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    return await client.post("/mcp", content=content, headers={**HEADERS, **headers})


async def test_the_direct_path_answers_as_the_sdk_does() -> None:
    statuses: set[int] = set()
    async with _serving(direct=True) as (direct, _), _serving(direct=False) as (sdk, _):
        for body, headers in EXCHANGES:
            mine, theirs = await _send(direct, body, headers), await _send(sdk, body, headers)
            statuses.add(mine.status_code)
            assert mine.status_code == theirs.status_code, body
            assert mine.headers.multi_items() == theirs.headers.multi_items(), body
            assert TRACE_ID.sub(b"tr-", mine.content) == TRACE_ID.sub(b"tr-", theirs.content), body
    assert statuses == {200, 202, 400, 403, 406, 421}  # answers, refusals and errors all compared


async def test_only_single_requests_on_the_handshake_wire_take_the_direct_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    served: list[Any] = []
    original: Callable[..., Awaitable[dict[str, Any]]] = direct_calls.serve_one

    async def counted(server: Any, context: Any, method: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        served.append(context.request_id)
        return await original(server, context, method, *args, **kwargs)

    monkeypatch.setattr(direct_calls, "serve_one", counted)
    async with _serving(direct=True) as (client, _):
        for body, headers in EXCHANGES:
            await _send(client, body, headers)
    # not: another protocol version (15), refused headers (17-20), a notification, initialize (21),
    # a batch (22, 23), a response (24), invalid messages (25, "not json")
    assert served == [1, 2, "three", *range(4, 15), 16]


async def test_a_server_not_built_here_is_served_by_the_sdk_alone() -> None:
    server: MCPServer[Any] = MCPServer("plain")
    app = http_app(server, TokenRegistry([]), host="127.0.0.1")
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)
    async with server.session_manager.run(), client:
        answer = await _send(client, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, {})
    assert answer.status_code == 200
    assert answer.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
