"""The in-process backend: the reference implementation of the port and the test fake.

It keeps everything in dictionaries, gives deterministic ids (``mem-000001`` ...), applies the same
write-time rules as the SQLite backend (through ``ports.autolinks``), exposes its state for tests
(``records``, ``edges``, ``calls``) and can be told to fail or to be slow per method.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

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
)
from memory_orchestrator.ports.autolinks import (
    MemorySketch,
    entities_for,
    link_candidates,
    plan_edges,
    sketch,
)
from memory_orchestrator.ports.text import content_hash, extract_entities, tokenize
from memory_orchestrator.ports.validation import (
    validate_edge,
    validate_hops,
    validate_limit,
    validate_new_memory,
)

__all__ = ["InMemoryBackend", "create_backend"]

#: Reciprocal-rank-fusion constant and channel weights of ``recall`` (same as the SQLite backend).
RRF_K = 60
RECALL_WEIGHTS: Mapping[str, float] = {"keyword": 1.0, "entity": 1.0, "recency": 0.5}

EdgeKey = tuple[str, str, EdgeType]


@dataclass(slots=True)
class StoredMemory:
    """One memory as the in-memory store holds it."""

    record: MemoryRecord
    content_hash: str
    sketch: MemorySketch
    deleted_at: datetime | None = None


class InMemoryBackend(AsyncLifecycle):
    """A complete ``MemoryBackend`` held in process memory."""

    name = "memory"

    def __init__(self, *, clock: Clock | None = None, name: str = "memory") -> None:
        self.name = name
        self.clock: Clock = clock or SystemClock()
        #: Every memory ever stored, forgotten ones included (``deleted_at`` set).
        self.memories: dict[str, StoredMemory] = {}
        #: Stored edges by (source, target, type), one row per edge (traversed both ways).
        self.edges: dict[EdgeKey, Edge] = {}
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
        """Active memories by id (as ``get`` would return them)."""
        return {key: self._view(item) for key, item in self.memories.items() if item.deleted_at is None}

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
        if memory.dedup:
            existing = self._active_with_hash(digest)
            if existing is not None:
                record = self._view(existing)
                return WriteResult(record.id, WriteAction.SKIPPED, duplicate_of=record.id, record=record)
        now = ensure_utc(self.clock.now())
        record = self._new_record(memory, now)
        stored = StoredMemory(record, digest, sketch(record))
        others = [item.sketch for item in self._active()]
        counts = self._entity_counts()
        edges = plan_edges(stored.sketch, others, at=now, entity_counts=counts)
        candidates = link_candidates(stored.sketch, others)
        self.memories[record.id] = stored
        for edge in edges:
            self._store_edge(edge)
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
            entities=entities_for(memory),
            source=memory.source,
            metadata=dict(memory.metadata),
        )

    def _store_edge(self, edge: Edge) -> Edge:
        if edge.type is not EdgeType.SUPERSEDES:
            # Symmetric kinds keep one edge per pair: a link in the other direction replaces it.
            self.edges.pop((edge.target, edge.source, edge.type), None)
        self.edges[(edge.source, edge.target, edge.type)] = edge
        return edge

    async def link(self, edge: Edge) -> Edge:
        """Create or replace ``edge`` between two active memories."""
        await self._enter("link", edge)
        validate_edge(edge)
        for memory_id in (edge.source, edge.target):
            if not self._is_active(memory_id):
                raise NotFound(f"memory {memory_id} not found")
        now = ensure_utc(self.clock.now())
        stored = replace(edge, type=EdgeType(edge.type), created_at=edge.created_at or now)
        self._store_edge(stored)
        if stored.type is EdgeType.SUPERSEDES:
            detail = f"superseded by {stored.source}"
            self.change_log.append(Change(ChangeKind.SUPERSEDED, stored.target, now, detail=detail))
        return stored

    async def forget(self, memory_id: str) -> None:
        """Soft-delete ``memory_id``; its edges disappear from every read."""
        await self._enter("forget", memory_id)
        if not self._is_active(memory_id):
            raise NotFound(f"memory {memory_id} not found")
        now = ensure_utc(self.clock.now())
        self.memories[memory_id].deleted_at = now
        self.change_log.append(Change(ChangeKind.FORGOTTEN, memory_id, now))

    # -- reads ----------------------------------------------------------------------------------

    async def get(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """Active memories by id, in the order asked (each once)."""
        await self._enter("get", tuple(ids))
        seen: set[str] = set()
        found: list[MemoryRecord] = []
        for memory_id in ids:
            if memory_id not in seen and self._is_active(memory_id):
                seen.add(memory_id)
                found.append(self._view(self.memories[memory_id]))
        return found

    async def recent(
        self, *, limit: int = 20, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[MemoryRecord]:
        """Newest visible memories first."""
        await self._enter("recent", limit, filters, now)
        validate_limit(limit)
        visible = self._visible(filters, now)
        visible.sort(key=lambda record: (record.created_at, record.id), reverse=True)
        return visible[:limit]

    async def search(
        self, text: str, *, limit: int = 10, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[Hit]:
        """BM25 keyword search over the visible memories."""
        await self._enter("search", text, limit, filters, now)
        validate_limit(limit)
        scored = _bm25(tokenize(text), self._visible(filters, now))
        return [
            Hit(record, round(score, 6), via="keyword", signals={"keyword": round(score, 6)})
            for record, score in scored[:limit]
        ]

    async def recall(self, query: RecallQuery) -> list[Hit]:
        """Keyword, entity and recency channels fused by weighted reciprocal rank."""
        await self._enter("recall", query)
        validate_limit(query.limit)
        now = ensure_utc(query.now or self.clock.now())
        visible = self._visible(query.filters, now)
        pool = query.limit * 5
        keyword = _bm25(tokenize(query.text), visible)[:pool]
        wanted = {name.casefold() for name in extract_entities(query.text, self._known_names())}
        anchored = [record for record in visible if wanted & {name.casefold() for name in record.entities}]
        anchored.sort(key=lambda record: (record.created_at, record.id), reverse=True)
        newest = sorted(visible, key=lambda record: (record.created_at, record.id), reverse=True)
        channels = {
            "keyword": [record for record, _ in keyword],
            "entity": anchored[:pool],
            "recency": newest[: query.limit],
        }
        return _fuse(channels, {record.id: score for record, score in keyword}, now)[: query.limit]

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
        frontier = [memory_id for memory_id in ids if self._is_active(memory_id)]
        found: list[Neighbor] = []
        for hop in range(1, hops + 1):
            reached = self._one_hop(set(frontier), allowed, visited, filters, hop)
            reached.sort(key=_neighbor_order)
            reached = reached[:limit]
            found.extend(reached)
            frontier = list(dict.fromkeys(item.record.id for item in reached))
            visited.update(frontier)
            if not frontier:
                break
        found.sort(key=_neighbor_order)
        return found[:limit]

    def _one_hop(
        self, frontier: set[str], allowed: set[EdgeType], visited: set[str], filters: Filters, hop: int
    ) -> list[Neighbor]:
        # One entry per (memory, edge type): the domain weighs edge types by intent, so it must see each.
        best: dict[tuple[str, EdgeType], Neighbor] = {}
        for (source, target, kind), edge in self.edges.items():
            if kind not in allowed:
                continue
            for origin, other in ((source, target), (target, source)):
                if origin not in frontier or other in visited or not self._is_active(other):
                    continue
                record = self._view(self.memories[other])
                if not filters.admits(record):
                    continue
                current = best.get((other, kind))
                if current is None or (-edge.weight, origin) < (-current.edge.weight, current.from_id):
                    best[(other, kind)] = Neighbor(record, edge, origin, hop)
        return list(best.values())

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
        return self._known_names()[:limit]

    async def health(self, *, probe: bool = False) -> BackendHealth:
        """Always ready unless a failure was injected for ``health``."""
        await self._enter("health", probe)
        checks = [HealthCheck("store", "ok", "in-process dictionaries")]
        if probe:
            checks.append(HealthCheck("probe", "ok", "write/read round trip on a scratch entry"))
        return BackendHealth(self.name, "ok", tuple(checks), memory_count=len(self._active()))

    # -- internals ------------------------------------------------------------------------------

    def _active(self) -> list[StoredMemory]:
        return [item for item in self.memories.values() if item.deleted_at is None]

    def _is_active(self, memory_id: str) -> bool:
        stored = self.memories.get(memory_id)
        return stored is not None and stored.deleted_at is None

    def _active_with_hash(self, digest: str) -> StoredMemory | None:
        return next((item for item in self._active() if item.content_hash == digest), None)

    def _view(self, stored: StoredMemory) -> MemoryRecord:
        memory_id = stored.record.id
        superseders = sorted(
            source
            for (source, target, kind) in self.edges
            if kind is EdgeType.SUPERSEDES and target == memory_id and self._is_active(source)
        )
        return replace(stored.record, superseded_by=tuple(superseders))

    def _visible(self, filters: Filters, now: datetime | None) -> list[MemoryRecord]:
        moment = ensure_utc(now or self.clock.now())
        return [
            record
            for record in (self._view(item) for item in self._active())
            if record.created_at <= moment and filters.admits(record)
        ]

    def _entity_counts(self) -> dict[str, int]:
        return dict(Counter(name for item in self._active() for name in item.sketch.entities))

    def _known_names(self) -> list[str]:
        counts: Counter[str] = Counter()
        spelling: dict[str, str] = {}
        for item in self._active():
            for name in item.record.entities:
                spelling.setdefault(name.casefold(), name)
                counts[name.casefold()] += 1
        ranked = sorted(counts, key=lambda key: (-counts[key], key))
        return [spelling[key] for key in ranked]


def _neighbor_order(item: Neighbor) -> tuple[float, int, str, str]:
    return (-item.edge.weight, item.hops, item.record.id, item.edge.type.value)


def _bm25(query_tokens: list[str], records: list[MemoryRecord]) -> list[tuple[MemoryRecord, float]]:
    """Okapi BM25 (k1=1.2, b=0.75) of ``records`` for the query; only records sharing a term, best first."""
    terms = set(query_tokens)
    if not terms or not records:
        return []
    documents = [(record, Counter(tokenize(record.content))) for record in records]
    average = sum(sum(counts.values()) for _, counts in documents) / len(documents) or 1.0
    frequency = Counter(term for _, counts in documents for term in terms if term in counts)
    scored: list[tuple[MemoryRecord, float]] = []
    for record, counts in documents:
        length = sum(counts.values())
        score = 0.0
        for term in terms & counts.keys():
            idf = math.log(1 + (len(documents) - frequency[term] + 0.5) / (frequency[term] + 0.5))
            tf = counts[term]
            score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / average))
        if score > 0:
            scored.append((record, score))
    scored.sort(key=lambda pair: (-pair[1], pair[0].id))
    return scored


def _fuse(
    channels: Mapping[str, list[MemoryRecord]], keyword: Mapping[str, float], now: datetime
) -> list[Hit]:
    """Weighted reciprocal-rank fusion of the channel lists into recall hits, best first."""
    totals: dict[str, float] = {}
    records: dict[str, MemoryRecord] = {}
    signals: dict[str, dict[str, float]] = {}
    for channel, ranked in channels.items():
        for rank, record in enumerate(ranked, start=1):
            share = RECALL_WEIGHTS[channel] / (RRF_K + rank)
            totals[record.id] = totals.get(record.id, 0.0) + share
            records[record.id] = record
            signals.setdefault(record.id, {})[channel] = round(share, 6)
    hits: list[Hit] = []
    for memory_id, total in totals.items():
        record = records[memory_id]
        parts = signals[memory_id]
        parts["bm25"] = round(keyword.get(memory_id, 0.0), 6)
        age_days = max(0.0, (now - record.created_at).total_seconds() / 86400)
        parts["age_days"] = round(age_days, 3)
        hits.append(Hit(record, round(total, 8), via="recall", signals=parts))
    hits.sort(key=lambda hit: (-hit.score, hit.record.id))
    return hits


def create_backend(options: Mapping[str, Any]) -> InMemoryBackend:
    """Build an in-memory backend; ``options`` may carry a ``clock`` (any object with ``now()``)."""
    clock = options.get("clock")
    return InMemoryBackend(clock=clock if clock is not None and hasattr(clock, "now") else None)
