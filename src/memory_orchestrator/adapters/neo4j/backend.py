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
    micros,
    name_uids,
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
    NeighborFloors,
    NewMemory,
    RecallQuery,
    WriteResult,
    edge_strength,
    ensure_utc,
)
from memory_orchestrator.ports.autolinks import DEFAULT_LIMITS, LinkLimits
from memory_orchestrator.ports.recall import fuse_recall
from memory_orchestrator.ports.text import extract_entities
from memory_orchestrator.ports.validation import validate_hops, validate_limit

#: Extra rows read in index order before ties on ``created_at`` are broken by id.
TIE_SLACK = 16
#: Lucene returns at most this many best matches of a store before the other filters apply; enough that
#: filters rarely leave a page short, while keeping a frequent term from ranking the whole store.
FULLTEXT_FLOOR = 1000


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
        """Native keyword (Lucene) search, recall, neighbours ranked in the store, filters, change log,
        a batch of writes in one transaction; no vectors."""
        return Capabilities(
            vector_search=False,
            intent_recall=False,
            bulk_writes=True,
            ranked_neighbors=True,
            neighbor_floors=True,
        )

    async def open(self) -> None:
        """Connect and create the schema (idempotent)."""
        await self._runner.open()

    async def aclose(self) -> None:
        """Close the driver (idempotent)."""
        await self._runner.close()

    async def remember(self, memory: NewMemory) -> WriteResult:
        """Store a memory with exact dedup and the shared automatic edges."""
        return await self._writer.remember(memory)

    async def remember_many(self, memories: Sequence[NewMemory]) -> list[WriteResult]:
        """Store ``memories`` in order in one transaction, each exactly as ``remember`` would."""
        return await self._writer.remember_many(memories)

    async def link(self, edge: Edge) -> Edge:
        """Create or replace a typed edge between two active memories."""
        return await self._writer.link(edge)

    async def link_many(self, edges: Sequence[Edge]) -> list[Edge]:
        """Create or replace typed edges in one transaction, all or none."""
        return await self._writer.link_many(edges)

    async def forget(self, memory_id: str) -> None:
        """Soft-delete a memory (``NotFound`` when unknown or already forgotten)."""
        await self._writer.forget(memory_id)

    async def recall(self, query: RecallQuery) -> list[Hit]:
        """Full-text keyword, entity-anchor and recency channels fused by weighted reciprocal rank.

        Anchors are the names extracted from the text plus every stored name it mentions (each run of
        1-4 words is tried as an entity key; unknown keys simply find nothing in the mentions index).
        """
        validate_limit(query.limit)
        now = ensure_utc(query.now) if query.now is not None else datetime.now(UTC)
        extracted = {uid(self.store, name.casefold()) for name in extract_entities(query.text)}
        rows = await self._runner.read(
            cypher.RECALL,
            **filter_params(self.store, query.filters, now),
            lucene=lucene_query(query.text, store=self.store),
            fulltext_limit=fulltext_limit(query.limit * 5),
            depth=query.limit * 5,
            recency_depth=query.limit,
            tie_slack=TIE_SLACK,
            anchor_uids=sorted(extracted.union(name_uids(self.store, query.text))),
        )
        channels = {
            name: [record_from_node(row["memory"]) for row in rows[0][name]]
            for name in ("keyword", "entity", "recency")
        }
        scores = {row["memory"]["id"]: float(row["score"]) for row in rows[0]["keyword"]}
        return fuse_recall(channels, scores, now)[: query.limit]

    async def search(
        self, text: str, *, limit: int = 10, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[Hit]:
        """Lucene BM25 over content; only memories sharing a term with ``text``.

        Lucene ranks the store's active memories and hands over its best ``fulltext_limit(limit)``;
        the other filters apply to those, so a filter that rejects nearly all of them can return
        fewer than ``limit`` hits even when more matches exist further down the ranking.
        """
        validate_limit(limit)
        lucene = lucene_query(text, store=self.store)
        if not lucene:
            return []
        rows = await self._runner.read(
            cypher.SEARCH,
            **filter_params(self.store, filters, now),
            lucene=lucene,
            fulltext_limit=fulltext_limit(limit),
            depth=limit,
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
        kinds = set(EdgeType) if edge_types is None else {EdgeType(kind) for kind in edge_types}
        types = sorted(cypher.RELATIONSHIP_TYPES[kind] for kind in kinds)
        visited = set(ids)
        frontier = [uid(self.store, item) for item in dict.fromkeys(ids)]
        found: list[Neighbor] = []
        for hop in range(1, hops + 1):
            if not frontier or not types:
                break
            rows = await self._runner.read(
                cypher.NEIGHBORS_HOP,
                **filter_params(self.store, filters, None, as_of=False),
                frontier=frontier,
                types=types,
                visited=sorted(visited),
                limit=limit,
            )
            reached = [
                Neighbor(record_from_node(row["m"]), edge_from_row(row), row["from_id"], hop) for row in rows
            ]
            found.extend(reached)
            next_ids = list(dict.fromkeys(item.record.id for item in reached))
            visited.update(next_ids)
            frontier = [uid(self.store, item) for item in next_ids]
        found.sort(key=lambda item: (-item.edge.weight, item.hops, item.record.id, item.edge.type.value))
        return found[:limit]

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
        """One hop ranked, capped per origin and floored in Cypher (``ports.RankedNeighbors``); the
        walk's ``floors`` before any record is built."""
        validate_limit(limit)
        validate_limit(per_source, name="per_source")
        relationship = cypher.RELATIONSHIP_TYPES
        strengths = {relationship[EdgeType(kind)]: float(value) for kind, value in weights.items()}
        if not ids or not strengths:
            return []
        rows = await self._runner.read(
            cypher.STRONGEST_HOP,
            **filter_params(self.store, filters, None, as_of=False),
            frontier=[uid(self.store, item) for item in dict.fromkeys(ids)],
            types=sorted(strengths),
            weights=strengths,
            visited=sorted(set(ids)),
            per_source=per_source,
            min_strength=float(min_strength),
            limit=limit,
        )
        if floors is not None:
            rows = floors.keep(
                rows,
                origin=lambda row: str(row["from_id"]),
                reached=lambda row: str(row["m"]["id"]),
                strength=lambda row: edge_strength(strengths[row["type"]], float(row["weight"])),
            )
        return [Neighbor(record_from_node(row["m"]), edge_from_row(row), row["from_id"], 1) for row in rows]

    async def get(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """Active memories by id, in the order asked."""
        if not ids:
            return []
        unique = list(dict.fromkeys(ids))
        rows = await self._runner.read(cypher.GET, uids=[uid(self.store, item) for item in unique])
        return [record_from_node(row["m"]) for row in rows]

    async def recent(
        self, *, limit: int = 20, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[MemoryRecord]:
        """Newest active memories created at or before ``now``."""
        validate_limit(limit)
        rows = await self._runner.read(
            cypher.RECENT, **filter_params(self.store, filters, now), limit=limit, tie_slack=TIE_SLACK
        )
        return [record_from_node(row["m"]) for row in rows]

    async def changes(self, since: datetime, *, limit: int = 100) -> list[Change]:
        """Change-log entries at or after ``since``, oldest first."""
        validate_limit(limit)
        rows = await self._runner.read(
            cypher.CHANGES, store=self.store, since=micros(since), limit=limit, tie_slack=TIE_SLACK
        )
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


def fulltext_limit(depth: int) -> int:
    """How many Lucene matches to fetch for ``depth`` results after filtering."""
    return max(FULLTEXT_FLOOR, depth * 20)


def create_backend(options: Mapping[str, Any]) -> Neo4jBackend:
    """The factory the plugin registers: an unopened backend configured by ``options``."""
    return Neo4jBackend(Neo4jOptions.from_mapping(options))


__all__ = ["Neo4jBackend", "create_backend"]
