"""The write path in SQLite: duplicate lookup, candidate neighbours for the link rules, inserts."""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import timedelta
from functools import lru_cache
from typing import Any

import aiosqlite

from memory_orchestrator.adapters.sqlite.context import Neighbour, context_from, neighbours, refresh
from memory_orchestrator.adapters.sqlite.lexical import add_terms, lexical_rows, remove_terms, term_rows
from memory_orchestrator.adapters.sqlite.pending import ENTITY_ROWS, PendingRows
from memory_orchestrator.adapters.sqlite.rows import ENTITY_LIST, as_json, parse_stamp, stamp
from memory_orchestrator.adapters.sqlite.terms import count_terms
from memory_orchestrator.ports import ChangeKind, MemoryRecord, parse_timestamp
from memory_orchestrator.ports.autolinks import DEFAULT_LIMITS, LinkLimits, MemorySketch, sketch_tokens
from memory_orchestrator.ports.text import tokenize


async def find_active_duplicate(db: aiosqlite.Connection, digest: str) -> str | None:
    """Id of the oldest active memory with this content hash, if any."""
    sql = (
        "SELECT id FROM memories WHERE content_hash = ? AND deleted_at IS NULL "
        "ORDER BY created_at, id LIMIT 1"
    )
    rows = list(await db.execute_fetchall(sql, (digest,)))
    return str(rows[0][0]) if rows else None


def _nearest(where: str, order: str) -> str:
    return (
        "SELECT id FROM (SELECT id FROM memories WHERE deleted_at IS NULL "
        f"AND {where} ORDER BY {order} LIMIT ?)"
    )


def _nearest_carriers(comparison: str, order: str) -> str:
    return (
        "SELECT id FROM (SELECT memory_id AS id FROM memory_entities "
        f"WHERE entity_norm = ? AND created_at {comparison} ? ORDER BY {order} LIMIT ?)"
    )


async def candidate_ids(
    db: aiosqlite.Connection, new: MemorySketch, limits: LinkLimits = DEFAULT_LIMITS
) -> set[str]:
    """Every memory the link rules could pick for ``new``, each found through an index.

    One compound query: same source around ``created_at``, anything within the proximity window, the
    nearest carriers of each entity (:func:`nearby_parts`), and the lexically closest memories
    (``lexical.lexical_rows``).
    """
    parts = nearby_parts(new, limits)
    rows = await lexical_rows(db, new.tokens)
    if rows:
        parts.append(
            ("SELECT id FROM memories WHERE rowid IN (SELECT value FROM json_each(?))", (json.dumps(rows),))
        )
    found = await _union(db, parts)
    found.discard(new.id)
    return found


async def nearby_ids(
    db: aiosqlite.Connection, new: MemorySketch, limits: LinkLimits = DEFAULT_LIMITS
) -> set[str]:
    """The candidates of :func:`candidate_ids` but the lexical ones, in one query."""
    return await _union(db, nearby_parts(new, limits))


async def _union(db: aiosqlite.Connection, parts: list[tuple[str, tuple[object, ...]]]) -> set[str]:
    sql = " UNION ".join(part for part, _ in parts)
    params = [value for _, values in parts for value in values]
    return {str(row[0]) for row in await db.execute_fetchall(sql, params)}


def nearby_parts(new: MemorySketch, limits: LinkLimits) -> list[tuple[str, tuple[object, ...]]]:
    """The queries of ``new``'s candidates near it: the same source's nearest before (up to
    ``causal_window + 1``) and the 2 after ``created_at``; the ``proximity_max + 1`` nearest before and
    after within the proximity window; the ``entity_per_name + 1`` nearest carriers of each entity
    before and after (``batch_view`` answers the same from memory, and must change with these)."""
    at = stamp(new.created_at)
    window = timedelta(hours=limits.proximity_hours)
    low, high = stamp(new.created_at - window), stamp(new.created_at + window)
    parts: list[tuple[str, tuple[object, ...]]] = [
        (
            _nearest("source = ? AND created_at <= ?", "created_at DESC, id DESC"),
            (new.source, at, limits.causal_window + 1),
        ),
        (_nearest("source = ? AND created_at >= ?", "created_at, id"), (new.source, at, 2)),
        (_nearest("created_at BETWEEN ? AND ?", "created_at DESC"), (low, at, limits.proximity_max + 1)),
        (_nearest("created_at BETWEEN ? AND ?", "created_at"), (at, high, limits.proximity_max + 1)),
    ]
    per_name = limits.entity_per_name + 1
    for name in sorted(new.entities):
        parts.append((_nearest_carriers("<=", "created_at DESC"), (name, at, per_name)))
        parts.append((_nearest_carriers(">=", "created_at"), (name, at, per_name)))
    return parts


class SketchCache:
    """Sketches of stored memories by id, bounded. A memory's sketched columns never change once it is
    stored (forgetting only stamps ``deleted_at``) and ids are never reused, so an entry is never stale;
    callers only ask for ids an index found active in the current transaction. Recent memories are
    candidates of many writes in a row (a bulk import above all): each is read and parsed once.

    The lexical candidates of a write reach back over the whole store, so past the cache's size more
    and more of them missed it (each miss a lookup by id and a parse): at 8,192 entries a 100k import
    spent ~12% of its CPU on misses, which 65,536 entries all but remove; a 10k or 30k import is not
    measurably faster. The price is memory, reached only by stores that large: ~1.3 KB a sketch
    (tokens interned by ``sketch_of``), a 100k import's peak RSS 244 -> 316 MB; a server's cache
    grows to the same bound as writes come in."""

    def __init__(self, size: int = 65536) -> None:
        self.size = size
        self._items: dict[str, MemorySketch] = {}

    def get(self, memory_id: str) -> MemorySketch | None:
        """The cached sketch of ``memory_id``, if any."""
        return self._items.get(memory_id)

    def split(self, ids: set[str]) -> tuple[list[MemorySketch], list[str]]:
        """The cached sketches among ``ids`` and the other ids (sorted): one dict lookup each."""
        get = self._items.get
        found: list[MemorySketch] = []
        missing: list[str] = []
        for memory_id in ids:
            item = get(memory_id)
            if item is None:
                missing.append(memory_id)
            else:
                found.append(item)
        missing.sort()
        return found, missing

    def put(self, item: MemorySketch) -> None:
        """Keep ``item``; when full, the oldest half is dropped."""
        _make_room(self._items, 1, self.size)
        self._items[item.id] = item


class RowIds:
    """Ids of stored memories by rowid, bounded: a batch's lexical candidates come as rowids, and the
    same ones recur batch after batch. A memory's rowid never changes and, memories being only ever
    soft-deleted, is never reused, except by a transaction that rolled back: so a batch's own rows are
    added only once it has committed."""

    def __init__(self, size: int = 131072) -> None:
        self.size = size
        self._items: dict[int, str] = {}

    def get(self, rowid: int) -> str | None:
        """The id of the memory at ``rowid``, if known."""
        return self._items.get(rowid)

    def update(self, items: dict[int, str]) -> None:
        """Keep ``items`` (committed rows); when full, the oldest half is dropped."""
        _make_room(self._items, len(items), self.size)
        self._items.update(items)


def _make_room(items: dict[Any, Any], coming: int, size: int) -> None:
    """Drop the oldest half of ``items`` (dicts keep insertion order) when ``coming`` more would not
    fit in ``size``."""
    if len(items) + coming > size:
        for key in list(items)[: size // 2]:
            del items[key]


async def load_sketches(
    db: aiosqlite.Connection, ids: set[str], cache: SketchCache | None = None
) -> list[MemorySketch]:
    """Sketches of the candidate memories (from ``cache`` when it has them), in no set order."""
    found, missing = cache.split(ids) if cache is not None else ([], sorted(ids))
    if not missing:
        return found
    sql = (
        f"SELECT {SKETCH_COLUMNS} FROM memories m LEFT JOIN memories_fts f ON f.rowid = m.rowid "
        "WHERE m.id IN (SELECT value FROM json_each(?)) AND m.deleted_at IS NULL"
    )
    for row in await db.execute_fetchall(sql, (json.dumps(missing),)):
        item = sketch_of(tuple(row))
        found.append(item)
        if cache is not None:
            cache.put(item)
    return found


#: The columns :func:`sketch_of` reads, of ``memories m LEFT JOIN memories_fts f`` on the rowid.
SKETCH_COLUMNS = "m.id, m.content, m.source, m.created_at, m.entities, f.tokens"


def sketch_of(row: tuple[Any, ...]) -> MemorySketch:
    """The sketch of a stored memory from its :data:`SKETCH_COLUMNS`. Its tokens are split from its
    FTS row (``tokenize(content)`` joined by spaces, the same set), which costs a tenth of tokenizing
    the content again; a memory of an unfinished batch has no FTS row yet (``batch.py``) and is
    tokenized. The tokens are interned (``sketch_tokens``): a large store's cache holds tens of
    thousands of sketches, and one string per distinct word is ~a quarter of their memory."""
    indexed = row[5]
    return MemorySketch(
        id=row[0],
        content=row[1],
        source=row[2],
        created_at=parse_stamp(row[3]),
        tokens=sketch_tokens(tokenize(row[1]) if indexed is None else indexed.split()),
        entities=entity_set(row[4]),
    )


@lru_cache(maxsize=4096)
def entity_set(names: str) -> frozenset[str]:
    """The casefolded names of an ``entities`` column (JSON); cached, as many memories carry the
    same few names and a large import reads thousands of candidates' sketches."""
    return frozenset(name.casefold() for name in json.loads(names))


async def known_names(db: aiosqlite.Connection, candidates: set[str]) -> dict[str, str]:
    """Entity names of active memories among ``candidates`` (casefolded -> spelling), one lookup."""
    return {norm: name for norm, (name, _) in (await entity_stats(db, candidates)).items()}


async def entity_stats(db: aiosqlite.Connection, candidates: Collection[str]) -> dict[str, tuple[str, int]]:
    """Spelling and number of active carriers of each entity name among ``candidates`` (casefolded)
    that the store knows, in one lookup (``known_names`` is its first half)."""
    if not candidates:
        return {}
    sql = "SELECT entity_norm, name, uses FROM entity_stats "
    sql += "WHERE entity_norm IN (SELECT value FROM json_each(?))"
    rows = await db.execute_fetchall(sql, (json.dumps(sorted(candidates)),))
    return {str(row[0]): (str(row[1]), int(row[2])) for row in rows}


async def insert_memory(
    db: aiosqlite.Connection,
    record: MemoryRecord,
    digest: str,
    dedup: bool,
    unindexed: list[Neighbour] | None = None,
    tokens: list[str] | None = None,
    counted: bool = True,
    pending: PendingRows | None = None,
) -> int:
    """Insert the memory, its FTS row, its entity rows and entity statistics; returns its rowid. With
    ``unindexed`` (a batch's) the FTS row is not written but appended there, for ``batch.index`` to
    write at the end; without ``counted`` (a batch's) neither are the term and entity counts (the
    batch keeps them, ``batch_view``); with ``pending`` (a batch's) its postings and entity rows are
    kept there (``pending.py``). ``tokens``, when the caller has them, are
    ``tokenize(record.content)``."""
    rowid = await db.execute_insert(
        "INSERT INTO memories (id, content, content_hash, dedup_key, category, importance, tags, entities, "
        "source, metadata, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.id,
            record.content,
            digest,
            digest if dedup else None,
            record.category,
            record.importance,
            as_json(list(record.tags)),
            ENTITY_LIST.encode(list(record.entities)),
            record.source,
            as_json(dict(record.metadata)),
            stamp(record.created_at),
            stamp(record.updated_at),
        ),
    )
    if tokens is None:
        tokens = tokenize(record.content)
    row = int(rowid[0]) if rowid else 0
    if unindexed is not None:
        unindexed.append(Neighbour(row, record.created_at, record.source, " ".join(tokens)))
    else:
        around = await neighbours(db, record.created_at, row)
        context = context_from(around, record.created_at, record.source)
        await db.execute(
            "INSERT INTO memories_fts (rowid, tokens, context) VALUES (?, ?, ?)",
            (row, " ".join(tokens), context),
        )
        await refresh(db, around, also=[row])
    if counted:
        await count_terms(db, tokens, +1)
    spellings = {name.casefold(): name for name in reversed(record.entities)}
    created = stamp(record.created_at)
    carriers = [(record.id, norm, created) for norm in spellings]
    if pending is not None:
        pending.add(term_rows(row, tokens), carriers)
    else:
        await add_terms(db, term_rows(row, tokens))
        await db.executemany(ENTITY_ROWS, carriers)
    if counted:
        await count_entities(db, [(norm, name, 1) for norm, name in spellings.items()])
    return row


async def count_entities(db: aiosqlite.Connection, rows: list[tuple[str, str, int]]) -> None:
    """Add memories carrying entity names: (casefolded name, its spelling if new, how many)."""
    await db.executemany(
        "INSERT INTO entity_stats (entity_norm, name, uses) VALUES (?, ?, ?) "
        "ON CONFLICT (entity_norm) DO UPDATE SET uses = uses + excluded.uses",
        rows,
    )


async def remove_from_indexes(db: aiosqlite.Connection, memory_id: str) -> None:
    """Take a forgotten memory out of FTS, the entity index and the entity statistics."""
    rows = await db.execute_fetchall(
        "SELECT f.tokens, m.rowid, m.created_at FROM memories_fts f JOIN memories m ON m.rowid = f.rowid "
        "WHERE m.id = ?",
        (memory_id,),
    )
    for row in rows:
        await count_terms(db, str(row[0]).split(), -1)
        await remove_terms(db, int(row[1]), str(row[0]).split())
    await db.execute(
        "DELETE FROM memories_fts WHERE rowid = (SELECT rowid FROM memories WHERE id = ?)", (memory_id,)
    )
    for row in rows:
        # its words were its neighbours' context: they now take the memories beyond it
        await refresh(db, await neighbours(db, parse_timestamp(str(row[2])), int(row[1])), also=[int(row[1])])
    rows = await db.execute_fetchall(
        "SELECT entity_norm FROM memory_entities WHERE memory_id = ?", (memory_id,)
    )
    norms = [str(row[0]) for row in rows]
    await db.execute("DELETE FROM memory_entities WHERE memory_id = ?", (memory_id,))
    await db.executemany(
        "UPDATE entity_stats SET uses = uses - 1 WHERE entity_norm = ?", [(n,) for n in norms]
    )
    await db.execute("DELETE FROM entity_stats WHERE uses <= 0")


async def log_change(
    db: aiosqlite.Connection, kind: ChangeKind, memory_id: str, at: str, detail: str = ""
) -> None:
    """Append one entry to the change log."""
    await db.execute(
        "INSERT INTO oplog (kind, memory_id, at, detail) VALUES (?, ?, ?, ?)",
        (kind.value, memory_id, at, detail),
    )
