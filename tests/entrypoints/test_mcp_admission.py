"""``[server] concurrent_calls``: a server process runs at most that many tool calls at once, lets the
others in as calls finish, and a call whose deadline passes while it waits answers "busy" without
having run at all."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.entrypoints.config.settings import Settings
from memory_orchestrator.entrypoints.mcp.launch import server_options
from memory_orchestrator.entrypoints.mcp.server import build_server
from memory_orchestrator.entrypoints.mcp.state import ServerOptions
from memory_orchestrator.ports import FixedClock

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@dataclass
class Handle:
    backend: Any
    orchestrator: Orchestrator


def _server(backend: InMemoryBackend, options: ServerOptions) -> Any:
    @asynccontextmanager
    async def opener(store: str) -> AsyncIterator[Handle]:
        async with backend:
            yield Handle(backend, Orchestrator(backend, clock=FixedClock(NOW)))

    return build_server(opener, options, clock=FixedClock(NOW))


def _counting(method: Callable[..., Awaitable[Any]], seen: dict[str, int]) -> Callable[..., Awaitable[Any]]:
    async def counted(*args: Any, **kwargs: Any) -> Any:
        seen["now"] += 1
        seen["peak"] = max(seen["peak"], seen["now"])
        try:
            return await method(*args, **kwargs)
        finally:
            seen["now"] -= 1

    return counted


@pytest.mark.anyio
async def test_at_most_concurrent_calls_run_at_once_and_every_call_is_answered() -> None:
    backend = InMemoryBackend(clock=FixedClock(NOW))
    seen = {"now": 0, "peak": 0}
    async with Client(_server(backend, ServerOptions(read_timeout_s=10.0, concurrent_calls=2))) as client:
        queries = ["Kafka lag", "disk latency", "pager rota", "invoice", "vendor", "backup"]
        for topic in queries:
            written = await client.call_tool("memory_write", {"content": f"{topic} came up today"})
            assert not written.is_error
        backend.search = _counting(backend.search, seen)  # type: ignore[method-assign]
        backend.delay("search", 0.1)
        results = await asyncio.gather(*(client.call_tool("memory_search", {"query": q}) for q in queries))
    assert all(not result.is_error for result in results)
    assert seen["peak"] == 2  # six calls at once, two in the store at a time


@pytest.mark.anyio
async def test_a_call_still_waiting_at_its_deadline_answers_busy_and_runs_nothing() -> None:
    backend = InMemoryBackend(clock=FixedClock(NOW))
    statuses: list[tuple[str, str]] = []
    options = ServerOptions(
        read_timeout_s=0.5,
        write_timeout_s=3.0,
        concurrent_calls=1,
        on_call=lambda tool, status, _seconds: statuses.append((tool, status)),
    )
    async with Client(_server(backend, options)) as client:
        assert not (await client.call_tool("memory_write", {"content": "Kafka lag came up"})).is_error
        backend.delay("remember", 30.0)  # the next write holds the only slot until its deadline
        storing = asyncio.Event()
        remember = backend.remember

        async def remembered(*args: Any, **kwargs: Any) -> Any:
            storing.set()
            return await remember(*args, **kwargs)

        backend.remember = remembered  # type: ignore[method-assign]
        writing = asyncio.create_task(client.call_tool("memory_write", {"content": "disk latency too"}))
        async with asyncio.timeout(2.0):
            await storing.wait()  # the write is in the store (its duplicate search done)
        searches = backend.called("search")
        started = time.monotonic()
        waited = await client.call_tool("memory_search", {"query": "Kafka lag"})
        elapsed = time.monotonic() - started
        written = await writing
    assert waited.is_error and "busy" in waited.content[0].text  # type: ignore[union-attr]
    assert 0.4 <= elapsed <= 1.4  # its own deadline, not the write's
    assert backend.called("search") == searches  # nothing of the waiting call ran
    assert written.is_error and "did not answer within 3 s" in written.content[0].text  # type: ignore[union-attr]
    # the metrics and the log line tell a call turned away from one the store failed to answer
    assert ("memory_search", "ServerBusy") in statuses and ("memory_write", "CallTimedOut") in statuses


def test_the_setting_reaches_the_server_and_bounds_are_checked(isolated: Path) -> None:
    settings = Settings.model_validate({"server": {"concurrent_calls": 3}})
    assert server_options(settings, default_store=None, http=True).concurrent_calls == 3
    assert server_options(Settings(), default_store=None, http=True).concurrent_calls == 16
    with pytest.raises(ValueError):
        Settings.model_validate({"server": {"concurrent_calls": 0}})
