"""The in-memory store's data and indexes: what the reference backend keeps and how it finds things.

The indexes (time-sorted lists per source and entity, token postings, adjacency, supersession) keep
writes and reads proportional to what they touch, so the fake stays usable with thousands of memories.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from memory_orchestrator.ports import Edge, EdgeType, Filters, MemoryRecord, Neighbor
from memory_orchestrator.ports.autolinks import DEFAULT_LIMITS, LinkLimits, MemorySketch
from memory_orchestrator.ports.text import CONTEXT_WEIGHT, CONTEXT_WINDOW

EdgeKey = tuple[str, str, EdgeType]
TimeKey = tuple[datetime, str]

#: A memory sharing fewer than this share of the new memory's tokens cannot pass any similarity rule.
MIN_SHARED_TOKENS = 0.3


@dataclass(slots=True)
class StoredMemory:
    """One memory as the in-memory store holds it."""

    record: MemoryRecord
    content_hash: str
    sketch: MemorySketch
    token_counts: Counter[str]
    deleted_at: datetime | None = None
    #: The tokens of the memory just before it (context at index time, as SQLite keeps them).
    context_counts: Counter[str] = field(default_factory=Counter)

    @property
    def token_total(self) -> int:
        """Number of tokens of the content."""
        return sum(self.token_counts.values())

    @property
    def indexed_total(self) -> int:
        """Its BM25 length: its own tokens and its context's, as FTS5 counts a row's columns."""
        return self.token_total + sum(self.context_counts.values())


def _nearest(keys: list[TimeKey], moment: datetime, before: int, after: int) -> list[str]:
    position = bisect.bisect_right(keys, (moment, "\uffff"))
    return [memory_id for _, memory_id in keys[max(0, position - before) : position + after]]


class MemoryState:
    """Memories, edges and the indexes over the active ones."""

    def __init__(self) -> None:
        self.memories: dict[str, StoredMemory] = {}
        self.edges: dict[EdgeKey, Edge] = {}
        self._by_time: list[TimeKey] = []
        self._by_source: dict[str, list[TimeKey]] = {}
        self._by_entity: dict[str, list[TimeKey]] = {}
        self._postings: dict[str, set[str]] = {}
        self._context_postings: dict[str, set[str]] = {}
        self._by_hash: dict[str, list[str]] = {}
        self._adjacent: dict[str, set[EdgeKey]] = {}
        self._superseders: dict[str, set[str]] = {}
        self._spelling: dict[str, str] = {}
        self._token_total = 0

    # -- memories -------------------------------------------------------------------------------

    def is_active(self, memory_id: str) -> bool:
        """True when the memory exists and is not forgotten."""
        stored = self.memories.get(memory_id)
        return stored is not None and stored.deleted_at is None

    def active(self) -> list[StoredMemory]:
        """Every active memory, oldest first."""
        return [self.memories[memory_id] for _, memory_id in self._by_time]

    def add(self, stored: StoredMemory) -> None:
        """Store a new memory and index it."""
        record = stored.record
        self.memories[record.id] = stored
        key = (record.created_at, record.id)
        for keys in self._time_lists(stored):
            bisect.insort(keys, key)
        for token in stored.token_counts:
            self._postings.setdefault(token, set()).add(record.id)
        self._by_hash.setdefault(stored.content_hash, []).append(record.id)
        self._token_total += stored.token_total
        for name in record.entities:
            self._spelling.setdefault(name.casefold(), name)
        self._set_context(stored)
        self._refresh_neighbours(key)

    def remove(self, memory_id: str, at: datetime) -> None:
        """Soft-delete a memory: it leaves every index (its edges are skipped on read)."""
        stored = self.memories[memory_id]
        stored.deleted_at = at
        key = (stored.record.created_at, memory_id)
        for keys in self._time_lists(stored):
            keys.remove(key)
        for token in stored.token_counts:
            self._postings[token].discard(memory_id)
        self._by_hash[stored.content_hash].remove(memory_id)
        self._token_total -= stored.token_total
        self._drop_context(stored)
        self._refresh_neighbours(key)

    # -- context at index time (adapters/sqlite/context.py) --------------------------------------

    def _around(self, key: TimeKey) -> list[StoredMemory]:
        """The active memories just before and just after ``key`` (which may be indexed or not)."""
        position = bisect.bisect_left(self._by_time, key)
        after = position + 1 if position < len(self._by_time) and self._by_time[position] == key else position
        indexes = [index for index in (position - 1, after) if 0 <= index < len(self._by_time)]
        return [self.memories[self._by_time[index][1]] for index in indexes]

    def _set_context(self, stored: StoredMemory) -> None:
        record = stored.record
        context: Counter[str] = Counter()
        for other in self._around((record.created_at, record.id)):
            near = abs(other.record.created_at - record.created_at) <= CONTEXT_WINDOW
            if near and other.record.source != record.source:
                context.update(other.token_counts)
        stored.context_counts = context
        for token in context:
            self._context_postings.setdefault(token, set()).add(record.id)
        self._token_total += sum(context.values())

    def _drop_context(self, stored: StoredMemory) -> None:
        for token in stored.context_counts:
            self._context_postings[token].discard(stored.record.id)
        self._token_total -= sum(stored.context_counts.values())
        stored.context_counts = Counter()

    def _refresh_neighbours(self, key: TimeKey) -> None:
        """The memories around ``key`` re-derive their context (it was just added or removed)."""
        for neighbour in self._around(key):
            self._drop_context(neighbour)
            self._set_context(neighbour)

    def _time_lists(self, stored: StoredMemory) -> list[list[TimeKey]]:
        lists = [self._by_time, self._by_source.setdefault(stored.record.source, [])]
        lists.extend(self._by_entity.setdefault(name, []) for name in stored.sketch.entities)
        return lists

    def with_hash(self, digest: str) -> StoredMemory | None:
        """The oldest active memory of this content hash."""
        ids = self._by_hash.get(digest) or []
        found = [self.memories[memory_id] for memory_id in ids]
        return min(found, key=lambda item: (item.record.created_at, item.record.id), default=None)

    def view(self, stored: StoredMemory) -> MemoryRecord:
        """The record as reads return it (``superseded_by`` filled in)."""
        sources = sorted(s for s in self._superseders.get(stored.record.id, ()) if self.is_active(s))
        return replace(stored.record, superseded_by=tuple(sources)) if sources else stored.record

    def admitted(self, memory_ids: Iterable[str], filters: Filters, now: datetime) -> list[MemoryRecord]:
        """The active memories among ``memory_ids`` created at or before ``now`` and passing ``filters``."""
        records = (self.view(self.memories[i]) for i in memory_ids if self.is_active(i))
        return [record for record in records if record.created_at <= now and filters.admits(record)]

    def containing(self, tokens: Iterable[str], filters: Filters, now: datetime) -> list[MemoryRecord]:
        """Visible memories containing any of ``tokens`` (found through the postings, not a scan)."""
        ids: set[str] = set()
        for token in set(tokens):
            ids.update(self._postings.get(token, ()))
            ids.update(self._context_postings.get(token, ()))
        return self.admitted(sorted(ids), filters, now)

    def carrying(
        self, names: Iterable[str], filters: Filters, now: datetime, limit: int
    ) -> list[MemoryRecord]:
        """Visible memories carrying any of the (casefolded) entity ``names``, newest first."""
        keys: set[TimeKey] = set()
        for name in set(names):
            keys.update(self._by_entity.get(name, ()))
        ordered = [memory_id for _, memory_id in sorted(keys, reverse=True)]
        return self.admitted(ordered, filters, now)[:limit]

    def newest(self, filters: Filters, now: datetime, limit: int) -> list[MemoryRecord]:
        """The newest visible memories, newest first, reading back from ``now`` only as far as needed."""
        position = bisect.bisect_right(self._by_time, (now, "\uffff"))
        found: list[MemoryRecord] = []
        for _, memory_id in reversed(self._by_time[:position]):
            record = self.view(self.memories[memory_id])
            if filters.admits(record):
                found.append(record)
                if len(found) == limit:
                    break
        return found

    def ranked_names(self) -> list[str]:
        """Entity names of active memories, most used first, ties alphabetical (casefolded)."""
        counts = self.entity_counts()
        return [self._spelling[key] for key in sorted(counts, key=lambda key: (-counts[key], key))]

    def known_names(self, candidates: Iterable[str]) -> dict[str, str]:
        """The entity names of active memories among ``candidates`` (casefolded -> spelling)."""
        return {key: self._spelling[key] for key in candidates if self._by_entity.get(key)}

    def entity_counts(self) -> dict[str, int]:
        """Active memories per casefolded entity name."""
        return {name: len(keys) for name, keys in self._by_entity.items() if keys}

    # -- write-time candidates ------------------------------------------------------------------

    def candidates(self, new: MemorySketch, limits: LinkLimits = DEFAULT_LIMITS) -> list[MemorySketch]:
        """Every memory the link rules could pick for ``new`` (the same sets SQLite gathers, exactly)."""
        window = timedelta(hours=limits.proximity_hours)
        ids = set(_nearest(self._by_source.get(new.source, []), new.created_at, limits.causal_window + 1, 2))
        near = _nearest(self._by_time, new.created_at, limits.proximity_max + 1, limits.proximity_max + 1)
        ids.update(i for i in near if abs(self.memories[i].record.created_at - new.created_at) <= window)
        per_name = limits.entity_per_name + 1
        for name in new.entities:
            ids.update(_nearest(self._by_entity.get(name, []), new.created_at, per_name, per_name))
        ids.update(self._lexically_close(new))
        ids.discard(new.id)
        return [self.memories[memory_id].sketch for memory_id in sorted(ids)]

    def _lexically_close(self, new: MemorySketch) -> Iterable[str]:
        shared: Counter[str] = Counter()
        for token in new.tokens:
            shared.update(self._postings.get(token, ()))
        needed = max(1, math.ceil(MIN_SHARED_TOKENS * len(new.tokens)))
        return [memory_id for memory_id, count in shared.items() if count >= needed]

    # -- edges ----------------------------------------------------------------------------------

    def store_edge(self, edge: Edge) -> None:
        """Insert or replace an edge; a symmetric kind also replaces the pair stored the other way."""
        if edge.type is not EdgeType.SUPERSEDES:
            self._drop_edge((edge.target, edge.source, edge.type))
        key = (edge.source, edge.target, edge.type)
        self.edges[key] = edge
        self._adjacent.setdefault(edge.source, set()).add(key)
        self._adjacent.setdefault(edge.target, set()).add(key)
        if edge.type is EdgeType.SUPERSEDES:
            self._superseders.setdefault(edge.target, set()).add(edge.source)

    def _drop_edge(self, key: EdgeKey) -> None:
        if self.edges.pop(key, None) is not None:
            self._adjacent[key[0]].discard(key)
            self._adjacent[key[1]].discard(key)

    def one_hop(
        self, frontier: Iterable[str], allowed: set[EdgeType], visited: set[str], filters: Filters, hop: int
    ) -> list[Neighbor]:
        """Best edge per (reached memory, edge type) from the frontier, over edges in both directions."""
        best: dict[tuple[str, EdgeType], Neighbor] = {}
        for origin in frontier:
            for key in self._adjacent.get(origin, ()):
                edge = self.edges[key]
                other = key[1] if key[0] == origin else key[0]
                if edge.type not in allowed or other in visited or not self.is_active(other):
                    continue
                record = self.view(self.memories[other])
                if not filters.admits(record):
                    continue
                current = best.get((other, edge.type))
                if current is None or (-edge.weight, origin) < (-current.edge.weight, current.from_id):
                    best[(other, edge.type)] = Neighbor(record, edge, origin, hop)
        return list(best.values())

    # -- keyword scoring ------------------------------------------------------------------------

    def bm25(
        self, query_tokens: Iterable[str], records: list[MemoryRecord]
    ) -> list[tuple[MemoryRecord, float]]:
        """BM25 of ``records`` exactly as SQLite FTS5 computes it; only those sharing a term, best first.

        Statistics (row count, document frequency, average length) cover every active memory, as the
        FTS index does; idf = ln((N - n + 0.5) / (n + 0.5)) floored at 1e-6, k1 = 1.2, b = 0.75. A
        term's frequency is its count in the memory plus ``CONTEXT_WEIGHT`` times its count in the
        context; a row's length counts both, as FTS5 weighs its two columns.
        """
        rows = {
            term: self._postings.get(term, set()) | self._context_postings.get(term, set())
            for term in set(query_tokens)
        }
        terms = {term for term, ids in rows.items() if ids}
        active = len(self._by_time)
        if not terms or not records or not active:
            return []
        average = self._token_total / active or 1.0
        idf = {
            term: max(1e-6, math.log((active - len(rows[term]) + 0.5) / (len(rows[term]) + 0.5)))
            for term in terms
        }
        scored: list[tuple[MemoryRecord, float]] = []
        for record in records:
            stored = self.memories[record.id]
            own, context = stored.token_counts, stored.context_counts
            matched = [term for term in terms if term in own or term in context]
            if not matched:
                continue
            length = stored.indexed_total
            score = 0.0
            for term in matched:
                tf = own[term] + CONTEXT_WEIGHT * context[term]
                score += idf[term] * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / average))
            scored.append((record, score))
        scored.sort(key=lambda pair: (-pair[1], -pair[0].created_at.timestamp(), pair[0].id))
        return scored
