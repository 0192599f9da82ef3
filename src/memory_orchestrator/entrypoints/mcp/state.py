"""What the MCP server holds while it runs, and what one tool call sees.

- :class:`StorePool`: one opened store (backend + orchestrator) per name, opened on first use.
- :class:`ServerState`: the pool, the options, the clock, the queue of tool calls (``admission``)
  and which store each trace belongs to.
- :class:`ToolCall`: caller, store and state of one call, plus the fields of its log line.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import anyio

from memory_orchestrator.domain.trace import full_length
from memory_orchestrator.entrypoints.mcp.admission import Admission
from memory_orchestrator.entrypoints.mcp.auth import Caller
from memory_orchestrator.ports import BackendUnavailable, Clock, MemoryBackend, NotFound

_MAX_TRACE_ORIGINS = 10_000
#: "(BackendUnavailable: <driver message>)" inside a pipeline warning.
_ERROR_DETAIL = re.compile(r"\((\w+): [^()]*(?:\([^()]*\)[^()]*)*\)")


class StoreHandle(Protocol):
    """An opened store: its backend and the orchestrator over it (bootstrap's ``Runtime`` is one)."""

    @property
    def backend(self) -> MemoryBackend:
        """The opened backend."""
        ...

    @property
    def orchestrator(self) -> Any:
        """The domain Orchestrator over ``backend``."""
        ...


#: Opens the named store; entered once per store, exited at shutdown.
StoreOpener = Callable[[str], AbstractAsyncContextManager[StoreHandle]]


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """What the tools need beyond the stores."""

    default_store: str = "default"
    #: Log queries and contents (trace verbosity ``full``); off by default.
    log_contents: bool = False
    #: Offer memory_changes / memory_why / memory_session_summary.
    session_tools: bool = True
    #: HTTP mode: a request without an authenticated caller in its scope is refused.
    require_http_caller: bool = False
    #: A tool call that takes longer answers "unavailable" (reads / writes).
    read_timeout_s: float = 2.0
    write_timeout_s: float = 10.0
    #: Tool calls of this process that run at once; the others wait their turn, in arrival order
    #: (the wait counts toward their deadline).
    concurrent_calls: int = 16
    #: Told of every tool call as (tool, status: ``ok`` or the error's class name, seconds): metrics.
    on_call: Callable[[str, str, float], None] | None = None


#: Says whether a store already exists (reads of a missing one are refused instead of creating it).
StoreExists = Callable[[str], bool]


class StorePool:
    """Opened stores by name: opened on first use, at most ``max_open`` at once.

    When the limit is reached the least recently used store that no call is using is closed, so naming
    many stores never locks the server out of any store. A read of a store that does not exist is
    refused (``NotFound``) and creates nothing; only a write creates a store.
    """

    def __init__(self, opener: StoreOpener, *, exists: StoreExists | None = None, max_open: int = 32) -> None:
        self._opener = opener
        self._exists = exists
        self._max_open = max_open
        self._open: OrderedDict[str, tuple[AbstractAsyncContextManager[StoreHandle], StoreHandle]] = (
            OrderedDict()
        )
        self._users: dict[str, int] = {}
        self._lock = anyio.Lock()

    def exists(self, store: str) -> bool:
        """Whether ``store`` exists (always true when existence cannot be told without opening it)."""
        return store in self._open or self._exists is None or self._exists(store)

    @property
    def open_stores(self) -> list[str]:
        """Names of the opened stores, least recently used first."""
        return list(self._open)

    async def acquire(self, store: str, *, create: bool) -> StoreHandle:
        """The opened store, counted as in use until :meth:`release`."""
        async with self._lock:
            if store in self._open:
                self._open.move_to_end(store)
            else:
                if not create and self._exists is not None and not self._exists(store):
                    raise NotFound(f"unknown store {store!r}")
                await self._make_room()
                opener = self._opener(store)
                self._open[store] = (opener, await opener.__aenter__())
            self._users[store] = self._users.get(store, 0) + 1
            return self._open[store][1]

    def release(self, store: str) -> None:
        """One use of ``store`` ended."""
        self._users[store] = max(0, self._users.get(store, 0) - 1)

    async def _make_room(self) -> None:
        while len(self._open) >= self._max_open:
            idle = next((name for name in self._open if not self._users.get(name)), None)
            if idle is None:
                raise BackendUnavailable(
                    f"all {self._max_open} open stores are in use; retry in a moment", backend="pool"
                )
            opener, _ = self._open.pop(idle)
            self._users.pop(idle, None)
            await opener.__aexit__(None, None, None)

    async def aclose(self) -> None:
        """Close every opened store (server shutdown)."""
        while self._open:
            _, (opener, _) = self._open.popitem(last=False)
            await opener.__aexit__(None, None, None)


@dataclass
class ServerState:
    """What the server's lifespan holds for every request."""

    pool: StorePool
    options: ServerOptions
    clock: Clock
    #: trace_id -> store, so a trace is only shown to callers who may read its store.
    trace_origins: OrderedDict[str, str] = field(default_factory=OrderedDict)
    #: Names of the stores that exist (``memory_stores``); ``None``: only open and default stores known.
    listing: Callable[[], list[str]] | None = None
    #: The calls let in at once (``options.concurrent_calls``), the others queued first come, first served.
    admission: Admission = field(init=False)

    def __post_init__(self) -> None:
        self.admission = Admission(self.options.concurrent_calls)

    def remember_trace(self, trace_id: str, store: str) -> None:
        """Record which store a trace belongs to (bounded, oldest forgotten first)."""
        if trace_id:
            self.trace_origins[trace_id] = store
            while len(self.trace_origins) > _MAX_TRACE_ORIGINS:
                self.trace_origins.popitem(last=False)


@dataclass
class ToolCall:
    """One tool invocation as a tool body sees it."""

    tool: str
    caller: Caller
    store: str
    state: ServerState
    #: Filled by the body for the per-call log line (``query``/``content`` only logged when allowed).
    log: dict[str, Any] = field(default_factory=dict)

    #: Whether the tool writes (only a write may create a store).
    writes: bool = False
    _held: StoreHandle | None = None

    async def handle(self) -> StoreHandle:
        """The opened store of this call (kept in use until :meth:`release`)."""
        if self._held is None:
            self._held = await self.state.pool.acquire(self.store, create=self.writes)
        return self._held

    def release(self) -> None:
        """The call is over: its store may be closed to make room for others."""
        if self._held is not None:
            self._held = None
            self.state.pool.release(self.store)

    def now(self) -> datetime:
        """The current moment."""
        return self.state.clock.now()

    def traced(self, trace_id: str, results: int) -> None:
        """Note a trace id and a result count for the log and for later explain calls."""
        self.state.remember_trace(trace_id, self.store)
        self.log.update(trace_id=trace_id, results=results)

    async def answer(self, orchestrator: Any, data: dict[str, Any], *, results: int) -> dict[str, Any]:
        """A pipeline result made public: store added, warnings without backend internals, and the
        trace's candidate counts noted for the log."""
        trace_id = str(data.get("trace_id", ""))
        self.traced(trace_id, results)
        try:
            self.log["candidates"] = candidate_counts(await orchestrator.trace(trace_id))
        except Exception:  # the counts are for the log only; a missing trace must not fail the call
            self.log["candidates"] = None
        warnings = [public_warning(str(text)) for text in data.get("warnings", ())]
        return {**data, "store": self.store, "warnings": warnings}


def candidate_counts(document: Mapping[str, Any]) -> dict[str, int]:
    """How many candidates each pipeline stage of a trace held (capped lists counted in full)."""
    stages = document.get("stages") or {}
    picks = {
        "retrieved": ("retrieval", "fused"),
        "expanded": ("expansion", "added"),
        "ranked": ("ranking", "items"),
    }
    counts: dict[str, int] = {}
    for name, (stage, key) in picks.items():
        entries = (stages.get(stage) or {}).get(key)
        if isinstance(entries, list):
            counts[name] = full_length(entries)
    return counts


def public_warning(text: str) -> str:
    """A warning with the backend's own error messages cut out (they can name paths or queries)."""
    return _ERROR_DETAIL.sub(r"(\1)", text)
