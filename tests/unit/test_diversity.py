"""Episode diversity: a list question's results are not all one episode's near-copies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.domain.candidates import Candidate
from memory_orchestrator.domain.diversity import EPISODE_PENALTY, diversify
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.domain.ranking import RankedItem
from memory_orchestrator.domain.requests import SearchRequest
from memory_orchestrator.ports import FixedClock, MemoryRecord, NewMemory

SESSION_ONE = datetime(2026, 3, 1, 14, 0, tzinfo=UTC)
SESSION_TWO = datetime(2026, 3, 8, 9, 0, tzinfo=UTC)
NOW = datetime(2026, 3, 9, 9, 0, tzinfo=UTC)


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


SESSION = (
    ("Melanie", "I read a great book about horses last night."),
    ("Caroline", "Which book about horses? I love books about horses!"),
    ("Melanie", "The horse book was a gift from my sister; I read books about horses often."),
    ("Caroline", "Books about horses are the best, I read one too."),
)


async def conversation() -> InMemoryBackend:
    backend = InMemoryBackend(clock=FixedClock(NOW))
    await backend.open()
    for offset, (speaker, text) in enumerate(SESSION):
        at = SESSION_ONE + timedelta(seconds=offset)
        await backend.remember(NewMemory(f"{speaker}: {text}", source=speaker, created_at=at))
    await backend.remember(
        NewMemory("Melanie: Finished a book on pottery.", source="Melanie", created_at=SESSION_TWO)
    )
    return backend


@pytest.mark.anyio
async def test_only_a_list_question_is_diversified() -> None:
    backend = await conversation()
    engine = Orchestrator(backend, clock=FixedClock(NOW))
    listed = await engine.search(SearchRequest("What books has Melanie read?", top_k=5))
    assert any(cue.startswith("several: ") for cue in listed.plan.intent_cues)
    paid = [item.signals.get("diversity", 0.0) for item in listed.items]
    assert sorted(paid)[-1] >= 2 * EPISODE_PENALTY
    assert any("same episode" in reason for item in listed.items for reason in item.reasons)
    # asked about one book: the session's turns keep their plain order and pay nothing
    single = await engine.search(SearchRequest("Which book about horses did Melanie read?", top_k=5))
    assert not any("diversity" in item.signals for item in single.items)
    scores = [item.score for item in single.items]
    assert scores == sorted(scores, reverse=True)
