"""A batch's in-memory view of the nearest memories answers as SQLite's ``LIMIT`` would, or not at all."""

from __future__ import annotations

from memory_orchestrator.adapters.sqlite.batch_view import Part


def test_the_newest_before_a_moment_merge_the_store_and_the_batch() -> None:
    part = Part([("2026-01-03", "s3"), ("2026-01-01", "s1")])  # the store's, newest first
    part.added += [("2026-01-04", "b4"), ("2026-01-05", "b5"), ("2026-01-07", "b7")]
    assert part.before("2026-01-05", 3) == ["b5", "b4", "s3"]
    assert part.before("2026-01-05", 3, low="2026-01-04") == ["b5", "b4"]
    assert part.before("2026-01-09", 10) == ["b7", "b5", "b4", "s3", "s1"]


def test_a_memory_older_than_the_store_s_newest_is_left_to_sqlite() -> None:
    part = Part([("2026-01-03", "s3")])
    assert part.before("2026-01-02", 3) is None
    assert part.after("2026-01-03", 3) is None  # the store has one at that moment
    assert part.after("2026-01-04", 3) == []


def test_a_tie_at_the_limit_is_left_to_sqlite_unless_ids_break_it() -> None:
    part = Part([("2026-01-01", "s1")])
    part.added += [("2026-01-02", "b1"), ("2026-01-02", "b2"), ("2026-01-03", "b3")]
    assert part.before("2026-01-03", 2) is None  # b1 or b2: SQLite's index order decides
    assert part.before("2026-01-03", 2, by_id=True) == ["b3", "b2"]
    assert part.before("2026-01-03", 3) == ["b3", "b2", "b1"]  # no tie at the limit
    assert part.after("2026-01-02", 1) is None
    assert part.after("2026-01-02", 1, by_id=True) == ["b1"]
    assert part.after("2026-01-02", 2, high="2026-01-02") == ["b1", "b2"]
