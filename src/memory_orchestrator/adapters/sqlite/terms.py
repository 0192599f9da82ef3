"""Choosing which query terms reach FTS5: very common terms cost a scan and say little.

A query term's frequency is first read from ``term_stats`` (memories carrying that exact token). The
keyword index stems, so ``decide`` matches every memory saying ``decided``: a term that is rare or
absent as spelled but common as a stem is counted again the way FTS5 matches it (see
:func:`common_stems`), or its scan stays in every query while BM25 gives it almost no weight.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import aiosqlite

from memory_orchestrator.adapters.sqlite.context import OWN_WORDS

#: Below this many stored memories every term is used (small stores are cheap and exact).
SMALL_STORE = 500
#: A term in more than this share of memories (and more than MIN_COMMON_DOCS) is left out when rarer
#: query terms exist: BM25 gives it little weight, yet scoring its matches dominates query time.
COMMON_SHARE = 0.10
MIN_COMMON_DOCS = 1000


async def selective_terms(
    db: aiosqlite.Connection,
    tokens: Sequence[str],
    *,
    most: int | None = None,
    postings: int | None = None,
    unseen: bool = False,
) -> list[str]:
    """The query terms worth matching: known to the index, rarest first, very common ones dropped.

    One round trip: document frequencies from ``term_stats`` plus the store size (max rowid).
    ``most`` keeps only that many of the rarest terms and ``postings`` stops adding terms once their
    document counts would exceed it (always at least one term): the write path's candidate lookup
    must stay cheap however large the store grows. ``unseen`` also keeps terms no memory spells that
    way: the index stems, so ``invoices`` still finds ``invoice`` (an absent term costs one lookup).
    """
    frequencies, size = await term_frequencies(db, tokens, unseen=unseen)
    common = await common_stems(db, frequencies, size) if unseen else frozenset()
    return choose_terms(frequencies, size, most=most, postings=postings, common=common)


def common_limit(size: int) -> int:
    """Memories above which a term counts as very common in a store of ``size``."""
    return max(MIN_COMMON_DOCS, int(size * COMMON_SHARE))


async def common_stems(db: aiosqlite.Connection, frequencies: dict[str, int], size: int) -> frozenset[str]:
    """The terms of ``frequencies`` not common as spelled but common as FTS5 matches them (stemmed).

    Counted in the memories' own words (``term_stats`` counts those too) and only up to the common
    limit: that bounds the cost, and past it the exact count does not matter. In a store too small
    for any term to be common nothing is counted.
    """
    limit = common_limit(size)
    unsure = sorted(term for term, docs in frequencies.items() if docs <= limit)
    if size < SMALL_STORE or size <= limit or not unsure:
        return frozenset()
    count = "(SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?))"
    params: list[object] = []
    for term in unsure:
        params += [OWN_WORDS + ' : "' + term.replace('"', '""') + '"', limit + 1]
    rows = list(await db.execute_fetchall("SELECT " + ", ".join(count for _ in unsure), params))
    return frozenset(term for term, docs in zip(unsure, rows[0], strict=True) if int(docs) > limit)


async def term_frequencies(
    db: aiosqlite.Connection, tokens: Sequence[str], *, unseen: bool = False
) -> tuple[dict[str, int], int]:
    """Active memories per distinct token of ``tokens`` (those none carries left out, unless
    ``unseen``) and the store size (max rowid), in one round trip."""
    unique = list(dict.fromkeys(tokens))
    if not unique:
        return {}, 0
    # a row of its own (term NULL) carries the size, so it is known even when no term is
    sql = (
        "SELECT term, docs FROM term_stats WHERE docs > 0 AND term IN (SELECT value FROM json_each(?)) "
        "UNION ALL SELECT NULL, (SELECT max(rowid) FROM memories)"
    )
    rows = list(await db.execute_fetchall(sql, (json.dumps(sorted(unique)),)))
    size = next((int(row[1] or 0) for row in rows if row[0] is None), 0)
    frequencies = {str(row[0]): int(row[1]) for row in rows if row[0] is not None}
    if unseen:
        frequencies = {term: frequencies.get(term, 0) for term in unique}
    return frequencies, size


def choose_terms(
    frequencies: dict[str, int],
    size: int,
    *,
    most: int | None = None,
    postings: int | None = None,
    common: frozenset[str] = frozenset(),
) -> list[str]:
    """:func:`selective_terms` over known ``frequencies`` (term -> memories) in a store of ``size``;
    the terms in ``common`` count as very common whatever their frequency."""
    if not frequencies:
        return []  # no term is indexed: nothing can match
    present = sorted(frequencies, key=lambda term: (frequencies[term], term))
    if size < SMALL_STORE and most is None:
        return present
    limit = common_limit(size)
    rare = [term for term in present if frequencies[term] <= limit and term not in common]
    chosen = (rare or present)[:most]
    if postings is None:
        return chosen
    kept: list[str] = []
    total = 0
    for term in chosen:
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
