"""memory_stores: the stores a caller may use; empty means not authorised, never an empty store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.adapters.sqlite import existing_stores
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.entrypoints.config.settings import load_settings
from memory_orchestrator.entrypoints.mcp import schemas as s
from memory_orchestrator.entrypoints.mcp.auth import Caller, TokenGrant, hash_token
from memory_orchestrator.entrypoints.mcp.launch import server_options, store_exists, store_opener
from memory_orchestrator.entrypoints.mcp.server import build_server
from memory_orchestrator.entrypoints.mcp.state import ServerOptions, ServerState, StorePool, ToolCall
from memory_orchestrator.entrypoints.mcp.store_listing import store_listing, stores
from memory_orchestrator.ports import AccessDenied, NewMemory, SystemClock

pytestmark = pytest.mark.anyio


class _Handle:
    def __init__(self, backend: InMemoryBackend) -> None:
        self.backend = backend
        self.orchestrator = Orchestrator(backend)


def _state(contents: dict[str, int]) -> ServerState:
    """A server state over in-memory stores holding ``contents[name]`` memories each."""

    @asynccontextmanager
    async def opener(name: str) -> AsyncIterator[_Handle]:
        backend = InMemoryBackend()
        async with backend:
            for number in range(contents.get(name, 0)):
                await backend.remember(NewMemory(f"note {number} of {name}"))
            yield _Handle(backend)

    pool = StorePool(opener, exists=lambda name: name in contents)
    return ServerState(pool, ServerOptions(), SystemClock(), listing=lambda: sorted(contents))


async def _listed(caller: Caller, contents: dict[str, int]) -> dict[str, Any]:
    state = _state(contents)
    try:
        output = await stores(s.StoresInput(), ToolCall("memory_stores", caller, "default", state))
    finally:
        await state.pool.aclose()
    return output.model_dump()


async def test_a_token_sees_the_stores_it_was_granted_with_its_rights_and_counts() -> None:
    grant = TokenGrant("ci", hash_token("secret"), stores=("ops", "team", "later"), write=False)
    listed = await _listed(grant.caller(), {"default": 1, "ops": 2, "team": 0, "private": 5})
    assert listed["caller"] == "ci" and listed["note"] == ""
    assert [(row["store"], row["memory_count"], row["exists"]) for row in listed["stores"]] == [
        ("later", None, False),  # granted but not created yet
        ("ops", 2, True),
        ("team", 0, True),  # an empty store is listed, with 0
    ]
    assert all(row["read"] and not row["write"] for row in listed["stores"])


async def test_a_token_with_no_store_gets_an_empty_list_and_is_told_it_is_not_authorised() -> None:
    nobody = TokenGrant("nobody", hash_token("x"), stores=(), write=True).caller()
    listed = await _listed(nobody, {"default": 3})
    assert listed["stores"] == []
    assert listed["note"] == "not authorised: token 'nobody' may read or write no store"


async def test_a_wildcard_token_sees_every_existing_store_and_anonymous_callers_none() -> None:
    everything = TokenGrant("admin", hash_token("a"), stores=("*",), write=True).caller()
    listed = await _listed(everything, {"default": 1, "ops": 2})
    assert [(row["store"], row["memory_count"], row["write"]) for row in listed["stores"]] == [
        ("default", 1, True),
        ("ops", 2, True),
    ]
    anonymous = Caller("anonymous", frozenset(), write=False, anonymous=True)
    with pytest.raises(AccessDenied, match="needs a bearer token"):
        await _listed(anonymous, {"default": 1})


@pytest.mark.usefixtures("isolated")
async def test_local_mode_over_sqlite_lists_the_stores_in_the_data_folder() -> None:
    settings = load_settings()
    options = server_options(settings, default_store=None, http=False)
    server = build_server(
        store_opener(settings),
        options,
        exists=store_exists(settings, options.default_store),
        listing=store_listing(settings),
    )
    async with Client(server) as client:
        for content, store in [("first ops note", "ops"), ("second ops note", "ops"), ("home", "default")]:
            result = await client.call_tool("memory_write", {"content": content, "store": store})
            assert not result.is_error
        missing = await client.call_tool("memory_search", {"query": "x", "store": "missing"})
        assert missing.is_error  # a read of an unknown store creates nothing, so it is not listed
        listed = await client.call_tool("memory_stores", {})
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert listed.structured_content is not None
    rows = listed.structured_content["stores"]
    assert [(row["store"], row["memory_count"], row["write"]) for row in rows] == [
        ("default", 1, True),
        ("ops", 2, True),
    ]
    hints = tools["memory_stores"].annotations
    assert hints is not None and hints.read_only_hint and hints.idempotent_hint
    assert tools["memory_stores"].input_schema["properties"] == {}


def test_sqlite_stores_are_found_by_file_in_both_layouts(tmp_path: Path) -> None:
    folder = tmp_path / "stores"
    folder.mkdir()
    for name in ("default.db", "ops.db", "notes.txt", ".hidden.db"):
        (folder / name).write_text("")
    assert existing_stores(f"{folder}/") == ["default", "ops"]
    single = tmp_path / "memories.db"
    for name in ("memories.db", "memories.team.db", "memories.db-wal", "other.db"):
        (tmp_path / name).write_text("")
    assert existing_stores(single) == ["default", "team"]
    assert existing_stores(tmp_path / "absent" / "memories.db") == []


def test_mnemon_stores_are_its_store_folders_with_a_database(tmp_path: Path) -> None:
    from memory_orchestrator.adapters.mnemon import existing_stores as mnemon_stores

    for name, database in (("default", True), ("ops", True), ("empty", False), (".cache", True)):
        (tmp_path / "data" / name).mkdir(parents=True)
        if database:
            (tmp_path / "data" / name / "mnemon.db").write_text("")
    assert mnemon_stores({"data_dir": str(tmp_path)}) == ["default", "ops"]
    assert mnemon_stores({"data_dir": str(tmp_path / "absent")}) == []
