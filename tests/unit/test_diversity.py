"""Episode diversity: a list question's results are not all one episode's near-copies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory_orchestrator.domain.candidates import Candidate
from memory_orchestrator.domain.diversity import EPISODE_PENALTY, diversify
from memory_orchestrator.domain.ranking import RankedItem
from memory_orchestrator.ports import MemoryRecord

SESSION_ONE = datetime(2026, 3, 1, 14, 0, tzinfo=UTC)
SESSION_TWO = datetime(2026, 3, 8, 9, 0, tzinfo=UTC)


def item(memory_id: str, score: float, at: datetime, *, superseded: bool = False) -> RankedItem:
    record = MemoryRecord(id=memory_id, content=f"memory {memory_id}", created_at=at, updated_at=at)
    return RankedItem(Candidate(record), score, {}, superseded=superseded)


def ids(items: list[RankedItem]) -> list[str]:
    return [entry.record.id for entry in items]


def test_a_hit_from_another_episode_outranks_close_seconds_of_the_same_episode() -> None:
    first = [item(f"s1-{n}", 1.0 - 0.01 * n, SESSION_ONE + timedelta(seconds=n)) for n in range(4)]
    other = item("s2", 0.95, SESSION_TWO)
    result = diversify([*first, other], keep=3)
    assert ids(result)[:3] == ["s1-0", "s2", "s1-1"]
    # the second result of session one paid for the first; the other session's result paid nothing
    assert result[2].signals["diversity"] == EPISODE_PENALTY
    assert "diversity" not in result[1].signals
    assert result[2].score == 0.99 - EPISODE_PENALTY
    assert any("same episode" in note for note in result[2].notes)


def test_a_much_stronger_hit_of_the_same_episode_still_wins() -> None:
    result = diversify(
        [
            item("a", 1.0, SESSION_ONE),
            item("b", 0.9, SESSION_ONE + timedelta(minutes=5)),
            item("c", 0.5, SESSION_TWO),
        ],
        keep=3,
    )
    assert ids(result) == ["a", "b", "c"]


def test_memories_more_than_the_window_apart_are_separate_episodes() -> None:
    result = diversify(
        [
            item("a", 1.0, SESSION_ONE),
            item("b", 0.99, SESSION_ONE + timedelta(hours=2)),
            item("c", 0.98, SESSION_TWO),
        ],
        keep=3,
    )
    assert ids(result) == ["a", "b", "c"]
    assert all("diversity" not in entry.signals for entry in result)


def test_superseded_items_stay_last_and_items_beyond_keep_keep_their_order() -> None:
    items = [
        item("a", 1.0, SESSION_ONE),
        item("b", 0.99, SESSION_ONE + timedelta(seconds=1)),
        item("c", 0.95, SESSION_TWO),
        item("old", 2.0, SESSION_TWO + timedelta(days=1), superseded=True),
    ]
    result = diversify(items, keep=2)
    assert ids(result) == ["a", "c", "b", "old"]
    assert ids(diversify(items, keep=10))[-1] == "old"
    assert diversify([], keep=5) == []
