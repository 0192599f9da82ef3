"""A batch's postings (``memory_terms``) and entity rows (``memory_entities``), written in key order.

One write at a time inserts a memory's ~15 postings and its entity rows at once, each into another
part of two B-trees keyed by term and by name. A batch keeps them here instead and inserts them all
sorted by key when it ends (or before a statement that reads them through SQLite), so the inserts
walk each B-tree once from end to end; the stored rows are the same.

What a batch reads of them before then is answered with the rows kept here: the newest postings of
a term (``BatchView``) are SQLite's plus the batch's own not yet written. The newest carriers of a
name need nothing: the batch reads them before it stores its first memory with that name
(``batch_view``). The SQL fallbacks of the lexical and nearby lookups, which read both tables, are
preceded by :meth:`PendingRows.flush`.
"""

from __future__ import annotations

from operator import itemgetter

import aiosqlite

from memory_orchestrator.adapters.sqlite.lexical import add_terms

#: One entity row of a memory (the statement a write at a time runs too).
ENTITY_ROWS = "INSERT OR IGNORE INTO memory_entities (memory_id, entity_norm, created_at) VALUES (?, ?, ?)"
#: memory_entities' key: (entity_norm, memory_id).
_ENTITY_KEY = itemgetter(1, 0)


class PendingRows:
    """The ``memory_terms`` and ``memory_entities`` rows of a batch's memories not yet written."""

    __slots__ = ("_by_term", "_entities", "_terms")

    def __init__(self) -> None:
        self._terms: list[tuple[str, int, int]] = []
        self._entities: list[tuple[str, str, str]] = []
        #: term -> (row, size) of the rows above, in row order (rows only grow within a batch).
        self._by_term: dict[str, list[tuple[int, int]]] = {}

    def add(self, terms: list[tuple[str, int, int]], entities: list[tuple[str, str, str]]) -> None:
        """Keep one memory's postings (``lexical.term_rows``) and entity rows."""
        self._terms += terms
        self._entities += entities
        by_term = self._by_term
        for term, row, size in terms:
            rows = by_term.get(term)
            if rows is None:
                by_term[term] = [(row, size)]
            else:
                rows.append((row, size))

    def newest(self, term: str, limit: int) -> list[tuple[int, int]]:
        """The ``limit`` newest (row, size) postings of ``term`` kept here, newest first: all newer
        than any SQLite holds, as the batch's rows are written in row order."""
        rows = self._by_term.get(term, [])
        return rows[: -limit - 1 : -1] if limit > 0 else []

    async def flush(self, db: aiosqlite.Connection) -> None:
        """Write the rows kept so far, each table's in key order."""
        if self._terms:
            self._terms.sort()
            await add_terms(db, self._terms)
        if self._entities:
            self._entities.sort(key=_ENTITY_KEY)
            await db.executemany(ENTITY_ROWS, self._entities)
        self._terms, self._entities, self._by_term = [], [], {}
