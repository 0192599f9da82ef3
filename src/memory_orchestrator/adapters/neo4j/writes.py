"""The write path of the Neo4j backend: remember (dedup + automatic edges), link, forget.

The edge rules are the shared pure functions of ``ports.autolinks``, so a Neo4j store builds the same
graph as every other backend from the same writes. ``remember`` costs two round trips: one read that
gathers every link candidate, one write that creates the node, its entities, its edges and its change.
``remember_many`` makes the same two statements per memory, all in one transaction.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from neo4j import AsyncManagedTransaction

from memory_orchestrator.adapters.neo4j import cypher
from memory_orchestrator.adapters.neo4j.rows import (
    edge_params,
    entity_params,
    lucene_query,
    memory_properties,
    micros,
    name_uids,
    record_from_node,
    sketch_from_node,
    uid,
)
from memory_orchestrator.adapters.neo4j.runner import (
    CypherRunner,
    InTransaction,
    Statements,
    UniquenessConflict,
    next_sequence,
)
from memory_orchestrator.ports import (
    BackendRejected,
    Edge,
    EdgeType,
    InvalidRequest,
    MemoryRecord,
    NewMemory,
    NotFound,
    WriteAction,
    WriteResult,
    ensure_utc,
)
from memory_orchestrator.ports.autolinks import (
    LinkLimits,
    MemorySketch,
    entities_for,
    link_candidates,
    plan_edges,
)
from memory_orchestrator.ports.text import content_hash, tokenize
from memory_orchestrator.ports.validation import validate_edge, validate_new_memory

#: Lexically similar memories fetched from the full-text index as candidates (as the SQLite backend).
SIMILAR_CANDIDATES = 20
#: Query terms used to find them: the longest ones, since long words are the rarer, more telling ones.
SIMILARITY_TERMS = 16
_CANDIDATE_LISTS = ("earlier", "later", "before", "after", "sharing", "similar")


class MemoryWriter:
    """Writes one store's memories and edges through a :class:`CypherRunner`."""

    def __init__(self, runner: CypherRunner, store: str, limits: LinkLimits) -> None:
        self.runner = runner
        self.store = store
        self.limits = limits

    async def remember(self, memory: NewMemory) -> WriteResult:
        """Store ``memory`` unless an identical active one exists (with dedup); add its edges."""
        validate_new_memory(memory)
        try:
            return await self._remember_with(self.runner, memory)
        except UniquenessConflict:
            return await self._concurrent_duplicate(memory)

    async def remember_many(self, memories: Sequence[NewMemory]) -> list[WriteResult]:
        """Store ``memories`` in order in one transaction, each exactly as ``remember`` would: its
        candidate read sees the batch's earlier memories (a transaction reads its own writes), so
        dedup and edges are the same. Every memory is validated first; a failure stores none."""
        for memory in memories:
            validate_new_memory(memory)
        if not memories:
            return []

        async def work(tx: AsyncManagedTransaction) -> list[WriteResult]:
            statements = InTransaction(tx)
            return [await self._remember_with(statements, memory) for memory in memories]

        try:
            return await self.runner.write_tx(work)
        except UniquenessConflict:
            # A concurrent writer stored one of these first and the batch was rolled back: one at a
            # time, each such memory is then answered as the duplicate it now is.
            return [await self.remember(memory) for memory in memories]

    async def _remember_with(self, statements: Statements, memory: NewMemory) -> WriteResult:
        now = datetime.now(UTC)
        created_at = ensure_utc(memory.created_at) if memory.created_at else now
        entities = entities_for(memory)
        new = MemorySketch(
            id=f"mem-{uuid.uuid4().hex[:20]}",
            content=memory.content,
            source=memory.source,
            created_at=created_at,
            tokens=frozenset(tokenize(memory.content)),
            entities=frozenset(name.casefold() for name in entities),
        )
        found = (await statements.read(cypher.LINK_CANDIDATES, **self._candidate_params(memory, new)))[0]
        if memory.dedup and found["duplicate"]:
            return _skipped(found["duplicate"][0])
        entities = entities_for(memory, {key: name for key, name in found["known"]})
        new = replace(new, entities=frozenset(name.casefold() for name in entities))
        pool = [sketch_from_node(node) for key in _CANDIDATE_LISTS for node in found[key]]
        counts = {key: int(count) for key, count in found["counts"]}
        edges = plan_edges(new, pool, at=now, entity_counts=counts, limits=self.limits)
        await statements.write(
            cypher.CREATE_MEMORY,
            store=self.store,
            props=memory_properties(self.store, new.id, memory, entities, created_at, now),
            entities=entity_params(self.store, entities),
            edges=[edge_params(self.store, edge, now) for edge in edges],
            seq=next_sequence(),
            written_at=micros(now),
        )
        return WriteResult(
            id=new.id,
            action=WriteAction.ADDED,
            candidates=link_candidates(new, pool, limits=self.limits),
            edges_created=dict(Counter(edge.type.value for edge in edges)),
            record=_new_record(new.id, memory, entities, created_at, now),
        )

    def _candidate_params(self, memory: NewMemory, new: MemorySketch) -> dict[str, Any]:
        window = timedelta(hours=self.limits.proximity_hours)
        return {
            "store": self.store,
            "dedup": memory.dedup,
            "hash": content_hash(memory.content),
            "source": memory.source,
            "id": new.id,
            "at": micros(new.created_at),
            "window_start": micros(new.created_at - window),
            "window_end": micros(new.created_at + window),
            # One more than each rule keeps, so a tie at the cut is still seen by the rules.
            "causal_window": self.limits.causal_window + 1,
            "proximity_max": self.limits.proximity_max + 1,
            "entity_uids": [uid(self.store, key) for key in sorted(new.entities)],
            "name_uids": name_uids(self.store, memory.content),
            "entity_per_name": self.limits.entity_per_name + 1,
            "lucene": lucene_query(" ".join(_longest(new.tokens, SIMILARITY_TERMS)), store=self.store),
            "similar_max": SIMILAR_CANDIDATES,
        }

    async def _concurrent_duplicate(self, memory: NewMemory) -> WriteResult:
        # The dedup_key constraint fired: an identical write committed between our read and our write.
        rows = await self.runner.read(
            cypher.EXISTING_DUPLICATE, store=self.store, hash=content_hash(memory.content)
        )
        if not rows:
            raise BackendRejected("a concurrent identical write vanished; retry the write", backend="neo4j")
        return _skipped(rows[0]["m"])

    async def link(self, edge: Edge) -> Edge:
        """Create or replace ``edge``; ``supersedes`` also marks the target as replaced."""
        [stored] = await self.link_many([edge])
        return stored

    async def link_many(self, edges: Sequence[Edge]) -> list[Edge]:
        """``link`` each of ``edges`` in order, in one transaction: every edge is validated first, and
        one between memories that are not both active rolls them all back (``NotFound``)."""
        for edge in edges:
            validate_edge(edge)
        if not edges:
            return []
        now = datetime.now(UTC)
        steps = [self._link_step(edge, now) for edge in edges]

        async def work(tx: Any) -> None:
            for stored, replacing, supersede in steps:
                if not await (await tx.run(cypher.REPLACE_EDGE, replacing)).data():
                    ids = (stored.source, stored.target)
                    rows = await (
                        await tx.run(cypher.ACTIVE_IDS, uids=[uid(self.store, item) for item in ids])
                    ).data()
                    active = {row["id"] for row in rows}
                    missing = [item for item in ids if item not in active]
                    raise NotFound(f"unknown or forgotten memory id(s): {', '.join(missing or ids)}")
                if stored.type is EdgeType.SUPERSEDES:
                    await (await tx.run(cypher.MARK_SUPERSEDED, supersede)).consume()

        await self.runner.write_tx(work)
        return [stored for stored, _, _ in steps]

    def _link_step(self, edge: Edge, now: datetime) -> tuple[Edge, dict[str, Any], dict[str, Any]]:
        # the edge as stored, the parameters of its REPLACE_EDGE and of its MARK_SUPERSEDED
        stored = Edge(
            edge.source,
            edge.target,
            EdgeType(edge.type),
            float(edge.weight),
            edge.metadata,
            ensure_utc(edge.created_at) if edge.created_at else now,
        )
        params = edge_params(self.store, stored, now)
        replace = {
            "store": self.store,
            "source_uid": params["from"],
            "target_uid": params["to"],
            "type": params["type"],
            "weight": params["weight"],
            "metadata": params["metadata"],
            "created_at": params["created_at"],
        }
        supersede = {
            "store": self.store,
            "target_uid": params["to"],
            "source_id": stored.source,
            "seq": next_sequence(),
            "written_at": micros(now),
        }
        return stored, replace, supersede

    async def forget(self, memory_id: str) -> None:
        """Soft-delete ``memory_id``; its edges disappear from traversal with it."""
        if not isinstance(memory_id, str) or not memory_id:
            raise InvalidRequest("a memory id is required")
        rows = await self.runner.write(
            cypher.FORGET,
            store=self.store,
            uid=uid(self.store, memory_id),
            seq=next_sequence(),
            written_at=micros(datetime.now(UTC)),
        )
        if not rows:
            raise NotFound(f"unknown or forgotten memory id: {memory_id}")


def _longest(tokens: frozenset[str], count: int) -> list[str]:
    return sorted(tokens, key=lambda token: (-len(token), token))[:count]


def _new_record(
    memory_id: str, memory: NewMemory, entities: tuple[str, ...], created_at: datetime, now: datetime
) -> MemoryRecord:
    return MemoryRecord(
        id=memory_id,
        content=memory.content,
        created_at=created_at,
        updated_at=now,
        category=memory.category,
        importance=memory.importance,
        tags=tuple(memory.tags),
        entities=entities,
        source=memory.source,
        metadata=dict(memory.metadata),
    )


def _skipped(node: dict[str, Any]) -> WriteResult:
    existing = record_from_node(node)
    return WriteResult(id=existing.id, action=WriteAction.SKIPPED, duplicate_of=existing.id, record=existing)
