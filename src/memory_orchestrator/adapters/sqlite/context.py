"""Context at index time: a reply is also found by the words of the message it answers.

In a conversation the answer is often a turn that does not repeat the question's words: "What
career path has Caroline decided to pursue?" is answered by "I'm thinking of working with trans
people ..." right after Melanie asked "What kind of counseling do you want to pursue?". The keyword
index therefore keeps, beside each memory's own tokens, a ``context`` column holding the tokens of
the memory immediately before it in time when that one is at most ``ports.text.CONTEXT_WINDOW`` older
and was written by another source (a conversation's other speaker: one agent's own notes in a row
are separate facts, not a question and its answer), and BM25 weighs that column at
``CONTEXT_WEIGHT``. Stored memories are unchanged; only what a
memory is matched on grows. On LoCoMo's held-out conversations this lifted keyword recall@10 from
60.2 to 66.6 and the expanded pipeline from 64.7 to 69.8. The in-memory reference backend keeps the
same index (adapters/memory/state.py), so both answer alike.

The column follows the store: a memory written between two others (back-dated) becomes its
successor's context, and forgetting a memory hands its successor the context before it, so the
words of a forgotten memory stop finding anything.
"""

from __future__ import annotations

from datetime import datetime

import aiosqlite

from memory_orchestrator.adapters.sqlite.rows import stamp
from memory_orchestrator.ports.text import CONTEXT_WEIGHT, CONTEXT_WINDOW

#: ``bm25()`` with the column weights, for ORDER BY in keyword search.
BM25 = f"bm25(memories_fts, 1.0, {CONTEXT_WEIGHT!r})"
#: An FTS5 column filter: match the memory's own words only (link rules, duplicates).
OWN_WORDS = "{tokens}"


async def context_before(
    db: aiosqlite.Connection, created_at: datetime, source: str, rowid: int | None = None
) -> str:
    """The FTS tokens of the active memory just before ``created_at`` within the window, when another
    ``source`` wrote it ('' otherwise).

    ``rowid`` is the memory being indexed; a memory at the very same moment with a smaller rowid
    counts as before it (bulk writes stamp several memories alike).
    """
    at = stamp(created_at)
    floor = stamp(created_at - CONTEXT_WINDOW)
    rows = list(
        await db.execute_fetchall(
            "SELECT f.tokens, m.source FROM memories m JOIN memories_fts f ON f.rowid = m.rowid "
            "WHERE m.deleted_at IS NULL AND m.created_at >= ? "
            "AND (m.created_at < ? OR (m.created_at = ? AND m.rowid < ?)) "
            "ORDER BY m.created_at DESC, m.rowid DESC LIMIT 1",
            (floor, at, at, rowid if rowid is not None else -1),
        )
    )
    return str(rows[0][0]) if rows and str(rows[0][1]) != source else ""


async def refresh_successor(db: aiosqlite.Connection, created_at: datetime, rowid: int) -> None:
    """Re-derive the context of the active memory right after (``created_at``, ``rowid``).

    Called after a memory is inserted (it may now be its successor's context) or forgotten (its
    successor's context falls back to the memory before it). Cheap when the memory is the newest,
    as in chronological writes: the lookup finds nothing.
    """
    at = stamp(created_at)
    rows = list(
        await db.execute_fetchall(
            "SELECT m.rowid, m.created_at, m.source FROM memories m JOIN memories_fts f ON f.rowid = m.rowid "
            "WHERE m.deleted_at IS NULL AND m.rowid != ? "
            "AND (m.created_at > ? OR (m.created_at = ? AND m.rowid > ?)) "
            "ORDER BY m.created_at, m.rowid LIMIT 1",
            (rowid, at, at, rowid),
        )
    )
    if not rows:
        return
    successor, stamp_text = int(rows[0][0]), str(rows[0][1])
    moment = datetime.fromisoformat(stamp_text.replace("Z", "+00:00"))
    context = await context_before(db, moment, str(rows[0][2]), successor)
    await db.execute("UPDATE memories_fts SET context = ? WHERE rowid = ?", (context, successor))
