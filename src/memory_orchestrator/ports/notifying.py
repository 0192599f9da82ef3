"""A backend decorator that calls back after every write, so caches over the store can be cleared.

Every write method (``remember``, ``remember_many``, ``link``, ``forget``) calls ``on_write`` once it
returns or fails (a failed write may still have changed the store); reads pass straight through.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self

from memory_orchestrator.ports.backend import MemoryBackend, remember_all
from memory_orchestrator.ports.records import (
    BackendHealth,
    Capabilities,
    Change,
    Edge,
    EdgeType,
    Filters,
    Hit,
    MemoryRecord,
    Neighbor,
    NewMemory,
    RecallQuery,
    WriteResult,
)


class NotifyingBackend:
    """Wraps a backend; ``on_write()`` runs after each write through it."""

    def __init__(self, inner: MemoryBackend, on_write: Callable[[], None]) -> None:
        self.inner = inner
        self.name = inner.name
        self._on_write = on_write

    def __getattr__(self, attribute: str) -> Any:
        # Backend-specific extras (a path, ranked neighbours, vectors) stay reachable.
        return getattr(self.inner, attribute)

    @property
    def capabilities(self) -> Capabilities:
        """The wrapped backend's capabilities."""
        return self.inner.capabilities

    async def open(self) -> None:
        """Open the wrapped backend."""
        await self.inner.open()

    async def aclose(self) -> None:
        """Close the wrapped backend."""
        await self.inner.aclose()

    async def __aenter__(self) -> Self:
        """Open and return the wrapper."""
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close."""
        await self.aclose()

    async def remember(self, memory: NewMemory) -> WriteResult:
        """A write: notifies."""
        try:
            return await self.inner.remember(memory)
        finally:
            self._on_write()

    async def remember_many(self, memories: Sequence[NewMemory]) -> list[WriteResult]:
        """A write (the inner backend's bulk path when it has one): notifies."""
        try:
            return await remember_all(self.inner, memories)
        finally:
            self._on_write()

    async def link(self, edge: Edge) -> Edge:
        """A write: notifies."""
        try:
            return await self.inner.link(edge)
        finally:
            self._on_write()

    async def forget(self, memory_id: str) -> None:
        """A write: notifies."""
        try:
            await self.inner.forget(memory_id)
        finally:
            self._on_write()

    async def recall(self, query: RecallQuery) -> list[Hit]:
        """A read."""
        return await self.inner.recall(query)

    async def search(
        self, text: str, *, limit: int = 10, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[Hit]:
        """A read."""
        return await self.inner.search(text, limit=limit, filters=filters, now=now)

    async def neighbors(
        self,
        ids: Sequence[str],
        *,
        edge_types: Collection[EdgeType] | None = None,
        hops: int = 1,
        limit: int = 100,
        filters: Filters = Filters(),
    ) -> list[Neighbor]:
        """A read."""
        return await self.inner.neighbors(ids, edge_types=edge_types, hops=hops, limit=limit, filters=filters)

    async def get(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """A read."""
        return await self.inner.get(ids)

    async def recent(
        self, *, limit: int = 20, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[MemoryRecord]:
        """A read."""
        return await self.inner.recent(limit=limit, filters=filters, now=now)

    async def changes(self, since: datetime, *, limit: int = 100) -> list[Change]:
        """A read."""
        return await self.inner.changes(since, limit=limit)

    async def known_entities(self, *, limit: int = 1000) -> list[str]:
        """A read."""
        return await self.inner.known_entities(limit=limit)

    async def health(self, *, probe: bool = False) -> BackendHealth:
        """Health (a probe writes and forgets a memory: notifies)."""
        try:
            return await self.inner.health(probe=probe)
        finally:
            if probe:
                self._on_write()
