"""What the MCP server holds while it runs, and what one tool call sees.

- :class:`StorePool`: one opened store (backend + orchestrator) per name, opened on first use.
- :class:`ServerState`: the pool, the options, the clock and which store each trace belongs to.
- :class:`ToolCall`: caller, store and state of one call, plus the fields of its log line.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import anyio

from memory_orchestrator.entrypoints.auth import Caller
from memory_orchestrator.ports import Clock, InvalidRequest, MemoryBackend

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


class StorePool:
    """One opened store per name, opened on first use and closed when the server stops."""

    def __init__(self, opener: StoreOpener, stack: AsyncExitStack, *, max_open: int = 32) -> None:
        self._opener = opener
        self._stack = stack
        self._max_open = max_open
        self._handles: dict[str, StoreHandle] = {}
        self._lock = anyio.Lock()

    async def get(self, store: str) -> StoreHandle:
        """The opened store ``store`` (opening it now if needed)."""
        handle = self._handles.get(store)
        if handle is not None:
            return handle
        async with self._lock:
            if store not in self._handles:
                if len(self._handles) >= self._max_open:
                    raise InvalidRequest(f"at most {self._max_open} stores can be open at once")
                self._handles[store] = await self._stack.enter_async_context(self._opener(store))
            return self._handles[store]


@dataclass
class ServerState:
    """What the server's lifespan holds for every request."""

    pool: StorePool
    options: ServerOptions
    clock: Clock
    #: trace_id -> store, so a trace is only shown to callers who may read its store.
    trace_origins: OrderedDict[str, str] = field(default_factory=OrderedDict)

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

    async def handle(self) -> StoreHandle:
        """The opened store of this call."""
        return await self.state.pool.get(self.store)

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
            omitted = sum(int(e.get("omitted", 0)) for e in entries if isinstance(e, dict) and "omitted" in e)
            counts[name] = len(entries) + omitted - (1 if omitted else 0)
    return counts


def public_warning(text: str) -> str:
    """A warning with the backend's own error messages cut out (they can name paths or queries)."""
    return _ERROR_DETAIL.sub(r"(\1)", text)
