"""The in-process backend: the reference implementation of the port and the test fake.

It keeps everything in dictionaries (with indexes, see ``state.py``), gives deterministic ids
(``mem-000001`` ...), applies the same write-time rules as the SQLite backend (``ports.autolinks``)
and the same recall fusion (``ports.recall``), exposes its state for tests (``records``, ``edges``,
``calls``, ``change_log``) and can be told to fail or to be slow per method.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from memory_orchestrator.adapters.memory.state import EdgeKey, MemoryState, StoredMemory
from memory_orchestrator.ports import (
    AsyncLifecycle,
    BackendHealth,
    BackendUnavailable,
    Capabilities,
    Change,
    ChangeKind,
    Clock,
    Edge,
    EdgeType,
    Filters,
    HealthCheck,
    Hit,
    MemoryRecord,
    Neighbor,
    NewMemory,
    NotFound,
    RecallQuery,
    SystemClock,
    WriteAction,
    WriteResult,
    ensure_utc,
    superseded_change,
)
from memory_orchestrator.ports.autolinks import entities_for, link_candidates, plan_edges, sketch
from memory_orchestrator.ports.recall import fuse_recall
from memory_orchestrator.ports.text import (
    content_hash,
    extract_entities,
    matched_names,
    name_candidates,
    tokenize,
)
from memory_orchestrator.ports.validation import (
    validate_edge,
    validate_hops,
    validate_limit,
    validate_new_memory,
)


class InMemoryBackend(AsyncLifecycle):
    """A complete ``MemoryBackend`` held in process memory."""

    name = "memory"

    def __init__(self, *, clock: Clock | None = None, name: str = "memory") -> None:
        self.name = name
        self.clock: Clock = clock or SystemClock()
        self.state = MemoryState()
        #: Calls received, as (method, arguments) pairs, oldest first.
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.change_log: list[Change] = []
        self.opened = False
        self.closed = False
        self._failures: dict[str, list[Exception]] = {}
        self._always: dict[str, Exception] = {}
        self._delays: dict[str, float] = {}
        self._next_id = 1

    # -- test controls ------------------------------------------------------------------------

    @property
    def records(self) -> dict[str, MemoryRecord]:
        """Active memories by id (as ``get`` would return them), oldest first."""
        return {item.record.id: self.state.view(item) for item in self.state.active()}

    @property
    def memories(self) -> dict[str, StoredMemory]:
        """Every memory ever stored, forgotten ones included (``deleted_at`` set)."""
        return self.state.memories

    @property
    def edges(self) -> dict[EdgeKey, Edge]:
        """Stored edges by (source, target, type), one entry per edge (traversed both ways)."""
        return self.state.edges

    def fail_next(self, method: str, error: Exception | None = None) -> None:
        """Make the next call of ``method`` raise ``error`` (default ``BackendUnavailable``)."""
        self._failures.setdefault(method, []).append(error or self._unavailable(method))

    def fail_always(self, method: str, error: Exception | None = None) -> None:
        """Make every call of ``method`` raise ``error`` until :meth:`heal` is called."""
        self._always[method] = error or self._unavailable(method)

    def delay(self, method: str, seconds: float) -> None:
        """Make every call of ``method`` sleep ``seconds`` first (timeouts, concurrency tests)."""
        self._delays[method] = seconds

    def heal(self) -> None:
        """Forget every injected failure and delay."""
        self._failures.clear()
        self._always.clear()
        self._delays.clear()

    def called(self, method: str) -> int:
        """How many times ``method`` was called."""
        return sum(1 for name, _ in self.calls if name == method)

    def _unavailable(self, method: str) -> BackendUnavailable:
        return BackendUnavailable(f"{method} failed (injected)", backend=self.name)

    async def _enter(self, method: str, *arguments: Any) -> None:
        self.calls.append((method, arguments))
        if method in self._delays:
            await asyncio.sleep(self._delays[method])
        queued = self._failures.get(method)
        if queued:
            raise queued.pop(0)
        if method in self._always:
            raise self._always[method]

    # -- life cycle -----------------------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        """Everything but vector search and intent-aware recall."""
        return Capabilities(vector_search=False, intent_recall=False)

    async def open(self) -> None:
        """Nothing to connect; marks the backend open."""
        await self._enter("open")
        self.opened = True
        self.closed = False

    async def aclose(self) -> None:
        """Marks the backend closed; the data stays (an in-memory store has nowhere else to go)."""
        self.closed = True

    # -- writes ---------------------------------------------------------------------------------

    async def remember(self, memory: NewMemory) -> WriteResult:
        """Store ``memory`` with its automatic edges; identical active content is ``skipped``."""
        await self._enter("remember", memory)
        validate_new_memory(memory)
        digest = content_hash(memory.content)
        existing = self.state.with_hash(digest) if memory.dedup else None
        if existing is not None:
            record = self.state.view(existing)
            return WriteResult(record.id, WriteAction.SKIPPED, duplicate_of=record.id, record=record)
        now = ensure_utc(self.clock.now())
        record = self._new_record(memory, now)
        stored = StoredMemory(record, digest, sketch(record), Counter(tokenize(record.content)))
        others = self.state.candidates(stored.sketch)
        edges = plan_edges(stored.sketch, others, at=now, entity_counts=self.state.entity_counts())
        candidates = link_candidates(stored.sketch, others)
        self.state.add(stored)
        for edge in edges:
            self.state.store_edge(edge)
        self.change_log.append(Change(ChangeKind.ADDED, record.id, now, record))
        created = Counter(edge.type.value for edge in edges)
        return WriteResult(
            record.id, WriteAction.ADDED, candidates=candidates, edges_created=created, record=record
        )

    def _new_record(self, memory: NewMemory, now: datetime) -> MemoryRecord:
        memory_id = f"mem-{self._next_id:06d}"
        self._next_id += 1
        return MemoryRecord(
            id=memory_id,
            content=memory.content,
            created_at=ensure_utc(memory.created_at) if memory.created_at else now,
            updated_at=now,
            category=memory.category,
            importance=memory.importance,
            tags=tuple(memory.tags),
            entities=entities_for(memory, self.state.known_names(name_candidates(memory.content))),
            source=memory.source,
            metadata=dict(memory.metadata),
        )

    async def link(self, edge: Edge) -> Edge:
        """Create or replace ``edge`` between two active memories."""
        await self._enter("link", edge)
        [stored] = self._store_edges([edge])
        return stored

    async def link_many(self, edges: Sequence[Edge]) -> list[Edge]:
        """``link`` each of ``edges`` in order, all or none: every edge is checked before any is stored."""
        await self._enter("link_many", edges)
        return self._store_edges(edges)

    def _store_edges(self, edges: Sequence[Edge]) -> list[Edge]:
        for edge in edges:
            validate_edge(edge)
        for edge in edges:
            for memory_id in (edge.source, edge.target):
                if not self.state.is_active(memory_id):
                    raise NotFound(f"memory {memory_id} not found")
        now = ensure_utc(self.clock.now())
        stored = [edge.stamped(now) for edge in edges]
        for edge in stored:
            self.state.store_edge(edge)
            if (change := superseded_change(edge, now)) is not None:
                self.change_log.append(change)
        return stored

    async def forget(self, memory_id: str) -> None:
        """Soft-delete ``memory_id``; its edges disappear from every read."""
        await self._enter("forget", memory_id)
        if not self.state.is_active(memory_id):
            raise NotFound(f"memory {memory_id} not found")
        now = ensure_utc(self.clock.now())
        self.state.remove(memory_id, now)
        self.change_log.append(Change(ChangeKind.FORGOTTEN, memory_id, now))

    # -- reads ----------------------------------------------------------------------------------

    async def get(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """Active memories by id, in the order asked (each once)."""
        await self._enter("get", tuple(ids))
        seen: set[str] = set()
        found: list[MemoryRecord] = []
        for memory_id in ids:
            if memory_id not in seen and self.state.is_active(memory_id):
                seen.add(memory_id)
                found.append(self.state.view(self.state.memories[memory_id]))
        return found

    async def recent(
        self, *, limit: int = 20, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[MemoryRecord]:
        """Newest visible memories first."""
        await self._enter("recent", limit, filters, now)
        validate_limit(limit)
        return self.state.newest(filters, ensure_utc(now or self.clock.now()), limit)

    async def search(
        self, text: str, *, limit: int = 10, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[Hit]:
        """BM25 keyword search over the visible memories."""
        await self._enter("search", text, limit, filters, now)
        validate_limit(limit)
        scored = self._keyword(text, filters, ensure_utc(now or self.clock.now()))
        return [
            Hit(record, round(score, 6), via="keyword", signals={"keyword": round(score, 6)})
            for record, score in scored[:limit]
        ]

    def _keyword(self, text: str, filters: Filters, now: datetime) -> list[tuple[MemoryRecord, float]]:
        tokens = tokenize(text)
        return self.state.bm25(tokens, self.state.containing(tokens, filters, now))

    async def recall(self, query: RecallQuery) -> list[Hit]:
        """Keyword, entity and recency channels fused by weighted reciprocal rank."""
        await self._enter("recall", query)
        validate_limit(query.limit)
        now = ensure_utc(query.now or self.clock.now())
        pool = query.limit * 5
        keyword = self._keyword(query.text, query.filters, now)[:pool]
        known = self.state.known_names(name_candidates(query.text))
        names = [*extract_entities(query.text), *matched_names(query.text, known)]
        channels = {
            "keyword": [record for record, _ in keyword],
            "entity": self.state.carrying((name.casefold() for name in names), query.filters, now, pool),
            "recency": self.state.newest(query.filters, now, query.limit),
        }
        return fuse_recall(channels, {record.id: score for record, score in keyword}, now)[: query.limit]

    async def neighbors(
        self,
        ids: Sequence[str],
        *,
        edge_types: Collection[EdgeType] | None = None,
        hops: int = 1,
        limit: int = 100,
        filters: Filters = Filters(),
    ) -> list[Neighbor]:
        """Breadth-first over edges in both directions, one pass over the edges per hop.

        A memory reached over several edge types appears once per type (its strongest edge of that type).
        """
        await self._enter("neighbors", tuple(ids), edge_types, hops, limit, filters)
        validate_hops(hops)
        validate_limit(limit)
        allowed = set(EdgeType) if edge_types is None else {EdgeType(kind) for kind in edge_types}
        visited = set(ids)
        frontier = [memory_id for memory_id in dict.fromkeys(ids) if self.state.is_active(memory_id)]
        found: list[Neighbor] = []
        for hop in range(1, hops + 1):
            reached = self.state.one_hop(frontier, allowed, visited, filters, hop)
            reached.sort(key=_neighbor_order)
            reached = reached[:limit]
            found.extend(reached)
            frontier = list(dict.fromkeys(item.record.id for item in reached))
            visited.update(frontier)
            if not frontier:
                break
        found.sort(key=_neighbor_order)
        return found[:limit]

    async def changes(self, since: datetime, *, limit: int = 100) -> list[Change]:
        """Changes at or after ``since``, oldest first."""
        await self._enter("changes", since, limit)
        validate_limit(limit)
        moment = ensure_utc(since)
        return [change for change in self.change_log if change.at >= moment][:limit]

    async def known_entities(self, *, limit: int = 1000) -> list[str]:
        """Entity names of active memories, most used first, ties alphabetical."""
        await self._enter("known_entities", limit)
        validate_limit(limit)
        return self.state.ranked_names()[:limit]

    async def health(self, *, probe: bool = False) -> BackendHealth:
        """Always ready unless a failure was injected for ``health``."""
        await self._enter("health", probe)
        checks = [HealthCheck("store", "ok", "in-process dictionaries")]
        if probe:
            checks.append(HealthCheck("probe", "ok", "write/read round trip on a scratch entry"))
        return BackendHealth(self.name, "ok", tuple(checks), memory_count=len(self.state.active()))

    # -- internals ------------------------------------------------------------------------------


def _neighbor_order(item: Neighbor) -> tuple[float, int, str, str]:
    return (-item.edge.weight, item.hops, item.record.id, item.edge.type.value)
