"""The write path's similar memories (``ports.similar``), from the ``memory_terms`` postings.

The domain compares a new memory with them on shared words: a near-duplicate (token Jaccard at or
above ``write_dedup_threshold``), a contradiction or a link proposal (word overlap). So memories are
ranked by the words they share with it, scored as ``lexical.lexical_rows`` scores the candidates of
semantic edges (summed rarity of the shared terms, damped by length), over every query term that is
not very common (``terms.choose_terms``), from two bounded sets of postings:

- the newest ``RECENT_POSTINGS`` of each term, scored on the terms found there;
- every posting of the rarest terms, up to ``PREFIX_ROWS`` memories, scored exactly on all terms.
  A memory missing at most a share ``s`` of the new one's ``n`` words carries at least one of its
  ``floor(s * n) + 1`` rarest words (prefix filtering, as in similarity joins): for a near-duplicate
  (``s`` = 0.15) of a memory of up to 13 words that is its 2 rarest, typically a name or a number
  with a handful of postings. However old, a near-duplicate is found and ranked on all its words.

A keyword search of the whole text (what the write path used before) scores every match of every
term: ~25,000 postings per write in a 100k store, 20 ms of CPU, against ~1 ms here.
"""

from __future__ import annotations

import json
from datetime import datetime

import aiosqlite

from memory_orchestrator.adapters.sqlite.lexical import K1, POSTINGS, B, idf
from memory_orchestrator.adapters.sqlite.records import select_records
from memory_orchestrator.adapters.sqlite.rows import MEMORY_COLUMNS, visible_clause
from memory_orchestrator.adapters.sqlite.terms import choose_terms, term_frequencies, within_postings
from memory_orchestrator.ports import Filters, MemoryRecord
from memory_orchestrator.ports.text import tokenize

#: The newest postings of each term that are scored.
RECENT_POSTINGS = 500
#: Memories carrying the rarest terms that are scored on every term (a lookup per memory and term).
PREFIX_ROWS = 64

_DAMPING = f"{K1 + 1.0!r} / (1.0 + {K1!r} * ({1.0 - B!r} + {B!r} * {{size}} / ?))"
_RECENT = (
    "SELECT row, sum(rarity) * " + _DAMPING.format(size="size") + " AS score "
    "FROM ({postings}) GROUP BY row ORDER BY score DESC, row DESC LIMIT ?"
)
_EXACT = (
    "SELECT p.row, sum(json_extract(q.value, '$[1]')) * " + _DAMPING.format(size="max(p.size)") + " "
    "FROM (SELECT DISTINCT row FROM ({prefix}) ORDER BY row DESC LIMIT ?) x "
    "CROSS JOIN json_each(?) q CROSS JOIN memory_terms p "
    "ON p.term = json_extract(q.value, '$[0]') AND p.row = x.row GROUP BY p.row"
)


async def similar_records(
    db: aiosqlite.Connection, text: str, now: datetime, limit: int
) -> list[MemoryRecord]:
    """Up to ``limit`` active memories visible at ``now`` sharing the most of ``text``'s words, best
    first (ties: the newer first)."""
    distinct = sorted(set(tokenize(text)))
    frequencies, store = await term_frequencies(db, distinct)
    terms = choose_terms(frequencies, store)  # rarest first
    if not terms:
        return []
    rarity = {term: idf(frequencies[term], store) for term in terms}
    recent = " UNION ALL ".join(f"SELECT * FROM ({POSTINGS})" for _ in terms)
    prefix = within_postings(terms, frequencies, PREFIX_ROWS)  # the rarest
    exact = _EXACT.format(prefix=" UNION ALL ".join(f"SELECT * FROM ({POSTINGS})" for _ in prefix))
    sql = f"SELECT * FROM ({_RECENT.format(postings=recent)}) UNION ALL SELECT * FROM ({exact})"
    # in the order of the text: each part's damping (its select list) before its postings
    params: list[object] = [len(distinct)]
    for term in terms:
        params += [rarity[term], term, RECENT_POSTINGS]
    params += [limit, len(distinct)]
    for term in prefix:
        params += [rarity[term], term, PREFIX_ROWS]
    params += [PREFIX_ROWS, json.dumps([[term, rarity[term]] for term in terms])]
    scores: dict[int, float] = {}
    for row, score in await db.execute_fetchall(sql, params):
        scores[int(row)] = max(float(score), scores.get(int(row), 0.0))  # exact >= recent
    best = sorted(scores, key=lambda row: (-scores[row], -row))[:limit]
    clause = visible_clause(Filters(), now)
    sql = (
        f"SELECT {MEMORY_COLUMNS} FROM json_each(?) j JOIN memories m ON m.rowid = j.value "
        f"WHERE {clause.text()} ORDER BY j.key"
    )
    return await select_records(db, sql, (json.dumps(best), *clause.params))
