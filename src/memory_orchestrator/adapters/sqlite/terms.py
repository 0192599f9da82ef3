"""Choosing which query terms reach FTS5: very common terms cost a scan and say little."""

from __future__ import annotations

import json
from collections.abc import Sequence

import aiosqlite

#: Below this many stored memories every term is used (small stores are cheap and exact).
SMALL_STORE = 500
#: A term in more than this share of memories (and more than MIN_COMMON_DOCS) is left out when rarer
#: query terms exist: BM25 gives it little weight, yet scoring its matches dominates query time.
COMMON_SHARE = 0.10
MIN_COMMON_DOCS = 1000


async def term_frequencies(
    db: aiosqlite.Connection, tokens: Sequence[str], *, unseen: bool = False
) -> tuple[dict[str, int], int]:
    """Active memories per distinct token of ``tokens`` (those none carries left out, unless
    ``unseen``: the index stems, so ``invoices`` still finds ``invoice``) and the store size (max
    rowid), in one round trip."""
    unique = list(dict.fromkeys(tokens))
    if not unique:
        return {}, 0
    sql = (
        "SELECT term, docs, (SELECT max(rowid) FROM memories) FROM term_stats "
        "WHERE docs > 0 AND term IN (SELECT value FROM json_each(?))"
    )
    rows = list(await db.execute_fetchall(sql, (json.dumps(sorted(unique)),)))
    size = int(rows[0][2] or 0) if rows else 0
    frequencies = {str(row[0]): int(row[1]) for row in rows}
    if unseen:
        frequencies = {term: frequencies.get(term, 0) for term in unique}
    return frequencies, size


def choose_terms(
    frequencies: dict[str, int], size: int, *, most: int | None = None, postings: int | None = None
) -> list[str]:
    """The query terms worth matching among known ``frequencies`` (term -> memories) in a store of
    ``size``: rarest first, very common ones dropped when rarer ones exist.

    ``most`` keeps only that many of the rarest terms and ``postings`` stops adding terms once their
    document counts would exceed it (always at least one term): the write path's candidate lookup
    must stay cheap however large the store grows."""
    if not frequencies:
        return []  # no term is indexed: nothing can match
    present = sorted(frequencies, key=lambda term: (frequencies[term], term))
    if size < SMALL_STORE and most is None:
        return present
    limit = max(MIN_COMMON_DOCS, int(size * COMMON_SHARE))
    rare = [term for term in present if frequencies[term] <= limit]
    chosen = (rare or present)[:most]
    return chosen if postings is None else within_postings(chosen, frequencies, postings)


def within_postings(terms: list[str], frequencies: dict[str, int], postings: int) -> list[str]:
    """The first of ``terms`` whose postings add up to at most ``postings`` (at least the first)."""
    kept: list[str] = []
    total = 0
    for term in terms:
        total += frequencies[term]
        if kept and total > postings:
            break
        kept.append(term)
    return kept


async def count_terms(db: aiosqlite.Connection, tokens: Sequence[str], change: int) -> None:
    """Add ``change`` (+1 on insert, -1 on forget) to the document count of each distinct token."""
    await db.executemany(
        "INSERT INTO term_stats (term, docs) VALUES (?, ?) ON CONFLICT (term) DO UPDATE SET docs = docs + ?",
        [(term, max(change, 0), change) for term in set(tokens)],
    )
