"""The memory backend port: what the domain needs from any store."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

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
    NeighborFloors,
    NewMemory,
    RecallQuery,
    WriteResult,
)
from memory_orchestrator.ports.scoring import Scorer


@runtime_checkable
class MemoryBackend(Protocol):
    """A graph memory store.

    Life cycle: construct (cheap, no I/O), then ``await open()`` or ``async with``; ``aclose()`` is
    idempotent. Every method raises only errors of :mod:`memory_orchestrator.ports.errors`:
    ``InvalidRequest`` for bad input (nothing is changed), ``NotFound`` for unknown ids where an id is
    required, ``BackendUnavailable`` / ``BackendRejected`` for store failures.
    """

    #: The registered name of the backend (``sqlite``, ``memory``, ``neo4j``, ``mnemon`` ...).
    name: str

    @property
    def capabilities(self) -> Capabilities:
        """What this backend does natively."""
        ...

    async def open(self) -> None:
        """Connect / create the store. Calling it twice is harmless."""
        ...

    async def aclose(self) -> None:
        """Release every resource. Idempotent."""
        ...

    async def __aenter__(self) -> Self:
        """Open and return the backend."""
        ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the backend."""
        ...

    async def remember(self, memory: NewMemory) -> WriteResult:
        """Store a memory and create its automatic edges.

        With ``memory.dedup`` an active memory of identical normalised content is not stored again:
        the result is ``skipped`` with the existing id. Near duplicates are reported as candidates.
        """
        ...

    async def link(self, edge: Edge) -> Edge:
        """Create or replace a typed edge between two active memories; returns the stored edge.

        Non-``supersedes`` edges are stored in both directions. ``supersedes`` marks ``edge.target``
        as replaced by ``edge.source``. Unknown ids raise ``NotFound``; a self-edge is invalid.
        """
        ...

    async def recall(self, query: RecallQuery) -> list[Hit]:
        """The backend's own ranked retrieval (anchors fused, its own scoring), best first."""
        ...

    async def search(
        self, text: str, *, limit: int = 10, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[Hit]:
        """Keyword retrieval only, best first; only memories sharing a term with ``text``."""
        ...

    async def neighbors(
        self,
        ids: Sequence[str],
        *,
        edge_types: Collection[EdgeType] | None = None,
        hops: int = 1,
        limit: int = 100,
        filters: Filters = Filters(),
    ) -> list[Neighbor]:
        """Memories linked to any of ``ids`` within ``hops``, over edges in both directions.

        The start ids are excluded, as are forgotten memories. A constant number of store queries per
        hop, never one per id. At most ``limit`` neighbours, strongest edges first, ties by id.
        """
        ...

    async def get(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """Active memories by id, in the order asked; unknown or forgotten ids are left out."""
        ...

    async def forget(self, memory_id: str) -> None:
        """Soft-delete a memory and hide its edges. Unknown or already forgotten: ``NotFound``."""
        ...

    async def recent(
        self, *, limit: int = 20, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[MemoryRecord]:
        """The newest active memories (created at or before ``now``), newest first."""
        ...

    async def changes(self, since: datetime, *, limit: int = 100) -> list[Change]:
        """What happened since ``since`` (added, updated, superseded, forgotten), oldest first."""
        ...

    async def known_entities(self, *, limit: int = 1000) -> list[str]:
        """Entity names stored in the backend, most used first (the planner matches against them)."""
        ...

    async def health(self, *, probe: bool = False) -> BackendHealth:
        """Readiness checks; with ``probe`` a real write/read/forget round trip is made."""
        ...


@runtime_checkable
class BulkWriter(Protocol):
    """A backend whose ``capabilities.bulk_writes`` is true also has this method."""

    async def remember_many(self, memories: Sequence[NewMemory]) -> list[WriteResult]:
        """Store ``memories`` in order, like ``remember`` each (same dedup, same edges), in fewer round
        trips. Every memory is validated before anything is stored."""
        ...


@runtime_checkable
class BulkSession(Protocol):
    """A backend told when a run of ``remember_many`` calls (an import) begins and ends, so it can do
    once at the end what it would otherwise do after every batch, or never (SQLite: copy the
    import's WAL back into the store). Each batch is still stored and committed whole; a session
    cut short by an error skips that end."""

    def bulk_session(self) -> AbstractAsyncContextManager[None]:
        """The session: ``async with backend.bulk_session(): ...remember_many...``."""
        ...


def bulk_session(backend: MemoryBackend) -> AbstractAsyncContextManager[None]:
    """``backend``'s bulk session when it has one, else a session that does nothing."""
    if isinstance(backend, BulkSession):
        return backend.bulk_session()
    return nullcontext()


@runtime_checkable
class BulkLinker(Protocol):
    """A backend that links many pairs in one write (``link_all`` uses it when it is there)."""

    async def link_many(self, edges: Sequence[Edge]) -> list[Edge]:
        """Create or replace ``edges`` in order, each as ``link`` would, all or none: every edge is
        validated before anything is stored, and one between memories that are not both active
        stores none of them (``NotFound``)."""
        ...


@runtime_checkable
class RankedNeighbors(Protocol):
    """A backend whose ``capabilities.ranked_neighbors`` is true also has this method."""

    async def strongest_neighbors(
        self,
        ids: Sequence[str],
        *,
        weights: Mapping[EdgeType, float],
        per_source: int,
        min_strength: float,
        limit: int,
        filters: Filters = Filters(),
        floors: NeighborFloors | None = None,
    ) -> list[Neighbor]:
        """One hop of ``neighbors`` over the edge types in ``weights``, ranked in the store.

        As ``neighbors(ids, edge_types=weights, hops=1, limit=limit)`` (one entry per reached memory
        and type, from its strongest origin), then: per (origin, memory) only the strongest entry,
        strength being ``weights[type] * edge weight`` (clamped to 0..1); entries weaker than
        ``min_strength`` left out; at most ``per_source`` memories per origin, strongest first, ties
        by id. So a graph walk loads only what it can use, even around hub memories. A backend whose
        ``capabilities.neighbor_floors`` is true also takes ``floors`` (``NeighborFloors``): the
        floors a walk sets per origin, from the origin's share and the entry's rank."""
        ...


@runtime_checkable
class VersionedStore(Protocol):
    """A backend that can tell, cheaply, whether anyone has changed its store (for read caches)."""

    def store_version(self) -> int | None:
        """A number that changes whenever anyone (this process or another) commits a change to the
        store; None when it cannot be read now. Called on every cached read: synchronous, no I/O
        that can block, microseconds."""
        ...


async def remember_all(backend: MemoryBackend, memories: Sequence[NewMemory]) -> list[WriteResult]:
    """Store ``memories`` in order: the backend's bulk path when it offers one, else one by one.

    One by one, a failure leaves the memories before it stored (the error is raised).
    """
    if backend.capabilities.bulk_writes and isinstance(backend, BulkWriter):
        return await backend.remember_many(memories)
    return [await backend.remember(memory) for memory in memories]


async def link_all(backend: MemoryBackend, edges: Sequence[Edge]) -> list[Edge]:
    """Link ``edges`` in order: the backend's bulk path when it offers one (all or none), else one by
    one (a failure leaves the edges before it stored; the error is raised)."""
    if isinstance(backend, BulkLinker):
        return await backend.link_many(edges)
    return [await backend.link(edge) for edge in edges]


class BackendFactory(Protocol):
    """Builds a backend from its configuration section (no I/O: the caller opens it)."""

    def __call__(self, options: Mapping[str, Any]) -> MemoryBackend:
        """Return an unopened backend configured by ``options``."""
        ...


class ScorerFactory(Protocol):
    """Builds a scorer from its configuration section."""

    def __call__(self, options: Mapping[str, Any]) -> Scorer:
        """Return a scorer configured by ``options``."""
        ...


class AsyncLifecycle:
    """Mixin giving ``async with`` on top of ``open()`` / ``aclose()``."""

    async def open(self) -> None:
        """Open the resource."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close the resource."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        """Open and return self."""
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close."""
        await self.aclose()
