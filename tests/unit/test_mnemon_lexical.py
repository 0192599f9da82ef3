"""The Mnemon adapter's in-process BM25 index keeps context at index time like SQLite does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory_orchestrator.adapters.mnemon.lexical import LexicalIndex
from memory_orchestrator.adapters.mnemon.reader import _documents
from memory_orchestrator.ports import MemoryRecord

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def _record(memory_id: str, content: str, source: str, seconds: int) -> MemoryRecord:
    at = T0 + timedelta(seconds=seconds)
    return MemoryRecord(id=memory_id, content=content, created_at=at, updated_at=at, source=source)


def test_a_reply_is_found_by_the_words_of_the_message_it_answers() -> None:
    records = [
        _record("later", "I'm thinking of new paintings", "Caroline", 7200),  # two hours on: no context
        _record("answer", "I'm thinking of working with trans people", "Caroline", 1),
        _record("question", "What counseling services do you want to pursue?", "Melanie", 0),
        _record(
            "own", "Counseling is on my mind too", "Melanie", 2
        ),  # its own word; its context (the answer) has none
    ]
    index = LexicalIndex.build(_documents(records))
    scores = index.scores("counseling")
    assert set(scores) == {"question", "answer", "own"}
    assert scores["question"] > scores["answer"]  # its own words weigh more than its context
    # and the question is found by the words of its answer (the turn after it)
    assert set(index.scores("trans")) == {"answer", "question", "own"}


def test_notes_of_one_source_in_a_row_are_not_each_others_context() -> None:
    records = [
        _record("kafka", "Kafka consumer lag alert", "agent", 0),
        _record("plants", "The office plants were watered", "agent", 1),
    ]
    assert set(LexicalIndex.build(_documents(records)).scores("kafka lag")) == {"kafka"}
