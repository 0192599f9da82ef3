"""Bearer-token auth of the HTTP MCP server: grants, rights per store, fail-closed middleware."""

from __future__ import annotations

import json

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from memory_orchestrator.entrypoints.mcp.auth import (
    LOCAL_CALLER,
    BearerAuthMiddleware,
    Caller,
    TokenGrant,
    TokenRegistry,
    caller_from_scope,
    check_bind,
    hash_token,
    is_loopback,
)
from memory_orchestrator.ports import AccessDenied

READER = TokenGrant("reader", hash_token("read-secret"), stores=("team",), write=False)
WRITER = TokenGrant("writer", hash_token("write-secret"), stores=("team", "ops"), write=True)


def test_a_token_is_found_by_its_hash_and_unknown_tokens_are_not() -> None:
    registry = TokenRegistry([READER, WRITER])
    assert registry.verify("write-secret") == WRITER.caller()
    assert registry.verify("read-secret") == READER.caller()
    assert registry.verify("guess") is None
    assert registry.verify("") is None


def test_rights_are_per_store_and_per_tool() -> None:
    reader = READER.caller()
    reader.check("memory_search", "team")
    with pytest.raises(AccessDenied, match="no access to store 'ops'"):
        reader.check("memory_search", "ops")
    with pytest.raises(AccessDenied, match="read-only"):
        reader.check("memory_write", "team")
    WRITER.caller().check("memory_forget", "ops")
    LOCAL_CALLER.check("memory_forget", "anything")


def test_an_anonymous_caller_may_only_check_health() -> None:
    anonymous = Caller("anonymous", frozenset(), write=False, anonymous=True)
    with pytest.raises(AccessDenied, match="needs a bearer token"):
        anonymous.check("memory_search", "default")


@pytest.mark.parametrize(
    ("host", "loopback"), [("127.0.0.1", True), ("localhost", True), ("::1", True), ("0.0.0.0", False)]
)
def test_loopback_detection(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_binding_beyond_loopback_without_tokens_is_refused() -> None:
    with pytest.raises(ValueError, match=r"refusing to listen on 0\.0\.0\.0"):
        check_bind("0.0.0.0", TokenRegistry([]))
    check_bind("0.0.0.0", TokenRegistry([READER]))
    check_bind("127.0.0.1", TokenRegistry([]))


async def _whoami(request: Request) -> JSONResponse:
    caller = caller_from_scope(request.scope)
    body = await request.body()
    return JSONResponse({"caller": caller.name if caller else None, "echo": json.loads(body or b"null")})


def _client(registry: TokenRegistry) -> httpx.AsyncClient:
    inner = Starlette(
        routes=[Route("/mcp", _whoami, methods=["POST"]), Route("/health", _whoami, methods=["POST"])]
    )
    app = BearerAuthMiddleware(inner, registry, open_paths={"/health"})
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def _call(tool: str) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {}}}


@pytest.mark.anyio
async def test_middleware_rejects_missing_and_unknown_tokens_with_401() -> None:
    async with _client(TokenRegistry([READER])) as client:
        missing = await client.post("/mcp", json=_call("memory_search"))
        wrong = await client.post(
            "/mcp", json=_call("memory_health"), headers={"Authorization": "Bearer nope"}
        )
        malformed = await client.post(
            "/mcp", json=_call("memory_search"), headers={"Authorization": "Basic x"}
        )
    for response in (missing, wrong, malformed):
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
    assert missing.json()["error"] == "invalid_request"
    assert wrong.json()["error"] == "invalid_token"


@pytest.mark.anyio
async def test_middleware_passes_the_caller_and_the_untouched_body() -> None:
    async with _client(TokenRegistry([READER])) as client:
        response = await client.post(
            "/mcp", json=_call("memory_search"), headers={"Authorization": "Bearer read-secret"}
        )
    assert response.status_code == 200
    assert response.json() == {"caller": "reader", "echo": _call("memory_search")}


@pytest.mark.anyio
async def test_middleware_lets_anonymous_health_and_handshake_through() -> None:
    handshake = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    async with _client(TokenRegistry([READER])) as client:
        health = await client.post("/mcp", json=_call("memory_health"))
        hello = await client.post("/mcp", json=handshake)
        batch = await client.post("/mcp", json=[_call("memory_health"), _call("memory_write")])
        liveness = await client.post("/health", json={})
    assert health.status_code == 200 and health.json()["caller"] == "anonymous"
    assert health.json()["echo"] == _call("memory_health")
    assert hello.status_code == 200
    assert batch.status_code == 401
    assert liveness.status_code == 200 and liveness.json()["caller"] is None


@pytest.mark.anyio
async def test_without_tokens_every_request_is_the_local_caller() -> None:
    async with _client(TokenRegistry([])) as client:
        response = await client.post("/mcp", json=_call("memory_write"))
    assert response.json()["caller"] == "local"


@pytest.mark.anyio
async def test_anonymous_body_nested_past_the_parsers_stack_is_401_not_500() -> None:
    deep = b"[" * 1500 + b"]" * 1500
    async with _client(TokenRegistry([READER])) as client:
        response = await client.post("/mcp", content=deep, headers={"content-type": "application/json"})
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_request"
