"""A batch's lexical candidates ranked in memory, as ``lexical.ranked_rows`` ranks them in SQLite.

``ranked_rows`` scores the newest ``LEXICAL_POSTINGS`` postings of each chosen term in SQL, about 400
of them per write of a bulk import, which made it the largest single cost of a batch. A batch keeps
the postings of the terms it has chosen instead (read once, then its own rows added as it writes
them) and ranks them here, touching only the few rows that can make the cut.

A row's score depends on which of the chosen terms it carries and on its size (distinct tokens)
only, and for rows carrying one same term it falls as their size grows: so the best rows of one term
are its smallest ``(size, newest)`` keys, kept sorted per term. Rows carrying several chosen terms
are few (the intersections of the terms' rows). The score is the SQL expression of ``_RANKED``,
operation for operation, so it is SQLite's up to the order in which ``sum()`` adds the rarities of a
row's terms (that order is SQLite's business): a score within :data:`NEAR` of the cut's decides
nothing (SQLite answers), unless the rows at the cut carry the same one or two terms and have the
same size (every order of adding two numbers gives the same sum, and SQLite too then breaks the tie
by the newer row). ``tests/unit/test_sqlite_postings.py`` compares the two.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from itertools import combinations

from memory_orchestrator.adapters.sqlite.lexical import K1, LEXICAL_CANDIDATES, LEXICAL_POSTINGS, B

#: Scores this close (relative) may compare differently in SQLite.
NEAR = 1e-9
#: Keys order rows by size, then newest first: ``size << _SHIFT | (_NEWEST - row)``.
_SHIFT = 48
_NEWEST = (1 << _SHIFT) - 1


def _key(row: int, size: int) -> int:
    return size << _SHIFT | (_NEWEST - row)


class TermPostings:
    """The newest ``LEXICAL_POSTINGS`` postings of one term: row -> size in row order, and their keys
    sorted (smallest size first, then newest)."""

    __slots__ = ("keys", "sizes")

    def __init__(self, newest_first: list[tuple[int, int]]) -> None:
        self.sizes = {row: size for row, size in reversed(newest_first)}
        self.keys = sorted(_key(row, size) for row, size in newest_first)

    def add(self, row: int, size: int) -> None:
        """A row newer than every other (the batch's latest memory)."""
        self.sizes[row] = size
        insort(self.keys, _key(row, size))
        if len(self.sizes) > LEXICAL_POSTINGS:
            oldest = next(iter(self.sizes))
            del self.keys[bisect_left(self.keys, _key(oldest, self.sizes.pop(oldest)))]


def rank(distinct: int, rarities: list[float], terms: list[TermPostings]) -> list[int] | None:
    """The rows ``ranked_rows`` finds for a memory of ``distinct`` distinct tokens whose chosen terms
    (rarest first) have these ``rarities`` and postings, best first; ``None`` when only SQLite can
    tell which rows make the cut."""
    many = _shared_rows(terms)
    # (score, row, mask, size) of every row that can make the cut: the best rows of one term alone
    # (sorted by size, and a score is computed once per size), then the rows of several terms
    scored = []
    for position, term in enumerate(terms):
        mask = 1 << position
        total = rarities[position]
        taken = 0
        last_size = score = -1.0
        for key in term.keys:
            row = _NEWEST - (key & _NEWEST)
            if row in many:
                continue
            size = key >> _SHIFT
            if size != last_size:
                last_size, score = size, _score(total, size, distinct)
            scored.append((score, row, mask, size))
            taken += 1
            if taken > LEXICAL_CANDIDATES:
                break
    scores: dict[tuple[int, int], float] = {}
    for row, shape in many.items():
        shared = scores.get(shape)
        if shared is None:
            shared = scores[shape] = _score(_sum(rarities, shape[0]), shape[1], distinct)
        scored.append((shared, row, *shape))
    scored.sort(reverse=True)
    if len(scored) > LEXICAL_CANDIDATES and not _decided(scored):
        return None
    return [entry[1] for entry in scored[:LEXICAL_CANDIDATES]]


def _decided(scored: list[tuple[float, int, int, int]]) -> bool:
    """Whether SQLite keeps the same first ``LEXICAL_CANDIDATES`` of ``scored`` (sorted, longer)."""
    last = LEXICAL_CANDIDATES - 1
    cut, _, mask, size = scored[last]
    if cut - scored[last + 1][0] > NEAR * cut:
        return True
    # a near tie at the cut: every row around it must be the same sum of at most two terms
    if mask.bit_count() > 2:
        return False
    for step in (-1, 1):
        index = last + step
        while 0 <= index < len(scored) and abs(cut - scored[index][0]) <= NEAR * cut:
            if scored[index][2] != mask or scored[index][3] != size:
                return False
            index += step
    return True


def _shared_rows(terms: list[TermPostings]) -> dict[int, tuple[int, int]]:
    """Rows carrying two or more of ``terms``: (bit mask of the terms they carry, size)."""
    many: dict[int, tuple[int, int]] = {}
    for (i, first), (j, second) in combinations(enumerate(terms), 2):
        pair = 1 << i | 1 << j
        small, large = sorted((first.sizes, second.sizes), key=len)
        for row in small.keys() & large.keys():
            known = many.get(row)
            many[row] = (pair, small[row]) if known is None else (known[0] | pair, known[1])
    return many


def _sum(rarities: list[float], mask: int) -> float:
    # SQLite's sum() of the row's rarities, added in term order
    total = 0.0
    for position, rarity in enumerate(rarities):
        if mask >> position & 1:
            total += rarity
    return total


def _score(total: float, size: int, distinct: int) -> float:
    # _RANKED's expression, operation for operation
    return total * (K1 + 1.0) / (1.0 + K1 * ((1.0 - B) + B * size / distinct))
