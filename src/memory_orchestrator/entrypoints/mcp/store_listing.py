"""``memory_stores``: the stores a caller may read or write, with their memory counts.

A token lists the stores its ``[auth]`` grant names (whether or not they exist yet); a token granted
``*``, and the local caller (stdio, or HTTP without tokens on loopback), list the stores that exist in
the backend's data folder plus the default store. An empty list therefore always means "this caller
may use no store", never "the store is empty" (an empty store is listed with ``memory_count`` 0).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from memory_orchestrator.entrypoints.mcp import outputs as o
from memory_orchestrator.entrypoints.mcp import schemas as s
from memory_orchestrator.entrypoints.mcp.auth import ALL_STORES
from memory_orchestrator.entrypoints.mcp.state import ToolCall
from memory_orchestrator.ports import AccessDenied, NotFound, OrchestratorError

if TYPE_CHECKING:
    from memory_orchestrator.entrypoints.config.settings import Settings

LOG = logging.getLogger("memory_orchestrator.mcp")
#: Names of the stores that exist (read from the data folder at each call).
StoreListing = Callable[[], list[str]]
#: Stores counted per call: each count opens the store, and the call must answer in read_timeout_s.
MAX_COUNTED = 16
#: Share of the call's read deadline spent counting; what is not counted by then has no count.
COUNT_SHARE = 0.6


def store_listing(settings: Settings) -> StoreListing:
    """The stores that exist for the configured backend: SQLite files, Mnemon store folders; other
    backends cannot list their stores without opening them, so only the default store is known."""
    name = settings.backend.name

    def existing() -> list[str]:
        try:
            if name == "sqlite":
                from memory_orchestrator.adapters.sqlite import existing_stores, store_path

                path = settings.backend_options("sqlite")["path"]
                traces = settings.trace_path()
                return [store for store in existing_stores(path) if store_path(path, store) != traces]
            if name == "mnemon":
                from memory_orchestrator.adapters.mnemon import existing_stores as mnemon_stores

                return mnemon_stores(settings.backend_options("mnemon"))
        except (OSError, OrchestratorError):
            LOG.warning("stores of the %s backend could not be listed", name, exc_info=True)
        return []

    return existing


async def stores(inp: s.StoresInput, call: ToolCall) -> o.StoresOutput:
    """memory_stores: never refused for a token (an unauthorised one gets an empty list and a note)."""
    caller = call.caller
    if caller.anonymous:
        raise AccessDenied("not authorised: memory_stores needs a bearer token")
    state = call.state
    if ALL_STORES in caller.stores:
        listing = state.listing() if state.listing is not None else []
        names = sorted({*listing, *state.pool.open_stores, state.options.default_store})
    else:
        names = sorted(caller.stores)
    # Counting stops early enough for the answer to beat the call's deadline (a hanging store).
    deadline = asyncio.get_running_loop().time() + COUNT_SHARE * state.options.read_timeout_s
    rows, warnings = [], []
    for position, name in enumerate(names):
        row = o.StoreAccessOutput(store=name, read=True, write=caller.write, exists=state.pool.exists(name))
        if row.exists and position < MAX_COUNTED:
            problem = await _count(call, row, deadline)
            if problem:
                warnings.append(f"store {name!r}: {problem}")
        rows.append(row)
    call.log["results"] = len(rows)
    note = "" if rows else f"not authorised: token {caller.name!r} may read or write no store"
    return o.StoresOutput(caller=caller.name, stores=rows, note=note, warnings=warnings)


async def _count(call: ToolCall, row: o.StoreAccessOutput, deadline: float) -> str:
    """Fill ``row.memory_count`` (or ``row.exists``); returns what went wrong, or ``""``."""
    pool = call.state.pool
    try:
        async with asyncio.timeout_at(deadline):
            handle = await pool.acquire(row.store, create=False)
            try:
                row.memory_count = (await handle.backend.health(probe=False)).memory_count
            finally:
                pool.release(row.store)
    except NotFound:
        row.exists = False
    except TimeoutError:
        return "not counted in time"
    except Exception:  # one unreadable store must not hide the others; the cause goes to the log
        LOG.warning("store %s could not be counted", row.store, exc_info=True)
        return "could not be counted"
    return ""
