"""Keyword search that scores only the matches that can make the top: impact-ordered postings.

FTS5's ``bm25()`` scores every match before ``ORDER BY rank LIMIT`` keeps the best, and at 100k
memories a common query term matches tens of thousands of them (most of a context call's SQL time).
``keyword_impacts`` keeps, per stemmed term of the keyword index (both columns, FTS5's own
stemmer), each memory's BM25 term part ``f (k1 + 1) / (f + k1 (1 - b + b d / L))`` (``f``: the
column-weighted frequency, ``d``: the row's tokens, ``L``: the reference length in ``meta``),
ordered best first. A query reads the best postings of each term and scores them, together with
every memory matching two or more of its terms; a memory outside them matches one term only and
scores at most that term's idf times its last posting read (scaled by how far the store's average
length has drifted from ``L``), so when the pool's worst score beats that bound the pool is exactly
FTS5's (up to ties). Otherwise the postings down to the bound the pool sets are read and scored
too, which is exact; when even that would read most postings, the plain query runs instead.

The scores are ``bm25()``'s own doubles. A memory matching one term scores what its posting gives
(fts5_aux.c's arithmetic, in its order); one matching two or more scores what FTS5 gives it for the
``AND`` of exactly those terms (the same phrases in the same order; an absent phrase adds 0.0), so
with two or three distinct terms a query asks FTS5 for the best ``pool`` of each combination of
them. With more, FTS5 scores the candidates and every memory matching two or more terms in one scan
of all the matches, a scan that filters tens of thousands of rows at 100k memories.

The postings follow the FTS rows: every write of a row (insert, context refresh, forget) re-derives
that row's postings here (``reindex``). Below ``SMALL_STORE`` memories none are kept (every match is
scored, as cheap there), and the write that crosses it builds them all from FTS5's vocabulary, with
the store's average row length as their reference.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from memory_orchestrator.ports.text import CONTEXT_WEIGHT

#: BM25's constants as FTS5's ``bm25()`` uses them.
K1 = 1.2
B = 0.75
#: The reference row length of a store whose index was empty when its postings began.
DEFAULT_LENGTH = 32.0
#: Below this many memories (max rowid) every query is cheap enough to score all its matches.
SMALL_STORE = 20000
#: Below this many postings of the query's terms the plain FTS5 query is as cheap.
SMALL_QUERY = 6000
#: Most distinct stems a query is pruned over (the pairs query grows with their square).
MOST_STEMS = 6
#: Give up pruning when the second round would read more than this share of a term's postings.
DEEPEST = 0.25
#: Most distinct stems scored by combination (one FTS5 query of ``2^n - n - 1`` parts); more go
#: through the scan of every match (``_FtsScorer``).
COMBINED_STEMS = 3

# A scratch FTS5 table with the keyword index's tokenizer and columns: its vocabulary is the stems
# FTS5 derives, so the postings use exactly the index's terms (no second stemmer to drift from it).
_SCRATCH = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.stems USING fts5("
    "tokens, context, tokenize = 'porter unicode61 remove_diacritics 0')"
)
_SCRATCH_VOCAB = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.stems_vocab USING fts5vocab(temp, 'stems', 'instance')"
)


async def _scratch(db: Connection) -> None:
    """Create the scratch table and its vocabulary on this connection unless they exist."""
    await db.execute(_SCRATCH)
    await db.execute(_SCRATCH_VOCAB)


async def drop_scratch(db: Connection) -> None:
    """Drop the scratch table (the next call creates it again), after a batch re-derived thousands of
    rows through it: FTS5 keeps deleted rows in its segments until later writes merge them, and each
    later call's vocabulary scan reads them meanwhile (after a batch of 2,000 memories at 100k, the
    next six single writes spent ~25 ms each in it instead of ~1). Only on a connection no other
    call shares meanwhile (the write connection)."""
    await db.execute("DROP TABLE IF EXISTS temp.stems_vocab")
    await db.execute("DROP TABLE IF EXISTS temp.stems")


class Connection(Protocol):
    """What the postings need of a connection (aiosqlite's or the write connection's ``SyncConnection``)."""

    async def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Any: ...

    async def execute_fetchall(self, sql: str, parameters: Sequence[Any] = ..., /) -> Iterable[Any]: ...


def impact_sql(vocab: str, when: str = "1") -> str:
    """``INSERT`` of the postings of every row in the fts5vocab ``instance`` table ``vocab`` (if
    ``when``), by the reference length in ``meta``."""
    weight = f"CASE col WHEN 'context' THEN {CONTEXT_WEIGHT!r} ELSE 1.0 END"
    return (
        "INSERT INTO keyword_impacts (term, impact, row, f, d) "
        f"SELECT i.term, i.f * {K1 + 1.0!r} / (i.f + {K1!r} * ({1.0 - B!r} + {B!r} * l.d / ({LENGTH}))), "
        "i.doc, i.f, l.d "
        f"FROM (SELECT term, doc, sum({weight}) AS f FROM {vocab} GROUP BY term, doc) i "
        f"JOIN (SELECT doc, count(*) AS d FROM {vocab} GROUP BY doc) l ON l.doc = i.doc WHERE {when}"
    )


def length_sql(vocab: str, when: str = "1") -> str:
    """Fix the reference length at the average row length (tokens) of ``vocab``'s rows (if ``when``)."""
    return (
        "INSERT OR REPLACE INTO meta (key, value) SELECT 'keyword_length', "
        f"coalesce(CAST(count(*) AS REAL) / nullif(count(DISTINCT doc), 0), {DEFAULT_LENGTH!r}) "
        f"FROM {vocab} HAVING {when}"
    )


#: The reference row length of the impacts (fixed when the postings began: they are ordered by it);
#: no row in ``meta`` while the store is too small for the postings to be kept.
LENGTH = "SELECT CAST(value AS REAL) FROM meta WHERE key = 'keyword_length'"
#: The postings are built (from FTS5's vocabulary) once the store reaches SMALL_STORE memories.
LARGE = "(SELECT max(rowid) FROM memories) >= {threshold}"


async def reindex(db: Connection, rowids: Iterable[int]) -> None:
    """Re-derive the postings of the FTS rows ``rowids`` from what FTS now holds for them (a row no
    longer in FTS loses its postings). A store below ``SMALL_STORE`` memories keeps none (its
    queries score every match); the write that makes it larger builds them all."""
    wanted = json.dumps(sorted(set(rowids)))
    if wanted == "[]":
        return
    sql = f"SELECT ({LENGTH}), {LARGE.format(threshold='?')}"
    state = next(iter(await db.execute_fetchall(sql, (SMALL_STORE,))))
    if state[0] is None:
        if state[1]:
            await build(db)
        return
    await _scratch(db)
    await db.execute("DELETE FROM keyword_impacts WHERE row IN (SELECT value FROM json_each(?))", (wanted,))
    await db.execute(
        "INSERT OR REPLACE INTO temp.stems (rowid, tokens, context) SELECT rowid, tokens, context "
        "FROM memories_fts WHERE rowid IN (SELECT value FROM json_each(?))",
        (wanted,),
    )
    # only the rows asked for: a scratch row some failed call left behind never becomes a posting
    await db.execute(impact_sql("temp.stems_vocab", "i.doc IN (SELECT value FROM json_each(?))"), (wanted,))
    await db.execute("DELETE FROM temp.stems WHERE rowid IN (SELECT value FROM json_each(?))", (wanted,))


async def build(db: Connection) -> None:
    """Every row's postings from FTS5's own vocabulary, by the store's average row length."""
    await db.execute("DROP TABLE IF EXISTS temp.impacts_all")
    await db.execute(f"CREATE VIRTUAL TABLE temp.impacts_all USING {ALL_ROWS}")
    await db.execute("DELETE FROM keyword_impacts")
    await db.execute(length_sql("temp.impacts_all"))
    await db.execute(impact_sql("temp.impacts_all"))
    await db.execute("DROP TABLE temp.impacts_all")


#: The vocabulary (stem, row, column, offset) of the whole keyword index.
ALL_ROWS = "fts5vocab(main, 'memories_fts', 'instance')"


#: Numbers the query stemming calls (their scratch rows' range).
_CALLS = itertools.count()
#: One posting read: ``(row, impact, f, d)``.
Posting = tuple[int, float, float, int]


async def best_matches(
    db: Connection, bm25: str, terms: Sequence[str], pool: int, size: int
) -> list[tuple[int, float]] | None:
    """The ``pool`` best ``(rowid, bm25)`` matches of the FTS ``OR`` of ``terms``, as FTS5's
    ``ORDER BY bm25 LIMIT pool`` over every match finds them; ``None`` when the plain query is as
    cheap (a store of ``size`` memories or fewer postings) or pruning would not pay."""
    if size < SMALL_STORE:
        return None
    found = await _stems(db, terms)
    if found is None:
        return None
    stems, counts = found
    distinct = list(dict.fromkeys(stems))
    if sum(counts.values()) <= SMALL_QUERY or len(distinct) > MOST_STEMS:
        return None
    rows, length, reference = await _averages(db)
    if rows == 0 or reference is None:  # no postings kept yet
        return None
    # a phrase's idf as bm25() computes it; a stem spelled by two query terms is two phrases
    idf = {stem: stems.count(stem) * _idf(rows, counts[stem]) for stem in distinct}
    stretch = max(1.0, length / reference)
    scorer: _Scorer
    if len(distinct) == 1:  # one stem, however often spelled: nothing to combine
        scorer = _CombinedScorer(db, bm25, (), length, pool)
    elif len(distinct) == len(terms) <= COMBINED_STEMS:
        scorer = _CombinedScorer(db, bm25, terms, length, pool)
    else:
        scorer = _FtsScorer(db, bm25, terms, stems, pool)
    bounds: dict[str, float] = {}
    for stem in distinct:
        postings = await _best_postings(db, stem, pool)
        scorer.add(idf[stem], postings)
        last = postings[-1][1] if len(postings) == pool else 0.0
        bounds[stem] = idf[stem] * last * stretch
    best = await scorer.score()
    worst = -best[-1][1] if len(best) == pool else None
    if worst is not None and max(bounds.values()) <= worst:
        return best
    if worst is None or worst <= 0.0:
        return None
    for stem in distinct:
        if bounds[stem] > worst:
            floor = worst / (idf[stem] * stretch)
            deeper = await _postings_above(db, stem, floor, int(counts[stem] * DEEPEST) + 1)
            if deeper is None:
                return None
            scorer.add(idf[stem], deeper)
    return await scorer.score()


class _Scorer(Protocol):
    """Scores the postings read so far (``add``: those of one stem, whose phrase idf is ``idf``) and
    every memory matching two or more stems: the best ``pool`` as ``(rowid, bm25)``, best first."""

    def add(self, idf: float, postings: Sequence[Posting]) -> None: ...

    async def score(self) -> list[tuple[int, float]]: ...


def _rank(idf: float, f: float, d: int, length: float) -> float:
    """``bm25()`` of a memory matching one phrase of a query, from its posting: the same operations
    in the same order as fts5Bm25Function, so the same double (an absent phrase adds 0.0)."""
    return -1.0 * (0.0 + idf * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * d / length))))


class _CombinedScorer:
    """One stem, or two or three each spelled once in the query: a memory matching one of them scores
    what its posting gives; the memories matching two or more are the best ``pool`` of each
    combination's ``AND``, as FTS5 scores it (asked once). A memory keeps its best score: a
    combination short of all the terms it matches scores it lower, and when its exact combination did
    not keep it, ``pool`` memories score at least as well."""

    def __init__(self, db: Connection, bm25: str, terms: Sequence[str], length: float, pool: int) -> None:
        self.db, self.length, self.pool = db, length, pool
        self.ranks: dict[int, float] = {}
        self.together: list[tuple[int, float]] | None = None
        best = f"SELECT * FROM (SELECT rowid, {bm25} FROM memories_fts WHERE memories_fts MATCH ? "
        best += "ORDER BY 2 LIMIT ?)"
        combinations = [
            " AND ".join(_quoted(term) for term in combination)
            for size in range(2, len(terms) + 1)
            for combination in itertools.combinations(terms, size)
        ]
        self.sql = " UNION ALL ".join(best for _ in combinations)  # "": one term, none to ask for
        self.params = [value for combination in combinations for value in (combination, pool)]

    def add(self, idf: float, postings: Sequence[Posting]) -> None:
        for row, _, f, d in postings:
            rank = _rank(idf, f, d, self.length)
            if rank < self.ranks.get(row, math.inf):
                self.ranks[row] = rank

    async def score(self) -> list[tuple[int, float]]:
        if self.together is None:
            rows = await self.db.execute_fetchall(self.sql, self.params) if self.sql else []
            self.together = [(int(row[0]), float(row[1])) for row in rows]
        ranks = dict(self.ranks)
        for row, rank in self.together:
            if rank < ranks.get(row, math.inf):
                ranks[row] = rank
        ranked = sorted((rank, row) for row, rank in ranks.items())
        return [(row, rank) for rank, row in ranked[: self.pool]]


class _FtsScorer:
    """More stems, or a stem spelled twice: FTS5's own ``bm25()`` over the candidates and every
    memory matching two or more stems (scanning the matches, scoring only those)."""

    def __init__(self, db: Connection, bm25: str, terms: Sequence[str], stems: list[str], pool: int) -> None:
        spelled = list({stem: term for term, stem in zip(terms, stems, strict=True)}.values())
        pairs = [f"({_quoted(a)} AND {_quoted(b)})" for i, a in enumerate(spelled) for b in spelled[i + 1 :]]
        self.db, self.pool = db, pool
        self.rows: set[int] = set()
        self.params = (" OR ".join(_quoted(term) for term in terms), " OR ".join(pairs))
        # '+rowid': a filter, not a rowid lookup (FTS5 would re-run the whole query per value)
        self.sql = (
            f"SELECT rowid, {bm25} AS rank FROM memories_fts WHERE memories_fts MATCH ? AND +rowid IN "
            "(SELECT value FROM json_each(?) "
            "UNION SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?) ORDER BY rank LIMIT ?"
        )

    def add(self, idf: float, postings: Sequence[Posting]) -> None:
        self.rows.update(posting[0] for posting in postings)

    async def score(self) -> list[tuple[int, float]]:
        query, pairs = self.params
        rows = await self.db.execute_fetchall(
            self.sql, (query, json.dumps(sorted(self.rows)), pairs, self.pool)
        )
        return [(int(row[0]), float(row[1])) for row in rows]


def _quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _idf(rows: int, hits: int) -> float:
    # fts5_aux.c: log((N - n + 0.5) / (n + 0.5)), floored at 1e-6
    value = math.log((rows - hits + 0.5) / (hits + 0.5))
    return value if value > 0.0 else 1e-6


async def _stems(db: Connection, terms: Sequence[str]) -> tuple[list[str], dict[str, int]] | None:
    """Each term's stem in the keyword index and each stem's postings (``None`` unless every term
    is exactly one token)."""
    await _scratch(db)
    # rowids of this call's own (negative: never a memory's, whose rows ``reindex`` stems here;
    # reads sharing the connection interleave, so each call keeps to its own range)
    last = -1 - next(_CALLS) % 1_000_000 * 1_000_000
    first = last - len(terms) + 1
    try:
        sql = "INSERT OR REPLACE INTO temp.stems (rowid, tokens) SELECT ? - key, value FROM json_each(?)"
        await db.execute(sql, (last, json.dumps(list(terms))))
        sql = "SELECT ? - doc, term, (SELECT count(*) FROM keyword_impacts k WHERE k.term = v.term) "
        sql += "FROM temp.stems_vocab v WHERE doc BETWEEN ? AND ?"
        found = list(await db.execute_fetchall(sql, (last, first, last)))
    finally:
        await db.execute("DELETE FROM temp.stems WHERE rowid BETWEEN ? AND ?", (first, last))
    stems: dict[int, list[str]] = {}
    for doc, stem, _ in found:
        stems.setdefault(int(doc), []).append(str(stem))
    if any(len(stems.get(position, [])) != 1 for position in range(len(terms))):
        return None
    return [stems[position][0] for position in range(len(terms))], {str(row[1]): int(row[2]) for row in found}


async def _best_postings(db: Connection, stem: str, limit: int) -> list[Posting]:
    sql = "SELECT row, impact, f, d FROM keyword_impacts WHERE term = ? ORDER BY impact DESC LIMIT ?"
    return [_posting(row) for row in await db.execute_fetchall(sql, (stem, limit))]


def _posting(row: Sequence[Any]) -> Posting:
    return (int(row[0]), float(row[1]), float(row[2]), int(row[3]))


async def _postings_above(db: Connection, stem: str, floor: float, most: int) -> list[Posting] | None:
    """``stem``'s postings with impact at least ``floor``; ``None`` if more than ``most``."""
    sql = "SELECT row, impact, f, d FROM keyword_impacts WHERE term = ? AND impact >= ? "
    sql += "ORDER BY impact DESC LIMIT ?"
    rows = [_posting(row) for row in await db.execute_fetchall(sql, (stem, floor, most + 1))]
    return None if len(rows) > most else rows


async def _averages(db: Connection) -> tuple[int, float, float | None]:
    """FTS5's row count and average row length (in tokens), from its averages record, and the
    reference length of the postings."""
    sql = f"SELECT (SELECT block FROM memories_fts_data WHERE id = 1), ({LENGTH})"
    block, reference = next(iter(await db.execute_fetchall(sql)))
    values = _varints(bytes(block or b""))
    rows = values[0] if values else 0
    return rows, (sum(values[1:]) / rows if rows else 0.0), None if reference is None else float(reference)


def _varints(blob: bytes) -> list[int]:
    """SQLite varints (big-endian 7-bit groups; a ninth byte carries 8 bits)."""
    values: list[int] = []
    position = 0
    while position < len(blob):
        value = 0
        for width in range(9):
            byte = blob[position]
            position += 1
            if width == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        values.append(value)
    return values
