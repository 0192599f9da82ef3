"""Records exchanged between the domain and the memory backends.

All records are frozen, slotted dataclasses with aware UTC datetimes. Collections are tuples so that
records stay immutable; mappings (``metadata``, ``signals``) are excluded from hashing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any, TypeVar

_T = TypeVar("_T")


class EdgeType(StrEnum):
    """The typed edges of the four-graph store, plus supersession."""

    TEMPORAL = "temporal"
    ENTITY = "entity"
    CAUSAL = "causal"
    SEMANTIC = "semantic"
    SUPERSEDES = "supersedes"


class Intent(StrEnum):
    """What a question is after; it decides which edges expansion prefers."""

    WHY = "WHY"
    WHEN = "WHEN"
    ENTITY = "ENTITY"
    GENERAL = "GENERAL"


class WriteAction(StrEnum):
    """What a write did: stored a new memory, found an existing one, or replaced one."""

    ADDED = "added"
    SKIPPED = "skipped"
    UPDATED = "updated"


class ChangeKind(StrEnum):
    """Kinds of change reported by :meth:`MemoryBackend.changes`."""

    ADDED = "added"
    UPDATED = "updated"
    SUPERSEDED = "superseded"
    FORGOTTEN = "forgotten"


#: Memory categories shared with Mnemon.
CATEGORIES: tuple[str, ...] = ("preference", "decision", "fact", "insight", "context", "general")

#: Bounds shared by every backend (Mnemon's limits, so data moves freely between backends).
MAX_CONTENT_BYTES = 8000
MAX_TAGS = 20
MAX_TAG_CHARS = 100
MAX_ENTITIES = 50
MAX_ENTITY_CHARS = 200
MAX_SOURCE_CHARS = 100

EMPTY_MAPPING: Mapping[str, str] = MappingProxyType({})


def _frozen(mapping: Mapping[str, str] | None) -> Mapping[str, str]:
    # A read-only view is kept as given: the automatic edges of every write share a few constant ones.
    if type(mapping) is MappingProxyType:
        return mapping
    return frozen(mapping) if mapping else EMPTY_MAPPING


def frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    """A read-only copy of ``mapping``, which records keep as it is instead of copying it again (for
    metadata many records share)."""
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One stored memory as a backend returns it."""

    id: str
    content: str
    created_at: datetime
    updated_at: datetime
    category: str = "general"
    importance: int = 3
    tags: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    source: str = "user"
    metadata: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAPPING, hash=False, compare=False)
    #: Ids of memories that supersede this one (empty when it is current).
    superseded_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _frozen(self.metadata))


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A request to store a memory. ``created_at`` may lie in the past (back-dated import)."""

    content: str
    category: str = "general"
    importance: int = 3
    tags: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    source: str = "user"
    created_at: datetime | None = None
    metadata: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAPPING, hash=False, compare=False)
    #: False stores the content even when an identical active memory exists.
    dedup: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _frozen(self.metadata))


@dataclass(frozen=True, slots=True)
class Edge:
    """A typed, weighted, directed edge ``source -> target``.

    For ``supersedes`` the direction matters: ``source`` replaces ``target``. Other types are written in
    both directions by the backends, so traversal sees them from either end.
    """

    source: str
    target: str
    type: EdgeType
    weight: float = 1.0
    metadata: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAPPING, hash=False, compare=False)
    created_at: datetime | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _frozen(self.metadata))

    def stamped(self, now: datetime) -> Edge:
        """The edge as a backend stores it: its type an ``EdgeType`` (a plain string is taken too), made
        ``now`` unless it says when."""
        return Edge(
            self.source, self.target, EdgeType(self.type), self.weight, self.metadata, self.created_at or now
        )


def automatic_edge(
    source: str, target: str, type: EdgeType, weight: float, metadata: Mapping[str, str], at: datetime
) -> Edge:
    """``Edge(source, target, type, weight, metadata, at)`` at half the cost: the write path makes ~25
    edges per memory, and a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__`` (a name lookup per field); here each field goes straight to its slot. The
    metadata is made read-only as ``__post_init__`` makes it (a ``frozen`` mapping is kept as given)."""
    edge = _new_object(Edge)
    _set_source(edge, source)
    _set_target(edge, target)
    _set_type(edge, type)
    _set_weight(edge, weight)
    _set_metadata(edge, _frozen(metadata))
    _set_created_at(edge, at)
    return edge


_new_object = object.__new__


def _slot_setters(cls: type, names: str) -> tuple[Callable[[Any, Any], None], ...]:
    # The slots' own setters (member descriptors), which a frozen class's __setattr__ does not guard.
    return tuple(cls.__dict__[name].__set__ for name in names.split())


_set_source, _set_target, _set_type, _set_weight, _set_metadata, _set_created_at = _slot_setters(
    Edge, "source target type weight metadata created_at"
)


def stored_record(
    memory_id: str,
    content: str,
    created_at: datetime,
    updated_at: datetime,
    category: str,
    importance: int,
    tags: tuple[str, ...],
    entities: tuple[str, ...],
    source: str,
    metadata: Mapping[str, str],
    superseded_by: tuple[str, ...],
) -> MemoryRecord:
    """``MemoryRecord(...)`` of every field, at half the cost (as :func:`automatic_edge`): a graph
    walk reads a few hundred memories per call, a keyword search fifty."""
    record = _new_object(MemoryRecord)
    _record_id(record, memory_id)
    _record_content(record, content)
    _record_created(record, created_at)
    _record_updated(record, updated_at)
    _record_category(record, category)
    _record_importance(record, importance)
    _record_tags(record, tags)
    _record_entities(record, entities)
    _record_source(record, source)
    _record_metadata(record, _frozen(metadata))
    _record_superseded_by(record, superseded_by)
    return record


(
    _record_id,
    _record_content,
    _record_created,
    _record_updated,
    _record_category,
    _record_importance,
    _record_tags,
    _record_entities,
    _record_source,
    _record_metadata,
    _record_superseded_by,
) = _slot_setters(
    MemoryRecord,
    "id content created_at updated_at category importance tags entities source metadata superseded_by",
)


@dataclass(frozen=True, slots=True)
class TimeRange:
    """A half-open interval ``[start, end)`` on ``created_at``; either side may be open."""

    start: datetime | None = None
    end: datetime | None = None

    def contains(self, moment: datetime) -> bool:
        """True when ``moment`` lies inside the range."""
        if self.start is not None and moment < self.start:
            return False
        return not (self.end is not None and moment >= self.end)


@dataclass(frozen=True, slots=True)
class Filters:
    """Restrictions every retrieval call honours (natively or, failing that, in the domain).

    Empty tuples mean "no restriction". ``entities`` matches memories carrying any of the names
    (case-insensitive). ``time_range`` restricts ``created_at``.
    """

    categories: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    time_range: TimeRange | None = None

    def is_empty(self) -> bool:
        """True when nothing is restricted."""
        return not (self.categories or self.sources or self.entities or self.time_range)

    def admits(self, record: MemoryRecord) -> bool:
        """True when ``record`` passes every restriction (the domain-side fallback)."""
        if self.categories and record.category not in self.categories:
            return False
        if self.sources and record.source not in self.sources:
            return False
        if self.entities:
            wanted = {name.casefold() for name in self.entities}
            if not wanted.intersection(name.casefold() for name in record.entities):
                return False
        return not (self.time_range and not self.time_range.contains(record.created_at))


@dataclass(frozen=True, slots=True)
class RecallQuery:
    """The backend's own retrieval request.

    ``now`` is the moment the question is asked: recency is measured from it, and memories created
    after it are invisible (an "as of" query). ``None`` means the backend's wall clock.
    """

    text: str
    limit: int = 10
    intent: Intent | None = None
    filters: Filters = Filters()
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class Hit:
    """A memory found by a retrieval channel.

    ``score`` is the channel's own score (higher is better, not comparable across channels);
    ``signals`` holds the per-signal parts it was made of; ``via`` names how it was reached
    (``keyword``, ``recency``, ``entity``, ``vector``, ``recall``, or an edge type).
    """

    record: MemoryRecord
    score: float
    via: str = "recall"
    signals: Mapping[str, float] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True, slots=True)
class Neighbor:
    """A memory reached from ``from_id`` over ``edge`` (``edge`` keeps its stored direction)."""

    record: MemoryRecord
    edge: Edge
    from_id: str
    hops: int = 1


def reached_neighbor(record: MemoryRecord, edge: Edge, from_id: str, hops: int) -> Neighbor:
    """``Neighbor(record, edge, from_id, hops)`` without the frozen dataclass's ``__init__``."""
    neighbor = _new_object(Neighbor)
    _neighbor_record(neighbor, record)
    _neighbor_edge(neighbor, edge)
    _neighbor_from(neighbor, from_id)
    _neighbor_hops(neighbor, hops)
    return neighbor


_neighbor_record, _neighbor_edge, _neighbor_from, _neighbor_hops = _slot_setters(
    Neighbor, "record edge from_id hops"
)


def edge_strength(type_weight: float, edge_weight: float) -> float:
    """How strongly an edge carries a graph walk: its type's weight times its own weight clamped to
    0..1. The walk ranks and floors neighbours by it, so a store ranking a hop for the walk
    (``RankedNeighbors``, ``NeighborFloors``) computes it with this very function."""
    return type_weight * min(1.0, max(0.0, edge_weight))


@dataclass(frozen=True, slots=True)
class NeighborFloors:
    """What a graph walk can use of one ranked hop (``RankedNeighbors.strongest_neighbors``).

    Per origin its entries are ordered by ``scale`` times their strength (strongest first, ties by
    the reached memory's id); the one at position ``k`` (from 0) is left out when its strength is
    below ``base[origin] * (1 + growth * max(0, k - slack))``, unless it is among the origin's first
    ``slack + 1`` entries in the order the hop returns them (a walk meets the origins in that order).
    An origin missing from ``base`` keeps every entry. The floors apply after the hop's ``limit``,
    so what is left is what the hop returns without them, less the weak entries."""

    base: Mapping[str, float]
    growth: float = 0.0
    slack: int = 0
    scale: float = 1.0

    def keep(
        self,
        entries: Sequence[_T],
        origin: Callable[[_T], str],
        reached: Callable[[_T], str],
        strength: Callable[[_T], float],
    ) -> list[_T]:
        """``entries`` (in the hop's order) less those below their origin's floor."""
        scale, strengths = self.scale, [strength(entry) for entry in entries]
        ranked = sorted(range(len(entries)), key=lambda at: (-(strengths[at] * scale), reached(entries[at])))
        positions: dict[int, int] = {}
        counts: dict[str, int] = {}
        for at in ranked:
            key = origin(entries[at])
            positions[at] = counts.get(key, 0)
            counts[key] = positions[at] + 1
        met: dict[str, int] = {}
        kept = []
        for at, entry in enumerate(entries):
            key = origin(entry)
            seen = met[key] = met.get(key, 0) + 1
            base = self.base.get(key)
            floor = 0.0 if base is None else base * (1.0 + self.growth * max(0, positions[at] - self.slack))
            if seen <= self.slack + 1 or strengths[at] >= floor:
                kept.append(entry)
        return kept


@dataclass(frozen=True, slots=True)
class LinkCandidate:
    """An existing memory a write could be linked to; the agent may confirm it with ``link``."""

    id: str
    content: str
    similarity: float
    edge_type: EdgeType = EdgeType.SEMANTIC
    reason: str = ""

    def __reduce__(self) -> tuple[type[LinkCandidate], tuple[str, str, float, EdgeType, str]]:
        # Pickled as a call of the class: a bulk import's helper process sends ~4 a write. The
        # frozen dataclass's own state methods (a Python call per candidate that lists its fields
        # again) loaded 448 writes' candidates in 6.2 ms; as a call, in 1.5 ms.
        return (LinkCandidate, (self.id, self.content, self.similarity, self.edge_type, self.reason))


@dataclass(frozen=True, slots=True)
class WriteResult:
    """The outcome of ``remember``.

    On ``skipped`` ``id`` is the existing memory's id and ``duplicate_of`` repeats it.
    """

    id: str
    action: WriteAction
    duplicate_of: str | None = None
    candidates: tuple[LinkCandidate, ...] = ()
    edges_created: Mapping[str, int] = field(default_factory=dict, hash=False, compare=False)
    record: MemoryRecord | None = None


@dataclass(frozen=True, slots=True)
class Change:
    """One entry of a backend's change history."""

    kind: ChangeKind
    memory_id: str
    at: datetime
    record: MemoryRecord | None = None
    detail: str = ""


def superseded_change(edge: Edge, at: datetime) -> Change | None:
    """What storing ``edge`` at ``at`` adds to the change history: its target superseded by its
    source for a ``supersedes`` edge, nothing for any other."""
    if edge.type is not EdgeType.SUPERSEDES:
        return None
    return Change(ChangeKind.SUPERSEDED, edge.target, at, detail=f"superseded by {edge.source}")


@dataclass(frozen=True, slots=True)
class HealthCheck:
    """One named readiness check: ``status`` is ``ok``, ``degraded`` or ``error``."""

    name: str
    status: str
    detail: str = ""
    duration_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class BackendHealth:
    """What a backend says about itself."""

    backend: str
    status: str
    checks: tuple[HealthCheck, ...] = ()
    version: str = ""
    memory_count: int | None = None
    details: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAPPING, hash=False, compare=False)

    @property
    def ok(self) -> bool:
        """True unless the backend is in error."""
        return self.status != "error"


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a backend can do natively; the domain branches on these, never on the backend's type."""

    keyword_search: bool = True
    vector_search: bool = False
    native_recall: bool = True
    intent_recall: bool = False
    neighbors: bool = True
    supersedes: bool = True
    backdated_writes: bool = True
    forget: bool = True
    time_filters: bool = True
    entity_filters: bool = True
    category_filters: bool = True
    source_filters: bool = True
    change_log: bool = True
    known_entities: bool = True
    #: ``remember_many`` stores a batch faster than one ``remember`` per memory (see ``BulkWriter``).
    bulk_writes: bool = False
    #: Memories per ``remember_many`` call a bulk caller (an import) hands over at once.
    bulk_batch: int = 250
    #: ``strongest_neighbors`` ranks, caps and floors one hop in the store (see ``RankedNeighbors``).
    ranked_neighbors: bool = False
    #: ... and takes ``floors`` (``NeighborFloors``): what a graph walk cannot use is never loaded.
    neighbor_floors: bool = False
