"""What a bulk write defers to the end of its batch, and how it then does it in one pass.

No write of a batch reads what is deferred here: automatic edges (no write reads edges), the change
log, and the keyword index with its context column (the lexical candidates read ``memory_terms``,
never FTS: ``lexical.py``). One write at a time inserts a memory's FTS row with the context of its
neighbours and re-derives theirs (an FTS update is a delete and an insert); a batch instead sorts its
memories in time, merges them with the indexed memories around each, and writes every FTS row once
with its final context, refreshing only the older memories it sits next to. The stored rows are the
ones a write at a time leaves (``tests/unit/test_sqlite_bulk.py`` compares them). The postings and
entity rows wait too, and go in key order (``pending.py``).
"""

from __future__ import annotations

import gc
from bisect import bisect_left
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

import aiosqlite

from memory_orchestrator.adapters.sqlite import graph
from memory_orchestrator.adapters.sqlite.batch_view import BatchView
from memory_orchestrator.adapters.sqlite.context import Neighbour, around, context_from
from memory_orchestrator.adapters.sqlite.graph import EdgeRow
from memory_orchestrator.adapters.sqlite.impacts import drop_scratch, reindex
from memory_orchestrator.adapters.sqlite.planner import Planned, Planner

Key = tuple[datetime, int]


@dataclass(slots=True)
class Batch:
    """The deferred work of one bulk write (filled by each insert, done by :func:`finish`)."""

    #: Plans each write's links (``plan_links``), perhaps in a helper process: ``planner.py``.
    planner: Planner
    #: Memories written but not yet in FTS, as their neighbours will see them.
    unindexed: list[Neighbour] = field(default_factory=list)
    #: Change-log rows in write order (the log's sequence numbers follow it).
    changes: list[tuple[str, str, str, str]] = field(default_factory=list)
    #: The store as the batch sees it: candidates and counts from memory, counts written at the end.
    view: BatchView = field(default_factory=BatchView)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off while a batch runs, then as it was found.

    A batch keeps ~40 container objects per memory until its end (the edges, the records and results,
    the sketches and keys of its view): with the collector on, its young and middle collections
    walked them again and again (~5% of a 10k import's CPU) and found next to no garbage. A batch
    makes few cycles; they wait for the first collection after it."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


async def finish(db: aiosqlite.Connection, batch: Batch) -> list[Planned]:
    """Do the deferred work and return the planner's plans, one per write in order: first what needs
    no plan (the term and entity counts, the postings, the FTS rows, the log) while a helper plans
    the batch's last writes (the batch used to wait for those first), then the automatic edges, as
    the helper and the batch plan the last chunks (``Planner.settle``), each lot in key order
    (sequential B-tree inserts). Storing them while the helper plans on, rather than all once both
    are done, leaves the batch's end (when the helper has nothing to do) little more than its
    commit. (Storing each chunk's as it came in during the writes too was slower on a large store:
    the edge index pages the inserts touched crowded the writes' lookups out of the page cache.)"""
    batch.planner.flush()
    await batch.view.flush(db)
    await batch.view.pending.flush(db)
    await index(db, batch.unindexed)
    await db.executemany("INSERT INTO oplog (kind, memory_id, at, detail) VALUES (?, ?, ?, ?)", batch.changes)
    while (plans := batch.planner.settle()) is not None:
        if plans:
            await _insert_edges(db, plans)  # while the helper plans on
    return batch.planner.results()


async def _insert_edges(db: aiosqlite.Connection, plans: list[Planned]) -> None:
    rows: list[EdgeRow] = []
    for planned in plans:
        rows += planned.rows
    await graph.insert_rows(db, rows, in_key_order=True)


def _key(row: Neighbour) -> Key:
    return (row.created_at, row.rowid)


async def index(db: aiosqlite.Connection, written: list[Neighbour]) -> None:
    """Insert the FTS rows of ``written`` (memories not yet indexed) with their final context, and
    refresh the context of the indexed memories now next to one of them."""
    ordered = sorted(written, key=_key)
    keys = [_key(row) for row in ordered]
    touched: dict[int, Neighbour] = {}
    rows = []
    before = after = None
    for position, row in enumerate(ordered):
        if position == 0 or (after is not None and _key(after) < keys[position]):
            # the FTS join sees only indexed memories: these are the nearest ones outside the batch
            before, after = await around(db, row.created_at, row.rowid)
        # else no indexed memory lies between this one and the previous: they share both
        for other in (before, after):
            if other is not None:
                touched[other.rowid] = other
        previous = ordered[position - 1] if position > 0 else None
        following = ordered[position + 1] if position + 1 < len(ordered) else None
        pair = [_later(before, previous), _earlier(after, following)]
        rows.append((row.rowid, row.tokens, _context(row, pair)))
    updates = []
    for other in touched.values():
        before, after = await around(db, other.created_at, other.rowid)
        position = bisect_left(keys, _key(other))
        previous = ordered[position - 1] if position > 0 else None
        following = ordered[position] if position < len(ordered) else None
        updates.append((_context(other, [_later(before, previous), _earlier(after, following)]), other.rowid))
    await db.executemany("INSERT INTO memories_fts (rowid, tokens, context) VALUES (?, ?, ?)", rows)
    await db.executemany("UPDATE memories_fts SET context = ? WHERE rowid = ?", updates)
    await reindex(db, [row[0] for row in rows] + [rowid for _, rowid in updates])
    await drop_scratch(db)  # a batch runs on the write connection, which no other call shares


def _later(a: Neighbour | None, b: Neighbour | None) -> Neighbour | None:
    if a is None or b is None:
        return a or b
    return a if _key(a) > _key(b) else b


def _earlier(a: Neighbour | None, b: Neighbour | None) -> Neighbour | None:
    if a is None or b is None:
        return a or b
    return a if _key(a) < _key(b) else b


def _context(row: Neighbour, pair: list[Neighbour | None]) -> str:
    return context_from([other for other in pair if other is not None], row.created_at, row.source)
