"""SQLite context at index time: a turn is also found by the words of the other speaker's turns around it."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_orchestrator.adapters.sqlite import create_backend
from memory_orchestrator.adapters.sqlite.context import CONTEXT_WINDOW
from memory_orchestrator.ports import NewMemory

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
QUESTION = "Melanie: What kind of counseling services do you want to pursue?"
ANSWER = "Caroline: I'm thinking of working with trans people and supporting them."


def _ids(hits: list) -> list[str]:
    return [hit.record.id for hit in hits]


@pytest.mark.anyio
async def test_a_reply_is_found_by_the_words_of_the_turn_before_it(tmp_path: Path) -> None:
    async with create_backend({"path": str(tmp_path / "m.db")}) as backend:
        question = await backend.remember(NewMemory(QUESTION, source="Melanie", created_at=T0))
        answer = await backend.remember(
            NewMemory(ANSWER, source="Caroline", created_at=T0 + timedelta(seconds=1))
        )
        found = _ids(await backend.search("counseling career"))
        # the turn that says the words ranks first; the reply comes through its context
        assert found == [question.id, answer.id]
        # the stored memory is unchanged: its content holds only its own words
        assert [r.content for r in await backend.get([answer.id])] == [ANSWER]


@pytest.mark.anyio
async def test_a_question_is_found_by_the_words_of_its_answer(tmp_path: Path) -> None:
    async with create_backend({"path": str(tmp_path / "m.db")}) as backend:
        question = await backend.remember(NewMemory(QUESTION, source="Melanie", created_at=T0))
        answer = await backend.remember(
            NewMemory(ANSWER, source="Caroline", created_at=T0 + timedelta(seconds=1))
        )
        assert _ids(await backend.search("trans people")) == [answer.id, question.id]


@pytest.mark.anyio
async def test_a_memory_long_after_does_not_take_the_previous_one_as_context(tmp_path: Path) -> None:
    async with create_backend({"path": str(tmp_path / "m.db")}) as backend:
        question = await backend.remember(NewMemory(QUESTION, source="Melanie", created_at=T0))
        later = T0 + CONTEXT_WINDOW + timedelta(seconds=1)
        await backend.remember(NewMemory(ANSWER, source="Caroline", created_at=later))
        assert _ids(await backend.search("counseling")) == [question.id]


@pytest.mark.anyio
async def test_notes_from_one_source_in_a_row_are_not_each_others_context(tmp_path: Path) -> None:
    async with create_backend({"path": str(tmp_path / "m.db")}) as backend:
        kafka = await backend.remember(NewMemory("Kafka consumer lag alert", source="agent", created_at=T0))
        await backend.remember(NewMemory("The office plants were watered", source="agent", created_at=T0))
        assert _ids(await backend.search("kafka lag")) == [kafka.id]


@pytest.mark.anyio
async def test_forgetting_a_memory_takes_its_words_out_of_its_successor(tmp_path: Path) -> None:
    async with create_backend({"path": str(tmp_path / "m.db")}) as backend:
        first = await backend.remember(
            NewMemory("Booked the dentist appointment", source="Melanie", created_at=T0)
        )
        question = await backend.remember(
            NewMemory(QUESTION, source="Melanie", created_at=T0 + timedelta(seconds=1))
        )
        answer = await backend.remember(
            NewMemory(ANSWER, source="Caroline", created_at=T0 + timedelta(seconds=2))
        )
        await backend.forget(question.id)
        assert _ids(await backend.search("counseling")) == []
        # the successor's context is now the memory before the forgotten one
        assert _ids(await backend.search("dentist")) == [first.id, answer.id]


@pytest.mark.anyio
async def test_a_back_dated_memory_becomes_its_successors_context(tmp_path: Path) -> None:
    async with create_backend({"path": str(tmp_path / "m.db")}) as backend:
        first = await backend.remember(
            NewMemory("Booked the dentist appointment", source="Melanie", created_at=T0)
        )
        answer = await backend.remember(
            NewMemory(ANSWER, source="Caroline", created_at=T0 + timedelta(seconds=2))
        )
        assert _ids(await backend.search("dentist")) == [first.id, answer.id]
        question = await backend.remember(
            NewMemory(QUESTION, source="Melanie", created_at=T0 + timedelta(seconds=1))
        )
        assert _ids(await backend.search("counseling")) == [question.id, answer.id]
        # the answer's context is now the question; the question's is nothing (the same source wrote
        # the memory before it)
        assert _ids(await backend.search("dentist")) == [first.id]


@pytest.mark.anyio
async def test_a_version_3_index_is_migrated_with_context_from_the_order_in_time(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    async with create_backend({"path": str(path)}) as backend:
        question = await backend.remember(NewMemory(QUESTION, source="Melanie", created_at=T0))
        answer = await backend.remember(
            NewMemory(ANSWER, source="Caroline", created_at=T0 + timedelta(seconds=1))
        )
    with sqlite3.connect(path) as db:  # put the index back as version 3 built it (one column)
        rows = db.execute("SELECT rowid, tokens FROM memories_fts").fetchall()
        db.execute("DROP TABLE memories_fts")
        db.execute(
            "CREATE VIRTUAL TABLE memories_fts USING fts5(tokens, "
            "tokenize = 'porter unicode61 remove_diacritics 0')"
        )
        db.executemany("INSERT INTO memories_fts (rowid, tokens) VALUES (?, ?)", rows)
        db.execute("PRAGMA user_version = 3")
    async with create_backend({"path": str(path)}) as backend:
        assert _ids(await backend.search("counseling")) == [question.id, answer.id]


@pytest.mark.anyio
async def test_context_records_name_the_other_speakers_turns_around_a_memory(tmp_path: Path) -> None:
    async with create_backend({"path": str(tmp_path / "m.db")}) as backend:
        at = [T0 + timedelta(seconds=second) for second in range(3)]
        question = await backend.remember(NewMemory(QUESTION, source="Melanie", created_at=at[0]))
        answer = await backend.remember(NewMemory(ANSWER, source="Caroline", created_at=at[1]))
        note = await backend.remember(
            NewMemory("Caroline: and a workshop", source="Caroline", created_at=at[2])
        )
        late = await backend.remember(
            NewMemory("Melanie: see you", source="Melanie", created_at=at[2] + CONTEXT_WINDOW * 2)
        )
        found = await backend.context_records([question.id, answer.id, note.id, late.id, "no-such-id"])
        named = {key: [record.id for record in records] for key, records in found.items()}
        # the same rule as the keyword index's context column: another source, within the window
        assert named == {question.id: [answer.id], answer.id: [question.id], note.id: [], late.id: []}
        await backend.forget(question.id)
        assert await backend.context_records([question.id, answer.id]) == {answer.id: []}
