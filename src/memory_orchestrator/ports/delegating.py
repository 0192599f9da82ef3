"""A backend that hands every call to another one: the base of backend decorators.

A decorator (retries, write notifications, ...) subclasses it and overrides only the calls it
changes; everything else, backend-specific extras included, reaches the wrapped backend unchanged.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self

from memory_orchestrator.ports.backend import MemoryBackend, link_all, remember_all
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


class DelegatingBackend:
    """Passes every ``MemoryBackend`` call to ``inner``."""

    def __init__(self, inner: MemoryBackend) -> None:
        self.inner = inner
        self.name = inner.name

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
        """Store one memory."""
        return await self.inner.remember(memory)

    async def remember_many(self, memories: Sequence[NewMemory]) -> list[WriteResult]:
        """Store a batch: the inner backend's bulk path when it has one."""
        return await remember_all(self.inner, memories)

    async def link(self, edge: Edge) -> Edge:
        """Create an edge."""
        return await self.inner.link(edge)

    async def link_many(self, edges: Sequence[Edge]) -> list[Edge]:
        """Create edges: the inner backend's bulk path when it has one (all or none only then)."""
        return await link_all(self.inner, edges)

    async def forget(self, memory_id: str) -> None:
        """Forget a memory."""
        await self.inner.forget(memory_id)

    async def recall(self, query: RecallQuery) -> list[Hit]:
        """The backend's own retrieval."""
        return await self.inner.recall(query)

    async def search(
        self, text: str, *, limit: int = 10, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[Hit]:
        """Keyword retrieval."""
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
        """Linked memories."""
        return await self.inner.neighbors(ids, edge_types=edge_types, hops=hops, limit=limit, filters=filters)

    async def get(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """Memories by id."""
        return await self.inner.get(ids)

    async def recent(
        self, *, limit: int = 20, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[MemoryRecord]:
        """Newest memories."""
        return await self.inner.recent(limit=limit, filters=filters, now=now)

    async def changes(self, since: datetime, *, limit: int = 100) -> list[Change]:
        """Changes since a moment."""
        return await self.inner.changes(since, limit=limit)

    async def known_entities(self, *, limit: int = 1000) -> list[str]:
        """Entity names."""
        return await self.inner.known_entities(limit=limit)

    async def health(self, *, probe: bool = False) -> BackendHealth:
        """Readiness of the wrapped backend."""
        return await self.inner.health(probe=probe)
