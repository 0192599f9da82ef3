"""``Neo4jBackend``: the memory backend port over a Neo4j 5 database (official async driver)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from memory_orchestrator.adapters.neo4j import cypher
from memory_orchestrator.adapters.neo4j.health import HealthReport
from memory_orchestrator.adapters.neo4j.options import Neo4jOptions
from memory_orchestrator.adapters.neo4j.retry import RetryPolicy
from memory_orchestrator.adapters.neo4j.rows import (
    edge_from_row,
    filter_params,
    lucene_query,
    record_from_node,
    to_native,
    uid,
)
from memory_orchestrator.adapters.neo4j.runner import CypherRunner
from memory_orchestrator.adapters.neo4j.writes import MemoryWriter
from memory_orchestrator.ports import (
    AsyncLifecycle,
    BackendHealth,
    Capabilities,
    Change,
    ChangeKind,
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
from memory_orchestrator.ports.autolinks import DEFAULT_LIMITS, LinkLimits
from memory_orchestrator.ports.text import extract_entities, tokenize
from memory_orchestrator.ports.validation import validate_hops, validate_limit

#: Reciprocal-rank-fusion constant of ``recall`` (the usual 60).
RRF_K = 60


class Neo4jBackend(AsyncLifecycle):
    """Memories as ``(:Memory)`` nodes, typed edges as relationships, one namespace per ``store``."""

    name = "neo4j"

    def __init__(
        self,
        options: Neo4jOptions | Mapping[str, Any] | None = None,
        *,
        retry: RetryPolicy | None = None,
        link_limits: LinkLimits = DEFAULT_LIMITS,
    ) -> None:
        if not isinstance(options, Neo4jOptions):
            options = Neo4jOptions.from_mapping(options or {})
        self.options = options
        self.store = options.store
        self._runner = CypherRunner(options, retry or RetryPolicy(attempts=options.retry_attempts))
        self._writer = MemoryWriter(self._runner, self.store, link_limits)

    @property
    def capabilities(self) -> Capabilities:
        """Native keyword (Lucene) search, recall, neighbours, filters, change log; no vectors."""
        return Capabilities(vector_search=False, intent_recall=False)

    async def open(self) -> None:
        """Connect and create the schema (idempotent)."""
        await self._runner.open()

    async def aclose(self) -> None:
        """Close the driver (idempotent)."""
        await self._runner.close()

    async def remember(self, memory: NewMemory) -> WriteResult:
        """Store a memory with exact dedup and the shared automatic edges."""
        return await self._writer.remember(memory)

    async def link(self, edge: Edge) -> Edge:
        """Create or replace a typed edge between two active memories."""
        return await self._writer.link(edge)

    async def forget(self, memory_id: str) -> None:
        """Soft-delete a memory (``NotFound`` when unknown or already forgotten)."""
        await self._writer.forget(memory_id)

    async def recall(self, query: RecallQuery) -> list[Hit]:
        """Full-text keyword, recency and entity-anchor channels fused by reciprocal rank (k=60)."""
        validate_limit(query.limit)
        depth = min(max(query.limit * 3, 30), 300)
        anchors = {name.casefold() for name in extract_entities(query.text)} | set(tokenize(query.text))
        rows = await self._runner.read(
            cypher.RECALL,
            **filter_params(self.store, query.filters, query.now),
            lucene=lucene_query(query.text),
            depth=depth,
            anchor_uids=sorted(uid(self.store, name) for name in anchors),
        )
        channels = {name: rows[0][name] for name in ("keyword", "recency", "entity")}
        return fuse_ranked(channels, limit=query.limit)

    async def search(
        self, text: str, *, limit: int = 10, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[Hit]:
        """Lucene BM25 over content; only memories sharing a term with ``text``."""
        validate_limit(limit)
        lucene = lucene_query(text)
        if not lucene:
            return []
        rows = await self._runner.read(
            cypher.SEARCH, **filter_params(self.store, filters, now), lucene=lucene, depth=limit
        )
        return [
            Hit(
                record_from_node(row["memory"]),
                float(row["score"]),
                "keyword",
                {"keyword": float(row["score"])},
            )
            for row in rows[0]["keyword"]
        ]

    async def neighbors(
        self,
        ids: Sequence[str],
        *,
        edge_types: Collection[EdgeType] | None = None,
        hops: int = 1,
        limit: int = 100,
        filters: Filters = Filters(),
    ) -> list[Neighbor]:
        """Breadth-first over both directions: one statement per hop for the whole frontier."""
        validate_hops(hops)
        validate_limit(limit)
        kinds = list(EdgeType) if edge_types is None else [EdgeType(kind) for kind in edge_types]
        types = [cypher.RELATIONSHIP_TYPES[kind] for kind in kinds]
        frontier = [uid(self.store, item) for item in dict.fromkeys(ids)]
        visited = set(frontier)
        found: list[Neighbor] = []
        for hop in range(1, hops + 1):
            if not frontier or not types or len(found) >= limit:
                break
            rows = await self._runner.read(
                cypher.NEIGHBORS_HOP,
                **filter_params(self.store, filters, None),
                frontier=frontier,
                types=types,
                visited=sorted(visited),
                limit=limit - len(found),
            )
            frontier = []
            for row in rows:
                record = record_from_node(row["m"])
                found.append(Neighbor(record, edge_from_row(row), row["from_id"], hop))
                frontier.append(uid(self.store, record.id))
            visited.update(frontier)
        return found

    async def get(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """Active memories by id, in the order asked."""
        if not ids:
            return []
        rows = await self._runner.read(cypher.GET, uids=[uid(self.store, item) for item in ids])
        return [record_from_node(row["m"]) for row in rows]

    async def recent(
        self, *, limit: int = 20, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[MemoryRecord]:
        """Newest active memories created at or before ``now``."""
        validate_limit(limit)
        rows = await self._runner.read(cypher.RECENT, **filter_params(self.store, filters, now), limit=limit)
        return [record_from_node(row["m"]) for row in rows]

    async def changes(self, since: datetime, *, limit: int = 100) -> list[Change]:
        """Change-log entries at or after ``since``, oldest first."""
        validate_limit(limit)
        rows = await self._runner.read(cypher.CHANGES, store=self.store, since=_utc(since), limit=limit)
        return [
            Change(
                kind=ChangeKind(row["kind"]),
                memory_id=row["memory_id"],
                at=to_native(row["at"]),
                record=record_from_node(row["m"]) if row["m"] else None,
                detail=row["detail"],
            )
            for row in rows
        ]

    async def known_entities(self, *, limit: int = 1000) -> list[str]:
        """Entity names of active memories, most used first."""
        validate_limit(limit)
        rows = await self._runner.read(cypher.KNOWN_ENTITIES, store=self.store, limit=limit)
        return [row["name"] for row in rows]

    async def health(self, *, probe: bool = False) -> BackendHealth:
        """Connectivity, schema state, memory count and, with ``probe``, a rolled-back write round trip."""
        report = HealthReport(self._runner, self.store)
        return await report.run(probe=probe)


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def fuse_ranked(channels: Mapping[str, list[dict[str, Any]]], *, limit: int) -> list[Hit]:
    """Reciprocal-rank fusion of ranked channel rows (``memory``, ``score``), best first.

    Each memory's score is the sum of ``1 / (RRF_K + rank)`` over the channels that found it; its
    ``signals`` hold each channel's share. Ties go to the newer memory, then the smaller id.
    """
    scores: dict[str, float] = {}
    signals: dict[str, dict[str, float]] = {}
    records: dict[str, MemoryRecord] = {}
    for channel, rows in channels.items():
        for rank, row in enumerate(rows, start=1):
            record = records.get(row["memory"]["id"]) or record_from_node(row["memory"])
            records[record.id] = record
            share = 1.0 / (RRF_K + rank)
            scores[record.id] = scores.get(record.id, 0.0) + share
            signals.setdefault(record.id, {})[channel] = share
    ranked = sorted(
        records.values(), key=lambda record: (-scores[record.id], -record.created_at.timestamp(), record.id)
    )
    return [Hit(record, scores[record.id], "recall", signals[record.id]) for record in ranked[:limit]]


def create_backend(options: Mapping[str, Any]) -> Neo4jBackend:
    """The factory the plugin registers: an unopened backend configured by ``options``."""
    return Neo4jBackend(Neo4jOptions.from_mapping(options))


__all__ = ["Neo4jBackend", "create_backend", "fuse_ranked"]
