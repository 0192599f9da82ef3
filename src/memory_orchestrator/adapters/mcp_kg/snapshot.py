"""One consistent view of a knowledge graph and its sidecar: records, indexes and the edge walk.

Rebuilt whenever the memory file or the sidecar changed (cheap: a few milliseconds per thousand
observations), so every read sees the graph as the server has it, other writers included.

Edges come from three places (see the README's mapping table):

* the sidecar's memory-to-memory edges (automatic edges of our writes, ``link``, supersession);
* the server's relations: ``A -rel-> B`` links every observation of ``A`` to every observation of
  ``B`` as the edge type :func:`graph.edge_type` gives the relation name (weight
  :data:`RELATION_WEIGHT`, metadata ``relation``);
* observations of one entity are ``entity`` edges to each other (weight :data:`SIBLING_WEIGHT`), since
  the entity is what the server says they share. Our holder entities for memories without a name
  (:data:`NOTES_TYPE`) give no such edges.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field

from memory_orchestrator.adapters.mcp_kg.graph import Graph, cause_first, edge_type
from memory_orchestrator.adapters.mcp_kg.sidecar import Row
from memory_orchestrator.ports import Edge, EdgeType, MemoryRecord, Neighbor
from memory_orchestrator.ports.autolinks import MemorySketch, sketch
from memory_orchestrator.ports.text import content_hash, tokenize

#: Weight of an edge made from a relation the server stores.
RELATION_WEIGHT = 0.9
#: Weight of the edge between two observations of one entity.
SIBLING_WEIGHT = 0.5
#: Entity type of the holder entity of memories written without an entity name.
NOTES_TYPE = "orchestrator_notes"
#: Source of observations found in the graph that the orchestrator did not write.
ADOPTED_SOURCE = "mcp_kg"
K1, B = 1.2, 0.75

Admits = Callable[[MemoryRecord], bool]


def record_of(row: Row, entity_type: str, superseded_by: tuple[str, ...] = ()) -> MemoryRecord:
    """The memory a sidecar row stands for (an adopted observation: its entity, its type as a tag)."""
    tags: tuple[str, ...]
    entities: tuple[str, ...]
    if row.adopted:
        tags = (entity_type,) if entity_type else ()
        entities = (row.entity,) if entity_type != NOTES_TYPE else ()
    else:
        tags, entities = row.tags, row.entities
    return MemoryRecord(
        row.id,
        row.text,
        row.created_at,
        row.updated_at,
        row.category,
        row.importance,
        tags,
        entities,
        row.source,
        row.metadata,
        superseded_by,
    )


@dataclass(slots=True)
class Lexicon:
    """BM25 (k1 1.2, b 0.75) over the active observations."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)
    postings: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    total: int = 0

    def add(self, memory_id: str, text: str, counts: Counter[str] | None = None) -> None:
        """Index one memory (``counts``: its token counts, when already known)."""
        counts = Counter(tokenize(text)) if counts is None else counts
        self.counts[memory_id] = counts
        self.total += sum(counts.values())
        for token in counts:
            self.postings[token].add(memory_id)

    def scores(self, text: str) -> dict[str, float]:
        """Memory id -> BM25 score, for the memories sharing a term with ``text``."""
        terms = {term for term in tokenize(text) if term in self.postings}
        count = len(self.counts)
        if not terms or not count:
            return {}
        average = self.total / count or 1.0
        scores: dict[str, float] = defaultdict(float)
        for term in terms:
            holders = self.postings[term]
            idf = max(1e-6, math.log((count - len(holders) + 0.5) / (len(holders) + 0.5)))
            for memory_id in holders:
                counts = self.counts[memory_id]
                tf = counts[term]
                length = sum(counts.values())
                scores[memory_id] += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))
        return dict(scores)


@dataclass(slots=True)
class Snapshot:
    """Active memories with their observations, indexes and edges."""

    records: dict[str, MemoryRecord] = field(default_factory=dict)
    holder: dict[str, str] = field(default_factory=dict)
    members: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    by_observation: dict[tuple[str, str], list[str]] = field(default_factory=lambda: defaultdict(list))
    entity_types: dict[str, str] = field(default_factory=dict)
    relations: dict[str, list[tuple[str, str, bool]]] = field(default_factory=lambda: defaultdict(list))
    adjacent: dict[str, list[Edge]] = field(default_factory=lambda: defaultdict(list))
    by_hash: dict[str, str] = field(default_factory=dict)
    lexicon: Lexicon = field(default_factory=Lexicon)
    sketches: list[MemorySketch] = field(default_factory=list)
    spellings: dict[str, str] = field(default_factory=dict)
    entity_uses: Counter[str] = field(default_factory=Counter)
    newest: list[MemoryRecord] = field(default_factory=list)
    used_ids: set[str] = field(default_factory=set)
    #: The row each record and sketch was made from (lets the next build reuse them).
    rows: dict[str, Row] = field(default_factory=dict)
    sketch_of: dict[str, MemorySketch] = field(default_factory=dict)

    def known(self, candidates: Iterable[str]) -> dict[str, str]:
        """The entity names among ``candidates`` (casefolded) -> their stored spelling."""
        return {key: self.spellings[key] for key in candidates if key in self.spellings}

    # -- the walk -------------------------------------------------------------------------------

    def edges_of(self, origin: str, allowed: Collection[EdgeType]) -> Iterable[Edge]:
        """Every edge touching ``origin``: sidecar, relation and same-entity edges."""
        yield from (edge for edge in self.adjacent.get(origin, ()) if edge.type in allowed)
        entity = self.holder[origin]
        for other_entity, name, outgoing in self.relations.get(entity, ()):
            kind = edge_type(name)
            if kind not in allowed:
                continue
            source, target = (entity, other_entity) if outgoing else (other_entity, entity)
            meta = {"sub_type": "relation", "relation": name, "evidence": f"{source} {name} {target}"}
            # A causal edge runs cause -> effect; "B caused_by A" is stored B -> A by the server.
            forward = outgoing if kind is not EdgeType.CAUSAL or cause_first(name) else not outgoing
            for other in self.members.get(other_entity, ()):
                ends = (origin, other) if forward else (other, origin)
                yield Edge(ends[0], ends[1], kind, RELATION_WEIGHT, meta)
        if EdgeType.ENTITY in allowed and self.entity_types.get(entity) != NOTES_TYPE:
            meta = {"sub_type": "same_entity", "entities": entity}
            for other in self.members.get(entity, ()):
                if other != origin:
                    yield Edge(origin, other, EdgeType.ENTITY, SIBLING_WEIGHT, meta)

    def one_hop(
        self,
        frontier: Sequence[str],
        allowed: Collection[EdgeType],
        visited: set[str],
        admits: Admits,
        hop: int,
    ) -> list[Neighbor]:
        """The strongest edge per (reached memory, edge type) from ``frontier``."""
        best: dict[tuple[str, EdgeType], Neighbor] = {}
        for origin in frontier:
            for edge in self.edges_of(origin, allowed):
                other = edge.target if edge.source == origin else edge.source
                if other in visited or other not in self.records:
                    continue
                record = self.records[other]
                if not admits(record):
                    continue
                current = best.get((other, edge.type))
                if current is None or (-edge.weight, origin) < (-current.edge.weight, current.from_id):
                    best[(other, edge.type)] = Neighbor(record, edge, origin, hop)
        return list(best.values())

    def walk(
        self, ids: Sequence[str], allowed: Collection[EdgeType], hops: int, limit: int, admits: Admits
    ) -> list[Neighbor]:
        """Breadth-first over every edge kind, both directions, strongest first, ties by id."""
        visited = set(ids)
        frontier = [memory_id for memory_id in dict.fromkeys(ids) if memory_id in self.records]
        found: list[Neighbor] = []
        for hop in range(1, hops + 1):
            reached = sorted(self.one_hop(frontier, allowed, visited, admits, hop), key=_order)[:limit]
            found.extend(reached)
            frontier = list(dict.fromkeys(item.record.id for item in reached))
            visited.update(frontier)
            if not frontier:
                break
        return sorted(found, key=_order)[:limit]


def _order(item: Neighbor) -> tuple[float, int, str, str]:
    return (-item.edge.weight, item.hops, item.record.id, item.edge.type.value)


def build(
    graph: Graph, rows: Sequence[Row], edges: Sequence[Edge], previous: Snapshot | None = None
) -> Snapshot:
    """The snapshot of a reconciled graph: ``rows`` active ones all stand for observations in ``graph``.

    Records, sketches and token counts of rows unchanged since ``previous`` are reused (a write then
    costs a fraction of a full build).
    """
    previous = previous or Snapshot()
    snap = Snapshot()
    snap.used_ids = {row.id for row in rows}
    snap.entity_types = {entity.name: entity.entity_type for entity in graph.entities}
    superseders: dict[str, list[str]] = defaultdict(list)
    active = [row for row in rows if row.forgotten_at is None]
    live = {row.id for row in active}
    for edge in edges:
        if edge.source in live and edge.target in live:
            snap.adjacent[edge.source].append(edge)
            snap.adjacent[edge.target].append(edge)
            if edge.type is EdgeType.SUPERSEDES:
                superseders[edge.target].append(edge.source)
    for row in active:
        superseded_by = tuple(sorted(superseders[row.id]))
        kind = snap.entity_types.get(row.entity, "")
        old = previous.records.get(row.id)
        unchanged = (
            old is not None
            and previous.rows.get(row.id) == row
            and old.superseded_by == superseded_by
            and previous.entity_types.get(row.entity, "") == kind
        )
        record = old if unchanged and old is not None else record_of(row, kind, superseded_by)
        snap.rows[row.id] = row
        snap.records[row.id] = record
        snap.holder[row.id] = row.entity
        snap.members[row.entity].append(row.id)
        snap.by_observation[(row.entity, row.text)].append(row.id)
        digest = content_hash(row.text)
        current = snap.by_hash.get(digest)
        if current is None or (record.created_at, record.id) < _age(snap.records[current]):
            snap.by_hash[digest] = row.id
        reused = unchanged or previous.rows.get(row.id, None) == row
        snap.lexicon.add(row.id, row.text, previous.lexicon.counts.get(row.id) if reused else None)
        drawn = previous.sketch_of.get(row.id) if unchanged else None
        snap.sketch_of[row.id] = drawn or sketch(record)
        snap.sketches.append(snap.sketch_of[row.id])
        for name in record.entities:
            snap.spellings.setdefault(name.casefold(), name)
            snap.entity_uses[name.casefold()] += 1
    for relation in graph.relations:
        snap.relations[relation.source].append((relation.target, relation.name, True))
        snap.relations[relation.target].append((relation.source, relation.name, False))
    snap.newest = sorted(snap.records.values(), key=_age, reverse=True)
    return snap


def _age(record: MemoryRecord) -> tuple[object, str]:
    return (record.created_at, record.id)
