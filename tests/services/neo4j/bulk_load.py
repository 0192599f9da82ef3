"""Bulk loading of a Neo4j benchmark store: the adapter's node layout and write-time edge rules, in batches.

Only for benchmarks at sizes where one ``remember`` per memory takes too long. Candidates for the link
rules are gathered in Python the way the backends gather them (previous memories of the same source,
memories within the proximity window, recent carriers of each entity), except the lexical candidates,
which are left out; memories must come in ``created_at`` order.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict, deque
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from memory_orchestrator.adapters.neo4j import Neo4jBackend, cypher
from memory_orchestrator.adapters.neo4j.rows import edge_params, entity_params, memory_properties
from memory_orchestrator.ports import Edge, NewMemory
from memory_orchestrator.ports.autolinks import DEFAULT_LIMITS, MemorySketch, entities_for, plan_edges
from memory_orchestrator.ports.text import tokenize

CREATE_NODES = """
UNWIND $rows AS row
CREATE (m:Memory)
SET m = row.props
WITH m, row
UNWIND row.entities AS entity
MERGE (e:Entity {uid: entity.uid})
  ON CREATE SET e.store = $store, e.key = entity.key, e.name = entity.name
CREATE (m)-[:MENTIONS {store: $store, entity_uid: entity.uid, created_at: m.created_at}]->(e)
"""


class CandidateWindow:
    """The recent memories the link rules may pick from, kept per source, overall and per entity."""

    def __init__(self) -> None:
        limits = DEFAULT_LIMITS
        self.by_source: dict[str, deque[MemorySketch]] = defaultdict(
            lambda: deque(maxlen=limits.causal_window + 1)
        )
        self.latest: deque[MemorySketch] = deque(maxlen=limits.proximity_max + 1)
        self.by_entity: dict[str, deque[MemorySketch]] = defaultdict(
            lambda: deque(maxlen=limits.entity_per_name + 1)
        )
        self.entity_counts: Counter[str] = Counter()

    def edges_for(self, new: MemorySketch, now: datetime) -> list[Edge]:
        """The automatic edges of ``new`` against what came before it; then remember ``new``."""
        pool = [*self.by_source[new.source], *self.latest]
        for name in new.entities:
            pool.extend(self.by_entity[name])
        edges = plan_edges(new, pool, at=now, entity_counts=self.entity_counts)
        self.by_source[new.source].append(new)
        self.latest.append(new)
        for name in new.entities:
            self.by_entity[name].append(new)
            self.entity_counts[name] += 1
        return edges


async def bulk_load(
    backend: Neo4jBackend, memories: Sequence[NewMemory], *, batch: int = 500
) -> tuple[list[str], int]:
    """Create ``memories`` (sorted by ``created_at``) with their edges; their ids and the edge count."""
    store, window = backend.store, CandidateWindow()
    now = datetime.now(UTC)
    ids: list[str] = []
    rows: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    edge_count = 0
    for memory in memories:
        assert memory.created_at is not None
        memory_id = f"mem-{uuid.uuid4().hex[:20]}"
        entities = entities_for(memory)
        sketch = MemorySketch(
            memory_id,
            memory.content,
            memory.source,
            memory.created_at,
            frozenset(tokenize(memory.content)),
            frozenset(name.casefold() for name in entities),
        )
        props = memory_properties(store, memory_id, memory, entities, memory.created_at, now)
        rows.append({"props": props, "entities": entity_params(store, entities)})
        edges.extend(edge_params(store, edge, now) for edge in window.edges_for(sketch, now))
        ids.append(memory_id)
        if len(rows) >= batch:
            edge_count += await _flush(backend, rows, edges)
    edge_count += await _flush(backend, rows, edges)
    return ids, edge_count


async def _flush(backend: Neo4jBackend, rows: list[dict[str, Any]], edges: list[dict[str, Any]]) -> int:
    runner = backend._runner  # the benchmark reaches in on purpose: this path is not part of the port
    if rows:
        await runner.write(CREATE_NODES, store=backend.store, rows=list(rows))
    if edges:
        await runner.write(cypher.CREATE_EDGES, store=backend.store, edges=list(edges))
    count = len(edges)
    rows.clear()
    edges.clear()
    return count
