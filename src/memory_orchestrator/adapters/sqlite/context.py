"""Context at index time: a conversation turn is also found by the words of the turns around it.

In a conversation the answer is often a turn that does not repeat the question's words: "What
career path has Caroline decided to pursue?" is answered by "I'm thinking of working with trans
people ..." right after Melanie asked "What kind of counseling do you want to pursue?". The keyword
index therefore keeps, beside each memory's own tokens, a ``context`` column holding the tokens of
the memories immediately before and after it in time, each when it is at most
``ports.text.CONTEXT_WINDOW`` away and was written by another source (the other speaker: one
agent's own notes in a row are separate facts, not a question and its answer), and BM25 weighs that
column at ``CONTEXT_WEIGHT``. Stored memories are unchanged; only what a memory is matched on grows.
On LoCoMo's held-out conversations the previous turn lifted keyword recall@10 from 60.2 to 66.6 and
the expanded pipeline from 64.7 to 69.8; the next turn added 2 more points to the pipeline. The
in-memory reference backend keeps the same index (adapters/memory/state.py) and the Mnemon adapter's
BM25 index does too (adapters/mnemon/reader.py), so all answer alike.

The column follows the store: a memory written between two others (back-dated) changes both
neighbours' context, and forgetting a memory hands its neighbours the ones beyond it, so the words of
a forgotten memory stop finding anything.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import aiosqlite

from memory_orchestrator.adapters.sqlite.impacts import reindex
from memory_orchestrator.adapters.sqlite.records import records_from_rows
from memory_orchestrator.adapters.sqlite.rows import MEMORY_COLUMNS, stamp
from memory_orchestrator.ports import MemoryRecord, parse_timestamp
from memory_orchestrator.ports.text import CONTEXT_WEIGHT, CONTEXT_WINDOW

#: ``bm25()`` with the column weights, for ORDER BY in keyword search.
BM25 = f"bm25(memories_fts, 1.0, {CONTEXT_WEIGHT!r})"
#: An FTS5 column filter: match the memory's own words only (link rules, duplicates).
OWN_WORDS = "{tokens}"

# Each neighbour is looked up in two index-friendly steps (the partial index on created_at, whose
# entries end in the rowid): a memory of the same moment with a smaller / larger rowid, else the
# nearest moment before / after. One query with an OR of both scanned the whole table, and so does
# any plan that starts from the FTS table: CROSS JOIN keeps memories the outer loop.
_COLUMNS = (
    "SELECT m.rowid, m.created_at, m.source, f.tokens FROM memories m "
    "CROSS JOIN memories_fts f ON f.rowid = m.rowid WHERE m.deleted_at IS NULL AND "
)
_SAME_BEFORE = _COLUMNS + "m.created_at = ? AND m.rowid < ? ORDER BY m.rowid DESC LIMIT 1"
_EARLIER = _COLUMNS + "m.created_at < ? ORDER BY m.created_at DESC, m.rowid DESC LIMIT 1"
_SAME_AFTER = _COLUMNS + "m.created_at = ? AND m.rowid > ? ORDER BY m.rowid LIMIT 1"
_LATER = _COLUMNS + "m.created_at > ? ORDER BY m.created_at, m.rowid LIMIT 1"


@dataclass(frozen=True, slots=True)
class Neighbour:
    """A memory next to another in time, with what its context needs."""

    rowid: int
    created_at: datetime
    source: str
    tokens: str


async def neighbours(db: aiosqlite.Connection, created_at: datetime, rowid: int) -> list[Neighbour]:
    """The active memories just before and just after (``created_at``, ``rowid``) in time."""
    return [row for row in await around(db, created_at, rowid) if row is not None]


async def around(
    db: aiosqlite.Connection, created_at: datetime, rowid: int
) -> tuple[Neighbour | None, Neighbour | None]:
    """The indexed active memory just before and the one just after (``created_at``, ``rowid``)."""
    at = stamp(created_at)
    found: list[Neighbour | None] = []
    for same, other in ((_SAME_BEFORE, _EARLIER), (_SAME_AFTER, _LATER)):
        rows = list(await db.execute_fetchall(same, (at, rowid)))
        if not rows:
            rows = list(await db.execute_fetchall(other, (at,)))
        row = rows[0] if rows else None
        found.append(
            Neighbour(int(row[0]), parse_timestamp(str(row[1])), str(row[2]), str(row[3])) if row else None
        )
    return found[0], found[1]


def context_from(around: list[Neighbour], created_at: datetime, source: str) -> str:
    """The FTS tokens of those of a memory's ``neighbours`` that count as its context."""
    return " ".join(row.tokens for row in _counting(around, created_at, source))


def _counting(around: list[Neighbour], created_at: datetime, source: str) -> list[Neighbour]:
    return [
        row for row in around if row.source != source and abs(row.created_at - created_at) <= CONTEXT_WINDOW
    ]


async def context_records(db: aiosqlite.Connection, ids: Sequence[str]) -> dict[str, list[MemoryRecord]]:
    """The memories that count as the context of each active memory among ``ids`` (the same rule
    as the keyword index's context column), oldest first; for a dense channel's documents."""
    sql = "SELECT id, rowid, created_at, source FROM memories WHERE id IN (SELECT value FROM json_each(?)) "
    sql += "AND deleted_at IS NULL"
    wanted = list(await db.execute_fetchall(sql, (json.dumps(list(dict.fromkeys(ids))),)))
    rowids: dict[str, list[int]] = {}
    for memory_id, rowid, stamped, source in wanted:
        created_at = parse_timestamp(str(stamped))
        around = await neighbours(db, created_at, int(rowid))
        rowids[str(memory_id)] = [row.rowid for row in _counting(around, created_at, str(source))]
    needed = sorted({rowid for found in rowids.values() for rowid in found})
    sql = f"SELECT m.rowid, {MEMORY_COLUMNS} FROM memories m WHERE m.rowid IN "
    sql += "(SELECT value FROM json_each(?))"
    rows = list(await db.execute_fetchall(sql, (json.dumps(needed),))) if needed else []
    records = await records_from_rows(db, [row[1:] for row in rows])
    by_rowid = {int(row[0]): record for row, record in zip(rows, records, strict=True)}
    # neighbours come back before-then-after, which is oldest first
    return {key: [by_rowid[row] for row in found if row in by_rowid] for key, found in rowids.items()}


async def refresh(db: aiosqlite.Connection, around: list[Neighbour], also: Sequence[int] = ()) -> None:
    """Re-derive the context of ``around``, the neighbours of a memory just inserted (it is now
    theirs) or just forgotten (the ones beyond it now are), and the keyword postings of those whose
    context changed, and of the rows ``also`` (the memory just inserted)."""
    changed = list(also)
    for row in around:
        context = context_from(await neighbours(db, row.created_at, row.rowid), row.created_at, row.source)
        cursor = await db.execute(
            "UPDATE memories_fts SET context = ? WHERE rowid = ? AND context IS NOT ?",
            (context, row.rowid, context),
        )
        if cursor.rowcount:  # an unchanged row is neither rewritten nor re-posted
            changed.append(row.rowid)
    await reindex(db, changed)
