"""Lexically close memories, the candidates of a new memory's semantic edges.

A write looks up the postings of its rarest terms in ``memory_terms`` (term -> memories carrying it,
with each memory's number of distinct tokens) and ranks them in SQL with a BM25-shaped score: the
summed rarity of the shared terms, damped by the other memory's length against the new one's (a
short memory sharing the same rare words shares a larger part of itself). The score reads only
memories' own tokens, never the FTS index, so it does not move when a memory's ``context`` column
changes: a batch writes its FTS rows and their context once at its end (``batch.py``) and still
finds exactly what one write at a time finds. The lookup used to be FTS5's ``bm25()`` over the
same terms, whose scoring of every posting (and its row-size reads) was the largest cost of a write.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

import aiosqlite

from memory_orchestrator.adapters.sqlite.terms import choose_terms, term_frequencies

#: Lexically similar memories taken as candidates for semantic edges.
LEXICAL_CANDIDATES = 20
#: Query terms used to find them (the rarest ones: they are the telling ones and the cheap ones).
LEXICAL_TERMS = 4
#: ... and at most this many postings among them (each is scored before the best are taken).
LEXICAL_POSTINGS = 600
#: BM25's term-saturation and length-normalisation constants (every shared term occurs once here).
K1 = 1.2
B = 0.75

# The newest postings of each term first: when even the rarest term is common, the cap keeps the
# memories nearest the end of the store, the likeliest neighbours of a new one.
POSTINGS = "SELECT row, size, ? AS rarity FROM memory_terms WHERE term = ? ORDER BY row DESC LIMIT ?"
# Scored in SQL: the postings never become Python objects (a write fetches up to 600 of them).
_RANKED = (
    "SELECT row FROM ({postings}) GROUP BY row "
    f"ORDER BY sum(rarity) * {K1 + 1.0!r} / (1.0 + {K1!r} * ({1.0 - B!r} + {B!r} * size / ?)) DESC, "
    "row DESC LIMIT ?"
)


async def lexical_rows(db: aiosqlite.Connection, tokens: Iterable[str]) -> list[int]:
    """Rowids of the memories lexically closest to a memory with ``tokens`` (best first).

    The postings of the chosen terms are scored by the summed rarity of the shared terms times BM25's
    length damping, a memory's length measured against the new one's (each shared term counted once);
    ties go to the newer memory, so the order never depends on the plan.
    """
    distinct = sorted(set(tokens))
    frequencies, size = await term_frequencies(db, distinct)
    return await ranked_rows(db, len(distinct), frequencies, size)


async def ranked_rows(
    db: aiosqlite.Connection, distinct: int, frequencies: dict[str, int], size: int
) -> list[int]:
    """:func:`lexical_rows` of a memory of ``distinct`` distinct tokens whose ``frequencies`` (token ->
    active memories carrying it) in a store of ``size`` are known (a batch keeps them in memory)."""
    terms = choose_terms(frequencies, size, most=LEXICAL_TERMS, postings=LEXICAL_POSTINGS)
    if not terms:
        return []
    postings = " UNION ALL ".join(f"SELECT * FROM ({POSTINGS})" for _ in terms)
    params: list[object] = []
    for term in terms:
        params += [idf(frequencies[term], size), term, LEXICAL_POSTINGS]
    rows = await db.execute_fetchall(
        _RANKED.format(postings=postings), [*params, distinct, LEXICAL_CANDIDATES]
    )
    return [int(row[0]) for row in rows]


def idf(docs: int, size: int) -> float:
    """A term's rarity: BM25's inverse document frequency of a term ``docs`` of ``size`` memories carry."""
    # Lucene's form: always positive, even for a term most memories carry.
    return math.log(1.0 + (max(size, docs) - docs + 0.5) / (docs + 0.5))


def term_rows(rowid: int, tokens: Iterable[str]) -> list[tuple[str, int, int]]:
    """The ``memory_terms`` rows of the memory at ``rowid`` with ``tokens``."""
    distinct = sorted(set(tokens))
    return [(term, rowid, len(distinct)) for term in distinct]


async def add_terms(db: aiosqlite.Connection, rows: list[tuple[str, int, int]]) -> None:
    """Index memories' distinct tokens (rows from :func:`term_rows`)."""
    await db.executemany("INSERT OR IGNORE INTO memory_terms (term, row, size) VALUES (?, ?, ?)", rows)


async def remove_terms(db: aiosqlite.Connection, rowid: int, tokens: Iterable[str]) -> None:
    """Take a forgotten memory's tokens out of ``memory_terms``."""
    sql = "DELETE FROM memory_terms WHERE term IN (SELECT value FROM json_each(?)) AND row = ?"
    await db.execute(sql, (json.dumps(sorted(set(tokens))), rowid))
