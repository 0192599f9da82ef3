"""What a batch knows in memory: the store as it was when the batch began, plus its own memories.

A write at a time asks SQLite for its candidates (``writes.candidate_ids``), the counts of its terms
and the statistics of its entity names; inside a batch each answer is the store's as the batch found
it merged with the batch's own earlier memories. So the batch reads each part of the store once, at
its first need, and keeps the rest in memory:

- the newest memories of the store, of each source and of each entity name (the nearest-neighbour
  parts of ``writes.nearby_parts`` for a memory dated after them, as ingests in time order are), each
  read one row past its limit so a tie at the limit is seen;
- the newest postings of each term its lexical lookups chose (``memory_terms``), ranked in memory
  (``postings.py``), and the document count of each term (``term_stats``): ``lexicon.py``, which the
  bulk planner's helper also runs ahead of the batch;
- the spelling and use count of each entity name (``entity_stats``), written once at the end with
  the batch's increments, as are the term counts.

A part is first needed by a memory that has it (its source, its names, its terms) before that memory
is stored: so every first read sees the store without the batch, and the batch's rows are added to
it here. Where memory cannot give the answer SQLite gives, the part is asked of SQLite (which sees
the batch's rows): a memory dated before a stored one of its part, or a tie at a part's limit (SQLite
breaks those by its index order, which is no contract). ``tests/unit/test_sqlite_bulk.py`` and
``tests/contract/test_contract_bulk.py`` compare what a batch stores with one write at a time.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right, insort
from collections import Counter
from collections.abc import Collection
from datetime import timedelta

import aiosqlite

from memory_orchestrator.adapters.sqlite import writes
from memory_orchestrator.adapters.sqlite.lexical import ranked_rows
from memory_orchestrator.adapters.sqlite.lexicon import Lexicon
from memory_orchestrator.adapters.sqlite.pending import PendingRows
from memory_orchestrator.adapters.sqlite.rows import stamp
from memory_orchestrator.ports import MemoryRecord
from memory_orchestrator.ports.autolinks import DEFAULT_LIMITS, LinkLimits, MemorySketch

#: Entity names per memory of a batch it reads whole (with more, it looks up each memory's own): a
#: memory's lookup of its ~60 word runs costs about as much as reading 90 names (34 us).
NAMES_PER_MEMORY = 40
#: (created_at stamp, id) of a memory: the order of the nearest-neighbour parts.
Key = tuple[str, str]
#: Above every id, for bisecting at a time.
_LAST = "\U0010ffff"

_NEWEST = "SELECT created_at, id FROM memories WHERE deleted_at IS NULL ORDER BY created_at DESC LIMIT ?"
_NEWEST_OF_SOURCE = (
    "SELECT created_at, id FROM memories WHERE deleted_at IS NULL AND source = ? "
    "ORDER BY created_at DESC, id DESC LIMIT ?"
)
_NEWEST_CARRIERS = (
    "SELECT created_at, memory_id FROM memory_entities WHERE entity_norm = ? ORDER BY created_at DESC LIMIT ?"
)
_SKETCHES = (
    f"SELECT m.rowid, m.deleted_at, {writes.SKETCH_COLUMNS} FROM memories m "
    "LEFT JOIN memories_fts f ON f.rowid = m.rowid WHERE m.rowid IN (SELECT value FROM json_each(?))"
)


class Part:
    """Memories in one order (all of them, one source's, one entity's carriers): the newest of the
    store (newest first, one past the longest limit asked) and the batch's (ascending)."""

    __slots__ = ("added", "stored")

    def __init__(self, stored: list[Key]) -> None:
        self.stored = stored
        self.added: list[Key] = []

    def before(self, at: str, limit: int, *, low: str = "", by_id: bool = False) -> list[str] | None:
        """Ids of the ``limit`` newest with ``low <= created_at <= at``; ``None`` when SQLite must
        answer (a stored one is newer than ``at``, or, unless ``by_id`` breaks ties, a tie at the limit)."""
        stored = self.stored
        if stored and stored[0][0] > at:
            return None
        end = bisect_right(self.added, (at, _LAST))
        rows = self.added[max(0, end - limit - 1) : end] + stored
        rows = [row for row in rows if row[0] >= low]
        rows.sort(reverse=True)
        return _cut(rows, limit, by_id)

    def after(self, at: str, limit: int, *, high: str = _LAST, by_id: bool = False) -> list[str] | None:
        """Ids of the ``limit`` oldest with ``at <= created_at <= high``; ``None`` when SQLite must
        answer (the store has one at ``at`` or later, or, unless ``by_id``, a tie at the limit)."""
        if self.stored and self.stored[0][0] >= at:
            return None
        start = bisect_left(self.added, (at, ""))
        rows = [row for row in self.added[start : start + limit + 1] if row[0] <= high]
        return _cut(rows, limit, by_id)


def _cut(rows: list[Key], limit: int, by_id: bool) -> list[str] | None:
    if len(rows) > limit and not by_id and rows[limit - 1][0] == rows[limit][0]:
        return None  # which of the tied rows SQLite keeps is its index order's business
    return [row[1] for row in rows[:limit]]


class BatchView:
    """The store as a batch sees it (see the module docstring); fed by :meth:`added` after each
    insert, written back by :meth:`flush` before the batch commits."""

    def __init__(self, limits: LinkLimits = DEFAULT_LIMITS, known: writes.RowIds | None = None) -> None:
        self.limits = limits
        #: Ids of rows met by earlier batches (committed), read only here.
        self._known = known or writes.RowIds(0)
        self._everything: Part | None = None
        self._sources: dict[str, Part] = {}
        self._carriers: dict[str, Part] = {}
        #: The lexical lookups' term counts and postings (``lexicon.py``), and the batch's additions
        #: to the counts.
        self.lexicon = Lexicon(0)
        self._new_docs: Counter[str] = Counter()
        #: Entity statistics: casefolded name -> (spelling, uses), None for a name the store lacks.
        self._entities: dict[str, tuple[str, int] | None] = {}
        #: Whether ``_entities`` holds every name of the store (read whole when it has few).
        self._all_names = False
        self._new_uses: Counter[str] = Counter()
        #: The oldest active memory of each content hash asked about or written by the batch.
        self._hashes: dict[str, Key] = {}
        #: rowid -> id of memories met by this batch (its own and stored ones): :attr:`ids`.
        self._ids: dict[int, str] = {}
        #: Lexical lookups SQLite answered (a near tie at the cut: ``lexical.rank_postings``).
        self.lexical_fallbacks = 0
        #: The batch's postings and entity rows not yet written (``pending.py``).
        self.pending = PendingRows()

    @property
    def ids(self) -> dict[int, str]:
        """rowid -> id of the memories this batch met or wrote (for ``RowIds`` once it commits)."""
        return self._ids

    async def start(
        self,
        db: aiosqlite.Connection,
        memories: int,
        digests: Collection[str] = (),
        terms: Collection[str] = (),
    ) -> None:
        """Read what every one of the batch's ``memories`` needs: the newest memories, the store size,
        the entity names if there are few, the oldest active memory of each content hash among
        ``digests`` (those of the memories to deduplicate) and the document counts of ``terms`` (the
        tokens of its memories: one lookup instead of one per memory)."""
        if terms:
            await self.lexicon.count(db, terms)
        if digests:
            sql = "SELECT content_hash, created_at, id FROM memories WHERE deleted_at IS NULL "
            sql += "AND content_hash IN (SELECT value FROM json_each(?))"
            for digest, created, memory_id in await db.execute_fetchall(sql, (json.dumps(sorted(digests)),)):
                self._oldest(str(digest), (str(created), str(memory_id)))
        rows = await db.execute_fetchall(_NEWEST, (self.limits.proximity_max + 2,))
        self._everything = Part([(str(row[0]), str(row[1])) for row in rows])
        found = list(await db.execute_fetchall("SELECT max(rowid) FROM memories"))
        self.lexicon.size = int(found[0][0] or 0) if found else 0
        # A write looks up every run of up to 4 words of its text among the names: with few names
        # (hundreds in most stores) reading them all is cheaper than a lookup per memory.
        most = NAMES_PER_MEMORY * memories
        sql = "SELECT count(*) FROM (SELECT 1 FROM entity_stats LIMIT ?)"
        counted = list(await db.execute_fetchall(sql, (most + 1,)))
        if counted and int(counted[0][0]) <= most:
            rows = await db.execute_fetchall("SELECT entity_norm, name, uses FROM entity_stats")
            self._entities = {str(norm): (str(name), int(uses)) for norm, name, uses in rows}
            self._all_names = True

    def duplicate(self, digest: str) -> str | None:
        """``writes.find_active_duplicate`` of a memory whose hash was among ``start``'s ``digests``."""
        found = self._hashes.get(digest)
        return found[1] if found else None

    def _oldest(self, digest: str, key: Key) -> None:
        # find_active_duplicate's order: created_at, then id
        known = self._hashes.get(digest)
        if known is None or key < known:
            self._hashes[digest] = key

    # -- statistics ---------------------------------------------------------------------------

    async def entity_stats(self, db: aiosqlite.Connection, names: set[str]) -> dict[str, tuple[str, int]]:
        """``writes.entity_stats`` of ``names`` (casefolded) as it would read now."""
        known = self._entities
        if self._all_names:
            return {name: stats for name in names if (stats := known.get(name)) is not None}
        if missing := [name for name in names if name not in known]:
            found = await writes.entity_stats(db, missing)
            for name in missing:
                known[name] = found.get(name)
        return {name: stats for name in names if (stats := known[name]) is not None}

    def rowids(self, dedup: list[bool], digests: list[str]) -> list[int]:
        """The rowid each of the batch's memories (``dedup``: whether each is deduplicated; their
        ``digests``) gets when stored in order right after :meth:`start`: SQLite gives a new row the
        largest rowid plus one; 0 for one skipped as a duplicate (``duplicate``)."""
        rows = []
        last = self.lexicon.size
        written: set[str] = set()
        for deduplicated, digest in zip(dedup, digests, strict=True):
            if deduplicated and (digest in self._hashes or digest in written):
                rows.append(0)
            else:
                last += 1
                written.add(digest)
                rows.append(last)
        return rows

    async def lexical_rows(self, db: aiosqlite.Connection, tokens: frozenset[str]) -> list[int]:
        """``lexical.lexical_rows`` of a memory with ``tokens``, from memory where it can answer."""
        found = await self.lexicon.rows(db, tokens, self.pending)
        if isinstance(found, list):
            return found
        self.lexical_fallbacks += 1
        await self.pending.flush(db)  # SQLite ranks the postings it holds
        return await ranked_rows(db, len(tokens), *found)

    # -- candidates ---------------------------------------------------------------------------

    async def candidates(
        self,
        db: aiosqlite.Connection,
        new: MemorySketch,
        cache: writes.SketchCache,
        lexical: list[int] | None = None,
    ) -> list[str]:
        """``writes.candidate_ids(db, new)``, from memory where it can answer (``lexical``: the
        lexical rows, when the helper looked them up ahead); the sketches of those it reads from
        SQLite go into ``cache``."""
        await self._read_parts(db, new)
        ids = self._nearby(new)
        if ids is None:
            await self.pending.flush(db)  # the carriers' part of the lookup reads memory_entities
            ids = await writes.nearby_ids(db, new, self.limits)
        missing = []
        if lexical is None:
            lexical = await self.lexical_rows(db, new.tokens)
        for rowid in lexical:
            memory_id = self._ids.get(rowid) or self._known.get(rowid)
            if memory_id is None:
                missing.append(rowid)
            else:
                ids.add(memory_id)
        if missing:
            # the row is read whole: its sketch, when not cached, needs no second lookup by id
            for row in await db.execute_fetchall(_SKETCHES, (json.dumps(missing),)):
                memory_id = self._ids[int(row[0])] = str(row[2])
                ids.add(memory_id)
                if row[1] is None and cache.get(memory_id) is None:
                    cache.put(writes.sketch_of(tuple(row[2:])))
        ids.discard(new.id)
        return list(ids)

    async def _read_parts(self, db: aiosqlite.Connection, new: MemorySketch) -> None:
        # Read before the memory is stored, whatever answers its candidates: the store alone.
        limits = self.limits
        if new.source not in self._sources:
            rows = await db.execute_fetchall(_NEWEST_OF_SOURCE, (new.source, limits.causal_window + 2))
            self._sources[new.source] = Part([(str(row[0]), str(row[1])) for row in rows])
        for name in new.entities:
            if name not in self._carriers:
                rows = await db.execute_fetchall(_NEWEST_CARRIERS, (name, limits.entity_per_name + 2))
                self._carriers[name] = Part([(str(row[0]), str(row[1])) for row in rows])

    def _nearby(self, new: MemorySketch) -> set[str] | None:
        """``writes.nearby_ids`` from memory, or ``None`` when a part needs SQLite."""
        limits = self.limits
        assert self._everything is not None, "start() reads the newest memories first"
        at = stamp(new.created_at)
        window = timedelta(hours=limits.proximity_hours)
        low, high = stamp(new.created_at - window), stamp(new.created_at + window)
        chain = self._sources[new.source]
        found = [
            chain.before(at, limits.causal_window + 1, by_id=True),
            chain.after(at, 2, by_id=True),
            self._everything.before(at, limits.proximity_max + 1, low=low),
            self._everything.after(at, limits.proximity_max + 1, high=high),
        ]
        for name in new.entities:
            carriers = self._carriers[name]
            found.append(carriers.before(at, limits.entity_per_name + 1))
            found.append(carriers.after(at, limits.entity_per_name + 1))
        ids: set[str] = set()
        for part in found:
            if part is None:
                return None
            ids.update(part)
        return ids

    # -- the batch's own memories -------------------------------------------------------------

    def added(self, record: MemoryRecord, rowid: int, tokens: frozenset[str], digest: str) -> None:
        """Count a memory just stored (after :meth:`candidates` and :meth:`entity_stats` of it)."""
        key = (stamp(record.created_at), record.id)
        self._oldest(digest, key)
        assert self._everything is not None, "start() reads the newest memories first"
        insort(self._everything.added, key)
        insort(self._sources[record.source].added, key)
        self._ids[rowid] = record.id
        self.lexicon.added(rowid, tokens)
        self._new_docs.update(tokens)
        spellings = {name.casefold(): name for name in reversed(record.entities)}
        for norm, name in spellings.items():
            insort(self._carriers[norm].added, key)
            known = self._entities.get(norm)
            self._entities[norm] = (name, 1) if known is None else (known[0], known[1] + 1)
        self._new_uses.update(spellings.keys())

    async def flush(self, db: aiosqlite.Connection) -> None:
        """Write the batch's term and entity counts (the rows one write at a time leaves)."""
        sql = (
            "INSERT INTO term_stats (term, docs) VALUES (?, ?) "
            "ON CONFLICT (term) DO UPDATE SET docs = docs + ?"
        )
        await db.executemany(sql, [(term, count, count) for term, count in sorted(self._new_docs.items())])
        rows = []
        for norm, count in sorted(self._new_uses.items()):
            known = self._entities[norm]
            assert known is not None  # added() set it
            rows.append((norm, known[0], count))
        await writes.count_entities(db, rows)
