"""``Neo4jBackend``: the memory backend port over a Neo4j 5 database (official async driver)."""

from __future__ import annotations

import time
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
    ensure_utc,
)
from memory_orchestrator.ports.autolinks import DEFAULT_LIMITS, LinkLimits
from memory_orchestrator.ports.text import extract_entities
from memory_orchestrator.ports.validation import validate_hops, validate_limit

#: Reciprocal-rank-fusion constant and channel weights of ``recall`` (same as the other backends).
RRF_K = 60
RECALL_WEIGHTS: Mapping[str, float] = {"keyword": 1.0, "entity": 1.0, "recency": 0.5}
#: Extra rows read in index order before ties on ``created_at`` are broken by id.
TIE_SLACK = 16
#: Lucene returns at most this many best matches of a store before the other filters apply; enough that
#: filters rarely leave a page short, while keeping a frequent term from ranking the whole store.
FULLTEXT_FLOOR = 1000
#: How long the known entity names used by ``recall`` are reused before being read again.
KNOWN_ENTITIES_TTL_S = 5.0


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
        self._known: tuple[float, list[str]] | None = None

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
        self._known = None
        return await self._writer.remember(memory)

    async def link(self, edge: Edge) -> Edge:
        """Create or replace a typed edge between two active memories."""
        return await self._writer.link(edge)

    async def forget(self, memory_id: str) -> None:
        """Soft-delete a memory (``NotFound`` when unknown or already forgotten)."""
        self._known = None
        await self._writer.forget(memory_id)

    async def recall(self, query: RecallQuery) -> list[Hit]:
        """Full-text keyword, entity-anchor and recency channels fused by weighted reciprocal rank."""
        validate_limit(query.limit)
        now = ensure_utc(query.now) if query.now is not None else datetime.now(UTC)
        names = extract_entities(query.text, await self._known_names())
        rows = await self._runner.read(
            cypher.RECALL,
            **filter_params(self.store, query.filters, now),
            lucene=lucene_query(query.text, store=self.store),
            fulltext_limit=fulltext_limit(query.limit * 5),
            depth=query.limit * 5,
            recency_depth=query.limit,
            tie_slack=TIE_SLACK,
            anchor_uids=sorted({uid(self.store, name.casefold()) for name in names}),
        )
        channels = {name: rows[0][name] for name in ("keyword", "entity", "recency")}
        return fuse_ranked(channels, now=now)[: query.limit]

    async def _known_names(self) -> list[str]:
        # The planner-style whole-word match against known names needs them on every recall; a short
        # cache keeps that to one query per few seconds, and writes through this backend drop it.
        cached = self._known
        if cached is not None and time.monotonic() - cached[0] < KNOWN_ENTITIES_TTL_S:
            return cached[1]
        names = await self.known_entities(limit=1000)
        self._known = (time.monotonic(), names)
        return names

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


def fuse_ranked(channels: Mapping[str, list[dict[str, Any]]], *, now: datetime) -> list[Hit]:
    """Weighted reciprocal-rank fusion of ranked channel rows (``memory``, ``score``), best first.

    The same formula as the other backends: ``weight / (RRF_K + rank)`` summed over the channels that
    found a memory; ``signals`` hold each channel's share plus the raw ``bm25`` and ``age_days``.
    """
    totals: dict[str, float] = {}
    records: dict[str, MemoryRecord] = {}
    signals: dict[str, dict[str, float]] = {}
    bm25: dict[str, float] = {}
    for channel, rows in channels.items():
        for rank, row in enumerate(rows, start=1):
            memory_id = row["memory"]["id"]
            if memory_id not in records:
                records[memory_id] = record_from_node(row["memory"])
            if channel == "keyword":
                bm25[memory_id] = float(row["score"])
            share = RECALL_WEIGHTS[channel] / (RRF_K + rank)
            totals[memory_id] = totals.get(memory_id, 0.0) + share
            signals.setdefault(memory_id, {})[channel] = round(share, 6)
    hits: list[Hit] = []
    for memory_id, total in totals.items():
        record = records[memory_id]
        parts = signals[memory_id]
        parts["bm25"] = round(bm25.get(memory_id, 0.0), 6)
        parts["age_days"] = round(max(0.0, (now - record.created_at).total_seconds() / 86400), 3)
        hits.append(Hit(record, round(total, 8), via="recall", signals=parts))
    hits.sort(key=lambda hit: (-hit.score, hit.record.id))
    return hits


def fulltext_limit(depth: int) -> int:
    """How many Lucene matches to fetch for ``depth`` results after filtering."""
    return max(FULLTEXT_FLOOR, depth * 20)


def create_backend(options: Mapping[str, Any]) -> Neo4jBackend:
    """The factory the plugin registers: an unopened backend configured by ``options``."""
    return Neo4jBackend(Neo4jOptions.from_mapping(options))


__all__ = ["Neo4jBackend", "create_backend", "fuse_ranked"]
