"""`orchestrator serve` as a real subprocess: a scripted stdio session over SQLite, and HTTP with auth."""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from memory_orchestrator.entrypoints.mcp.auth import hash_token
from memory_orchestrator.evaluation.startup import orchestrator_command, settings_free_environment
from services.processes import free_port, stop

pytestmark = pytest.mark.slow

ORCHESTRATOR = orchestrator_command()
READY_TIMEOUT_S = 30.0


def _environment(data_dir: Path, config: Path | None = None) -> dict[str, str]:
    env = settings_free_environment()
    env["ORCHESTRATOR_DATA_DIR"] = str(data_dir)
    env["ORCHESTRATOR_BACKEND__NAME"] = "sqlite"
    if config is not None:
        env["ORCHESTRATOR_CONFIG"] = str(config)
    return env


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text  # type: ignore[union-attr]
    assert result.structured_content is not None
    return result.structured_content


async def refused(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    return str(result.content[0].text)  # type: ignore[union-attr]


@asynccontextmanager
async def stdio_session(data_dir: Path, errlog: Any) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=ORCHESTRATOR, args=["serve"], env=_environment(data_dir))
    async with Client(stdio_client(params, errlog=errlog)) as client:
        yield client


@pytest.mark.anyio
async def test_scripted_stdio_session_over_sqlite(tmp_path: Path) -> None:
    with (tmp_path / "stderr.log").open("w+") as errlog:
        async with stdio_session(tmp_path, errlog) as client:
            tools = await client.list_tools()
            cause = await ok(
                client, "memory_write", {"content": "Laptops have no Docker", "entities": ["Docker"]}
            )
            decision = await ok(
                client,
                "memory_write",
                {
                    "content": "We decided SQLite is the default backend",
                    "category": "decision",
                    "entities": ["SQLite"],
                    "links": [{"target": cause["id"], "type": "causal"}],
                },
            )
            found = await ok(client, "memory_search", {"query": "which backend is the default?"})
            packed = await ok(
                client, "memory_context", {"query": "default backend", "response_budget": {"max_chars": 300}}
            )
            expanded = await ok(client, "memory_expand", {"seeds": [decision["id"]]})
            explained = await ok(client, "memory_explain", {"trace_id": found["trace_id"]})
            health = await ok(client, "memory_health", {"probe": True})
            listed = await ok(client, "memory_stores", {})
        errlog.seek(0)
        log_lines = [json.loads(line) for line in errlog if line.startswith("{")]
    assert len(tools.tools) == 13
    assert [(row["store"], row["memory_count"]) for row in listed["stores"]] == [("default", 2)]
    assert decision["action"] == "added"
    assert found["items"][0]["memory_id"] == decision["id"]
    assert packed["chars"] <= 300 and decision["id"] in packed["context_block"]
    assert cause["id"] in [item["memory_id"] for item in expanded["items"]]
    assert explained["trace"]["trace_id"] == found["trace_id"]
    assert health["status"] in {"ok", "degraded"} and health["backend"] == "sqlite"
    calls = [line for line in log_lines if line.get("event") == "tool_call"]
    assert [line["tool"] for line in calls][:2] == ["memory_write", "memory_write"]
    assert all(line["status"] == "ok" and "latency_ms" in line for line in calls)
    assert not any("default backend" in json.dumps(line) for line in calls)  # queries are not logged


@pytest.mark.anyio
async def test_session_tools_over_stdio_and_sqlite(tmp_path: Path) -> None:
    with (tmp_path / "stderr.log").open("w+") as errlog:
        async with stdio_session(tmp_path, errlog) as client:
            cause = await ok(
                client, "memory_write", {"content": "CI minutes ran out in March", "entities": ["CI"]}
            )
            decision = await ok(
                client,
                "memory_write",
                {"content": "We decided to cache wheels in CI", "category": "decision", "entities": ["CI"]},
            )
            await ok(
                client, "memory_link", {"source": cause["id"], "target": decision["id"], "type": "causal"}
            )
            saved = await ok(
                client,
                "memory_session_summary",
                {"session_id": "ci-1", "decisions": ["Keep the wheel cache for 7 days"], "entities": ["CI"]},
            )
            why = await ok(client, "memory_why", {"question": "why do we cache wheels in CI?"})
            changes = await ok(client, "memory_changes", {"since": "1 hour", "entity": "CI"})
            since_session = await ok(client, "memory_changes", {"since": "last session"})
            context = await ok(client, "memory_context", {"scope": "CI", "response_budget": {"max_items": 5}})
    assert saved["written"][0]["action"] == "added"
    assert [(link["role"], link["memory_id"]) for link in why["chain"]][:2] == [
        ("cause", cause["id"]),
        ("decision", decision["id"]),
    ]
    assert {cause["id"], decision["id"], saved["written"][0]["id"]} <= set(changes["added"])
    assert since_session["added"] == []
    assert saved["written"][0]["id"] in [item["memory_id"] for item in context["items"]]


def _wait_ready(process: subprocess.Popen[bytes], url: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(
                f"server exited early: {process.stderr.read().decode() if process.stderr else ''}"
            )
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError("server did not become ready in time")


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as folder:
        data_dir = Path(folder)
        config = data_dir / "orchestrator.toml"
        writer = (
            f'name = "writer", sha256 = "{hash_token("w-secret")}", stores = ["default", "ops"], write = true'
        )
        reader = f'name = "reader", sha256 = "{hash_token("r-secret")}", stores = ["default"], write = false'
        nobody = f'name = "nobody", sha256 = "{hash_token("n-secret")}", stores = []'
        config.write_text(f"[auth]\ntokens = [{{ {writer} }}, {{ {reader} }}, {{ {nobody} }}]\n")
        port = free_port()
        process = subprocess.Popen(
            [ORCHESTRATOR, "serve", "--http", "--host", "127.0.0.1", "--port", str(port)],
            env=_environment(data_dir, config),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            _wait_ready(process, f"http://127.0.0.1:{port}/health")
            yield f"http://127.0.0.1:{port}"
        finally:
            stop(process)


@asynccontextmanager
async def http_session(base: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30.0) as http:
        transport = streamable_http_client(f"{base}/mcp", http_client=http, terminate_on_close=False)
        async with Client(transport) as client:
            yield client


def _rpc(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def test_http_workers_share_the_port_and_stop_with_the_server(tmp_path: Path) -> None:
    port = free_port()
    env = {**_environment(tmp_path), "ORCHESTRATOR_HTTP__WORKERS": "2"}
    process = subprocess.Popen(
        [ORCHESTRATOR, "serve", "--http", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(process, f"{base}/health")
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        answers = [httpx.post(f"{base}/mcp", json=body, headers=headers) for _ in range(8)]
        assert all(answer.status_code == 200 for answer in answers)
        children = subprocess.run(
            ["pgrep", "-P", str(process.pid)], capture_output=True, text=True, check=False
        ).stdout.split()
        assert len(children) == 2  # two worker processes under the supervising one
        assert process.stderr is not None
        first = process.stderr.readline().decode()
        assert first.startswith("orchestrator serve: MCP over streamable HTTP at ")
        assert (
            f"http://127.0.0.1:{port}/mcp" in first and "auth: no tokens" in first and "2 processes" in first
        )
    finally:
        process.terminate()
        process.wait(timeout=15)
    time.sleep(0.5)
    assert all(not Path(f"/proc/{pid}").exists() for pid in children)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{base}/health", timeout=2.0)


def test_well_known_paths_are_not_found_so_clients_do_not_start_oauth(http_server: str) -> None:
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server/mcp"):
        assert httpx.get(f"{http_server}{path}").status_code == 404
        assert httpx.get(f"{http_server}{path}", headers={"Authorization": "Bearer guess"}).status_code == 404


def test_http_refuses_missing_and_unknown_tokens(http_server: str) -> None:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    body = _rpc("memory_search", {"query": "anything"})
    missing = httpx.post(f"{http_server}/mcp", json=body, headers=headers)
    wrong = httpx.post(f"{http_server}/mcp", json=body, headers={**headers, "Authorization": "Bearer guess"})
    assert missing.status_code == 401
    assert wrong.status_code == 401


@pytest.mark.anyio
async def test_http_writer_writes_and_searches(http_server: str) -> None:
    async with http_session(http_server, "w-secret") as client:
        written = await ok(
            client, "memory_write", {"content": "HTTP mode is stateless", "entities": ["HTTP"]}
        )
        found = await ok(client, "memory_search", {"query": "is HTTP mode stateless?"})
        in_ops = await ok(client, "memory_write", {"content": "Ops store note", "store": "ops"})
    assert found["items"][0]["memory_id"] == written["id"]
    assert in_ops["store"] == "ops"


@pytest.mark.anyio
async def test_http_reader_cannot_write_nor_read_other_stores(http_server: str) -> None:
    async with http_session(http_server, "r-secret") as client:
        write = await refused(client, "memory_write", {"content": "sneaky"})
        other = await refused(client, "memory_search", {"query": "note", "store": "ops"})
        allowed = await client.call_tool("memory_search", {"query": "zebra unicorn"})
    assert "read-only" in write
    assert "no access to store 'ops'" in other
    # Reading its own store is an answer (possibly empty), never "not authorised".
    assert not allowed.is_error
    assert allowed.structured_content is not None and allowed.structured_content["store"] == "default"


@pytest.mark.anyio
async def test_http_memory_stores_lists_each_token_s_stores_and_nothing_without_a_grant(
    http_server: str,
) -> None:
    async with http_session(http_server, "w-secret") as client:
        await ok(client, "memory_write", {"content": "Stores listing note", "store": "ops"})
        writer = await ok(client, "memory_stores", {})
    async with http_session(http_server, "r-secret") as client:
        reader = await ok(client, "memory_stores", {})
    async with http_session(http_server, "n-secret") as client:
        nobody = await ok(client, "memory_stores", {})
        refused_read = await refused(client, "memory_search", {"query": "note"})
    async with http_session(http_server, None) as client:
        with pytest.raises(MCPError):  # no token: 401 before any tool runs
            await client.call_tool("memory_stores", {})
    by_store = {row["store"]: row for row in writer["stores"]}
    assert set(by_store) == {"default", "ops"} and by_store["ops"]["write"] is True
    assert by_store["ops"]["memory_count"] >= 1
    assert [(row["store"], row["write"]) for row in reader["stores"]] == [("default", False)]
    assert nobody["stores"] == [] and "not authorised" in nobody["note"]
    assert "no access to store 'default'" in refused_read


@pytest.mark.anyio
async def test_http_health_needs_no_token(http_server: str) -> None:
    async with http_session(http_server, None) as client:
        health = await ok(client, "memory_health", {})
        with pytest.raises(MCPError):  # the HTTP layer answers 401 before any tool runs
            await client.call_tool("memory_search", {"query": "x"})
    async with http_session(http_server, "r-secret") as client:
        detailed = await ok(client, "memory_health", {})
    assert health["status"] in {"ok", "degraded"}
    assert health["memory_count"] is None
    # Statuses only without a token: no paths, versions or driver text (a token sees them).
    assert health["version"] == "" and all(check["detail"] == "" for check in health["checks"])
    assert [check["name"] for check in health["checks"]] == [check["name"] for check in detailed["checks"]]
    assert any(check["detail"] for check in detailed["checks"]) and detailed["version"]


def test_http_refuses_to_start_beyond_loopback_without_tokens(tmp_path: Path) -> None:
    result = subprocess.run(
        [ORCHESTRATOR, "serve", "--http", "--host", "0.0.0.0", "--port", str(free_port())],
        env=_environment(tmp_path),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert b"refusing to listen on 0.0.0.0" in result.stderr
    assert result.stdout == b""
