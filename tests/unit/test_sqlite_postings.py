"""A batch ranks its lexical candidates in memory as SQLite ranks them, or leaves the lookup to SQLite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_orchestrator.adapters.sqlite import create_backend
from memory_orchestrator.adapters.sqlite.batch_view import BatchView
from memory_orchestrator.adapters.sqlite.lexical import LEXICAL_CANDIDATES, LEXICAL_POSTINGS, ranked_rows
from memory_orchestrator.adapters.sqlite.postings import TermPostings, rank
from memory_orchestrator.adapters.sqlite.terms import term_frequencies
from memory_orchestrator.ports import NewMemory
from memory_orchestrator.ports.text import tokenize

T0 = datetime(2026, 1, 5, 9, tzinfo=UTC)
WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "heron"]


def _memories() -> list[NewMemory]:
    # few words, many repeats: rows sharing one, two or three rare words with equal sizes (ties)
    memories = []
    for i in range(300):
        words = [WORDS[i % 8], WORDS[(i * 3) % 7], WORDS[(i * 5) % 8], f"w{i % 13}", f"v{i % 29}"]
        words += [f"pad{j}" for j in range(i % 4)]
        memories.append(
            NewMemory(" ".join(words), source="s", dedup=False, created_at=T0 + timedelta(hours=i))
        )
    return memories


@pytest.mark.anyio
async def test_in_memory_ranking_finds_the_rows_sqlite_finds(tmp_path: Path) -> None:
    async with create_backend({"path": str(tmp_path / "m.db")}) as backend:
        await backend.remember_many(_memories())
        db = backend.db
        answered = 0
        for i in range(60):
            tokens = frozenset(tokenize(f"{WORDS[i % 8]} {WORDS[(i + 2) % 8]} w{i % 13} v{i % 29} x{i}"))
            view = BatchView()
            await view.start(db, 1)
            found = await view.lexical_rows(db, tokens)
            frequencies, size = await term_frequencies(db, sorted(tokens))
            assert found == await ranked_rows(db, len(tokens), frequencies, size)
            answered += view.lexical_fallbacks == 0
        assert answered >= 30  # most lookups are ranked in memory


def _term(rows: list[tuple[int, int]]) -> TermPostings:
    return TermPostings(sorted(rows, reverse=True))


def test_a_tie_of_one_term_at_the_cut_goes_to_the_newest_rows() -> None:
    term = _term([(row, 5) for row in range(1, 41)])
    assert rank(5, [1.5], [term]) == list(range(40, 40 - LEXICAL_CANDIDATES, -1))


def test_a_near_tie_of_different_terms_at_the_cut_is_left_to_sqlite() -> None:
    first = _term([(row, 5) for row in range(1, 16)])
    second = _term([(row, 5) for row in range(100, 116)])
    # the two terms' rarities differ in the last digits: SQLite may order their rows either way
    assert rank(5, [1.5, 1.5 * (1 + 1e-13)], [first, second]) is None
    assert rank(5, [1.5, 1.6], [first, second]) == [*range(115, 99, -1), 15, 14, 13, 12]


def test_rows_of_several_terms_rank_by_their_summed_rarity() -> None:
    first = _term([(1, 5), (2, 4), (3, 4)])
    second = _term([(1, 5), (4, 4)])
    # row 1 carries both terms (2.0 + 1.0), though longer; rows 2 and 3 tie, the newer first
    assert rank(4, [2.0, 1.0], [first, second]) == [1, 3, 2, 4]


def test_a_term_keeps_only_its_newest_postings() -> None:
    term = _term([(row, 3) for row in range(1, LEXICAL_POSTINGS + 1)])
    term.add(LEXICAL_POSTINGS + 1, 2)
    assert len(term.sizes) == len(term.keys) == LEXICAL_POSTINGS
    assert 1 not in term.sizes and next(iter(term.sizes)) == 2
    assert rank(3, [1.0], [term])[:2] == [LEXICAL_POSTINGS + 1, LEXICAL_POSTINGS]
