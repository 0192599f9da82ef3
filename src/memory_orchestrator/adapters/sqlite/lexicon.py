"""A batch's lexical lookups in memory, in the batch or ahead of it in the helper process.

A write at a time asks SQLite for its lexical candidates (``lexical.lexical_rows``): the document
counts of its terms and the newest postings of the rarest. Inside a batch each answer is the store's
as the batch found it merged with the batch's own earlier memories, so a :class:`Lexicon` reads the
counts once for the whole batch and each chosen term's newest postings at its first need, adds the
batch's memories as they are stored (``added``), and ranks in memory (``postings.rank``).

Its inputs are all known when a batch begins: the store without the batch, the batch's texts, and
the rowid each of its memories will get (SQLite gives a new row the largest rowid plus one; a
duplicate the batch skips gets none). So the bulk planner's helper process (``planner.py``) looks the
candidates up ahead of the batch (:func:`look_ahead`), over a read connection of its own: in WAL mode
that sees the store as it was when the batch took the write lock, whatever the batch has written
since. The batch checks each rowid it is given against the one the helper assumed, and looks up
itself from the first that differs; it also looks up itself whatever the helper has not answered in
time, and whatever only SQLite can rank.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator
from functools import partial
from pathlib import Path
from typing import NamedTuple, cast

import aiosqlite

from memory_orchestrator.adapters.sqlite.lexical import LEXICAL_POSTINGS, LEXICAL_TERMS, idf, term_rows
from memory_orchestrator.adapters.sqlite.pending import PendingRows
from memory_orchestrator.adapters.sqlite.postings import TermPostings, rank
from memory_orchestrator.adapters.sqlite.sync_db import SyncConnection, run_to_end
from memory_orchestrator.adapters.sqlite.terms import choose_terms, term_frequencies
from memory_orchestrator.adapters.sqlite.transactions import transaction
from memory_orchestrator.ports.text import tokenize

_POSTINGS = "SELECT row, size FROM memory_terms WHERE term = ? ORDER BY row DESC LIMIT ?"
#: Milliseconds the helper's read connection waits for a lock (a reader waits only while a WAL is
#: recovered); past that the batch looks its candidates up itself.
READ_BUSY_MS = 1000


def read_connection(path: str) -> sqlite3.Connection:
    """A read-only connection to the store at ``path`` (absolute), for :func:`look_ahead`."""
    connection = sqlite3.connect(f"{Path(path).as_uri()}?mode=ro", uri=True, isolation_level=None)
    try:
        connection.execute(f"PRAGMA busy_timeout = {READ_BUSY_MS:d}")
    except BaseException:
        connection.close()
        raise
    return connection


class Unranked(NamedTuple):
    """What ``lexical.ranked_rows`` needs to rank a lookup :class:`Lexicon` cannot rank in memory."""

    frequencies: dict[str, int]
    size: int


class Lexicon:
    """The store's term counts and the newest postings of the terms looked up, as a batch sees them."""

    __slots__ = ("_docs", "_postings", "size")

    def __init__(self, size: int) -> None:
        #: max(rowid) of memories, as ``terms.term_frequencies`` reads it.
        self.size = size
        #: Active memories per term (0: none), the batch's included.
        self._docs: dict[str, int] = {}
        #: The newest postings of each term a lookup chose (``postings.py``).
        self._postings: dict[str, TermPostings] = {}

    async def count(self, db: aiosqlite.Connection, terms: Collection[str]) -> None:
        """Read the store's document counts of ``terms`` (the batch's tokens: one lookup, not one per
        memory). Call it before the batch stores anything."""
        counts, _ = await term_frequencies(db, sorted(terms))
        self._docs.update((term, counts.get(term, 0)) for term in terms)

    async def rows(
        self, db: aiosqlite.Connection, tokens: frozenset[str], pending: PendingRows
    ) -> list[int] | Unranked:
        """The rows ``lexical.lexical_rows`` finds now for a memory with ``tokens``, or what SQLite
        needs to rank them when memory cannot (``db`` holds the batch's rows not in ``pending``)."""
        docs = self._docs
        if missing := [term for term in tokens if term not in docs]:
            found, _ = await term_frequencies(db, missing)  # the store's: the batch counts at its end
            for term in missing:
                docs[term] = found.get(term, 0)
        frequencies = {term: count for term in tokens if (count := docs[term]) > 0}
        # term_frequencies reads the store size beside the counts: none when no term is known
        size = self.size if frequencies else 0
        terms = choose_terms(frequencies, size, most=LEXICAL_TERMS, postings=LEXICAL_POSTINGS)
        if not terms:
            return []
        postings = [await self._newest(db, term, pending) for term in terms]
        ranked = rank(len(tokens), [idf(frequencies[term], size) for term in terms], postings)
        return Unranked(frequencies, size) if ranked is None else ranked

    async def _newest(self, db: aiosqlite.Connection, term: str, pending: PendingRows) -> TermPostings:
        # Read once per batch, at the term's first need (the batch's own rows included: those SQLite
        # has by then and, newer, those still pending); the batch's later rows are added by added().
        postings = self._postings.get(term)
        if postings is None:
            newest = pending.newest(term, LEXICAL_POSTINGS)
            found = await db.execute_fetchall(_POSTINGS, (term, LEXICAL_POSTINGS - len(newest)))
            newest += [(int(row), int(size)) for row, size in found]
            postings = self._postings[term] = TermPostings(newest)
        return postings

    def added(self, rowid: int, tokens: frozenset[str]) -> None:
        """Count a memory of the batch just stored at ``rowid``."""
        self.size = max(self.size, rowid)
        docs, postings = self._docs, self._postings
        for term in tokens:
            docs[term] += 1
            if (rows := postings.get(term)) is not None:
                rows.add(rowid, len(tokens))


class Ahead(NamedTuple):
    """What the helper needs to look a batch's candidates up ahead of it: the store's file, its size
    (max rowid) when the batch began, and the rowid each memory of the batch gets (0: none, a
    duplicate it skips)."""

    path: str
    size: int
    rows: list[int]


def look_ahead(
    connection: sqlite3.Connection, ahead: Ahead, contents: list[str]
) -> Iterator[list[int] | None]:
    """The lexical rows of each memory of a batch with ``contents``, in order (``None``: one the batch
    skips, or whose rows only SQLite can rank), found in one read transaction on ``connection``,
    ended before the last is given. ``sqlite3.Error`` when the store cannot be read, or is not the
    one the batch began with (its size differs)."""
    if not contents:
        return
    db = cast(aiosqlite.Connection, SyncConnection(connection))
    texts = [
        frozenset(tokenize(text)) if row else None for text, row in zip(contents, ahead.rows, strict=True)
    ]
    lexicon = Lexicon(ahead.size)
    pending = PendingRows()  # every posting of the batch so far: the reads here never see them
    last = len(contents) - 1
    answer: list[int] | None = None
    with transaction(connection, partial(connection.execute, "BEGIN")):
        found = connection.execute("SELECT max(rowid) FROM memories").fetchone()
        if int(found[0] or 0) != ahead.size:
            raise sqlite3.DatabaseError(
                f"not the batch's store: its last rowid is {found[0]}, not {ahead.size}"
            )
        run_to_end(lexicon.count(db, {term for tokens in texts if tokens is not None for term in tokens}))
        for index, (tokens, row) in enumerate(zip(texts, ahead.rows, strict=True)):
            answer = None
            if tokens is not None:
                ranked = run_to_end(lexicon.rows(db, tokens, pending))
                answer = ranked if isinstance(ranked, list) else None
                lexicon.added(row, tokens)
                pending.add(term_rows(row, tokens), [])
            if index < last:
                yield answer
    yield answer
